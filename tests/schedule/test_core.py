"""crond.schedule.core as tables: a file's jobs, then steps — a wake at `now` with the
store's answer for its claims, a run's end, a pause, a resume, the daemon's limit, a
trigger, a reload — each with the whole list of actions it must give (tests/schedule/shell.py
carries them out as the loop does, and renders them as lines).

Times are seconds after T0, a whole hour: `every: 1m` fires at 60, 120, ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from crond.config import loader
from crond.schedule.actions import Refusal
from tests.schedule.shell import Shell, at, render

Refused = dict[tuple[str, float], Refusal]


@dataclass(frozen=True)
class Wake:
    """A wake at `t`: the actions carried out, in order."""

    t: float
    expect: list[str]
    refused: Refused = field(default_factory=dict)
    quiet: tuple[tuple[str, float], ...] = ()
    lead: float = 0

    def __call__(self, shell: Shell) -> None:
        refused = {(job, at(s)): why for (job, s), why in self.refused.items()}
        quiet = [(job, at(s)) for job, s in self.quiet]
        got = shell.wake(
            at(self.t), lead=timedelta(seconds=self.lead), refused=refused, quiet=quiet
        )
        assert [render(a) for a in got] == self.expect


@dataclass(frozen=True)
class End:
    job: str

    def __call__(self, shell: Shell) -> None:
        shell.end(self.job)


@dataclass(frozen=True)
class Pause:
    job: str
    until: float | None = None

    def __call__(self, shell: Shell) -> None:
        shell.core.pauses.pause(self.job, None if self.until is None else at(self.until))


@dataclass(frozen=True)
class Resume:
    job: str
    skipped: int | None

    def __call__(self, shell: Shell) -> None:
        assert shell.core.pauses.resume(self.job) == self.skipped


@dataclass(frozen=True)
class Limit:
    max_running: int | None

    def __call__(self, shell: Shell) -> None:
        shell.core.queue.limit = self.max_running


@dataclass(frozen=True)
class Trigger:
    job: str
    t: float
    expect: str | list[str]  # the refusal, or the actions

    def __call__(self, shell: Shell) -> None:
        got = shell.trigger(self.job, at(self.t))
        assert (got if isinstance(got, str) else [render(a) for a in got]) == self.expect


@dataclass(frozen=True)
class WakeAt:
    """The core's next wake by itself (`lead` before a fire), as seconds; None: never."""

    expect: float | None
    lead: float = 0

    def __call__(self, shell: Shell) -> None:
        got = shell.core.wake_at(timedelta(seconds=self.lead))
        assert got == (None if self.expect is None else at(self.expect))


@dataclass(frozen=True)
class Load:
    text: str
    t: float
    expect: tuple[list[str], list[str], list[str]]  # added, removed, changed

    def __call__(self, shell: Shell) -> None:
        jobs = loader.loads(self.text).jobs
        diff = shell.core.load(jobs, at(self.t), None)
        assert (diff.added, diff.removed, diff.changed) == self.expect
        shell.jobs = dict(jobs)


@dataclass(frozen=True)
class Runs:
    """The runs going: `job@slot` each, oldest first."""

    expect: list[str]

    def __call__(self, shell: Shell) -> None:
        assert [f"{r.job}@{(r.slot - at(0)).total_seconds():g}" for r in shell.runs] == self.expect


Step = Callable[[Shell], None]


def jobs(*lines: str, daemon: str = "") -> str:
    head = f"daemon: {{{daemon}}}\n" if daemon else ""
    return head + "jobs:\n" + "".join(f"  {line}\n" for line in lines)


A = "a: {every: 1m, command: x}"
B = "b: {every: 1m, command: x}"
A_GRACE10 = "a: {every: 1m, grace: 10s, command: x}"
B_GRACE10 = "b: {every: 1m, grace: 10s, command: x}"
A_REPLACE = "a: {every: 1m, overlap: replace, command: x}"
A_ALLOW2 = "a: {every: 1m, overlap: allow, max_running: 2, command: x}"
A_CATCHUP = "a: {every: 1m, grace: 5s, catchup: latest, catchup_window: 1h, command: x}"

CASES: dict[str, tuple[str, list[Step]]] = {
    # --- R9: a due slot starts, late ones are missed ---------------------------------------
    "nothing_due_yet": (jobs(A), [Wake(30, []), WakeAt(60)]),
    "a_due_slot_starts": (jobs(A), [Wake(60, ["start a@60", "moved a"]), Runs(["a@60"])]),
    "late_within_grace_starts": (jobs(A_GRACE10), [Wake(70, ["start a@60", "moved a"])]),
    "late_beyond_grace_is_missed": (
        jobs(A_GRACE10),
        [Wake(70.5, ["tell a: missed 1 60..60 grace", "moved a"]), Runs([])],
    ),
    "suspend_runs_the_latest_and_misses_the_others": (
        jobs(A),
        [Wake(185, ["tell a: missed 2 60..120 grace", "start a@180", "moved a"])],
    ),
    "catchup_runs_the_latest_beyond_grace": (
        jobs(A_CATCHUP),
        [Wake(200, ["tell a: caught up 2 for 180", "start a@180", "moved a"])],
    ),
    "two_jobs_due_at_once_start_in_order": (
        jobs(A, B),
        [Wake(60, ["start a@60", "start b@60", "moved a,b"])],
    ),
    "lead_decides_the_slot_ahead": (
        jobs(A),
        [WakeAt(59.5, lead=0.5), Wake(59.5, ["start a@60", "moved a"], lead=0.5)],
    ),
    # --- overlap --------------------------------------------------------------------------
    "skip_with_a_run_going": (
        jobs(A),
        [
            Wake(60, ["start a@60", "moved a"]),
            Wake(120, ["tell a: skip@120 overlap", "moved a"]),
            End("a"),
            Wake(180, ["start a@180", "moved a"]),
        ],
    ),
    "replace_with_a_run_going": (
        jobs(A_REPLACE),
        [
            Wake(60, ["start a@60", "moved a"]),
            Wake(120, ["replace a@120", "moved a"]),
            Runs(["a@120"]),
        ],
    ),
    "allow_up_to_the_jobs_max_running": (
        jobs(A_ALLOW2),
        [
            Wake(60, ["start a@60", "moved a"]),
            Wake(120, ["start a@120", "moved a"]),
            Wake(180, ["tell a: skip@180 max_running", "moved a"]),
            End("a"),
            Wake(240, ["start a@240", "moved a"]),
        ],
    ),
    # --- the daemon's max_running ---------------------------------------------------------
    "daemon_limit_queues_then_starts_when_a_run_ends": (
        jobs(A, B, daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            WakeAt(120),  # b's deadline (60 + 5m) is later than a's next fire
            End("a"),
            Wake(61, ["start b@60"]),
            Runs(["b@60"]),
        ],
    ),
    "daemon_limit_queued_run_missed_after_its_grace": (
        jobs(A_GRACE10, B_GRACE10, daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            WakeAt(70.000001),  # just after b's grace
            Wake(70.000001, ["tell b: missed 1 60..60 queue"]),
            WakeAt(120),
        ],
    ),
    "daemon_limit_queued_run_at_the_end_of_its_grace_starts": (
        jobs(A_GRACE10, B_GRACE10, daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            End("a"),
            Wake(70, ["start b@60"]),
        ],
    ),
    "daemon_limit_a_queued_run_counts_as_going_for_skip": (
        jobs(A, B, daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            Wake(120, ["tell a: skip@120 overlap", "tell b: skip@120 overlap", "moved a,b"]),
        ],
    ),
    "daemon_limit_first_come_first_served": (
        jobs(A, B, "c: {every: 1m, command: x}", daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "queued c@60 (1)", "moved a,b,c"]),
            End("a"),
            Wake(61, ["start b@60"]),
            End("b"),
            Wake(62, ["start c@60"]),
        ],
    ),
    "daemon_limit_raised_lets_the_queue_start": (
        jobs(A, B, daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            Limit(2),
            Wake(61, ["start b@60"]),
        ],
    ),
    "daemon_limit_a_replace_is_never_held": (
        jobs(A_REPLACE, B, daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            Wake(
                120,
                [
                    "replace a@120",
                    "tell b: skip@120 overlap",
                    "moved a,b",
                ],
            ),
            Runs(["a@120"]),
        ],
    ),
    "daemon_limit_a_replace_jobs_newer_fire_replaces_its_queued_run": (
        jobs(B, A_REPLACE, daemon="max_running: 1"),
        [
            Wake(60, ["start b@60", "queued a@60 (1)", "moved b,a"]),
            Wake(
                120,
                [
                    "tell b: skip@120 overlap",
                    "tell a: missed 1 60..60 queue (if not told elsewhere)",
                    "queued a@120 (1)",
                    "moved b,a",
                ],
            ),
            End("b"),
            Wake(121, ["start a@120"]),
        ],
    ),
    "daemon_limit_a_replace_jobs_run_leaving_the_queue_is_replaced_by_its_newer_slot": (
        jobs(A_REPLACE, B, daemon="max_running: 1"),
        [
            Trigger("b", 10, ["start b@10"]),
            Wake(60, ["queued a@60 (1)", "tell b: skip@60 overlap", "moved a,b"]),
            End("b"),
            Limit(None),
            # a@60 may leave the queue as a@120 falls due: a@120 replaces it (never
            # two runs of a replace job)
            Wake(120, ["tell a: missed 1 60..60 queue", "start a@120", "start b@120", "moved a,b"]),
            Runs(["a@120", "b@120"]),
        ],
    ),
    "daemon_limit_a_queued_run_of_a_job_paused_since_is_passed_over": (
        jobs(A, B, daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            Pause("b"),
            End("a"),
            Wake(61, []),
            Resume("b", 1),
        ],
    ),
    # --- claims: taken, busy, database ----------------------------------------------------
    "claim_taken_nothing_here": (
        jobs(A),
        [Wake(60, ["moved a"], refused={("a", 60): "taken"}), Runs([])],
    ),
    "claim_busy_tells_the_skip": (
        jobs(A),
        [Wake(60, ["tell a: skip@60 overlap", "moved a"], refused={("a", 60): "busy"})],
    ),
    "claim_database_retried_after_backoff": (
        jobs(A),
        [
            Wake(60, ["moved a"], refused={("a", 60): "database"}),
            WakeAt(60.5),
            Wake(60.5, [], refused={("a", 60): "database"}),
            WakeAt(61.5),  # the backoff doubles
            Wake(61.5, ["start a@60"]),
            Runs(["a@60"]),
        ],
    ),
    "claim_database_missed_after_grace": (
        jobs(A_GRACE10),
        [
            Wake(60, ["moved a"], refused={("a", 60): "database"}),
            Wake(70.5, ["tell a: missed 1 60..60 database"]),
            WakeAt(120),
        ],
    ),
    "claim_database_missed_when_a_newer_slot_starts": (
        jobs(A),
        [
            Wake(60, ["moved a"], refused={("a", 60): "database"}),
            Wake(120, ["tell a: missed 1 60..60 database", "start a@120", "moved a"]),
        ],
    ),
    "claim_database_a_newer_refused_slot_takes_the_older_ones_place": (
        jobs(A),
        [
            Wake(60, ["moved a"], refused={("a", 60): "database"}),
            Wake(
                120,
                ["tell a: missed 1 60..60 database", "moved a"],
                refused={("a", 120): "database"},
            ),
        ],
    ),
    "claim_database_an_older_waiting_start_missed_by_a_newer_refused_one": (
        jobs("a: {every: 1s, command: x}"),
        [
            Wake(1, ["moved a"], refused={("a", 1): "database"}),
            Wake(1.5, [], refused={("a", 1): "database"}),
            WakeAt(2),  # the next fire, before the next try (2.5)
            Wake(
                2,
                ["tell a: missed 1 1..1 database", "moved a"],
                refused={("a", 2): "database"},
            ),
            WakeAt(3),  # the next fire, and the next try (the backoff goes on: 1 s)
            Wake(3, ["tell a: missed 1 2..2 database", "start a@3", "moved a"]),
        ],
    ),
    "claim_database_a_retried_start_waits_under_the_daemons_limit": (
        jobs(A, B, daemon="max_running: 1"),
        [
            Wake(60, ["queued b@60 (0)", "moved a,b"], refused={("a", 60): "database"}),
            # b leaves the queue (a is not going: its place is free), and a, whose claim
            # the database now answers, waits in its turn
            Wake(60.5, ["queued a@60 (1)", "start b@60"]),
            Runs(["b@60"]),
            End("b"),
            Wake(61, ["start a@60"]),
        ],
    ),
    "claim_database_a_newer_slot_starting_before_the_retry_misses_the_waiting_one": (
        jobs("a: {every: 10s, command: x}"),
        [
            Wake(10, ["moved a"], refused={("a", 10): "database"}),
            Wake(10.5, [], refused={("a", 10): "database"}),
            Wake(11.5, [], refused={("a", 10): "database"}),
            Wake(13.5, [], refused={("a", 10): "database"}),
            Wake(17.5, [], refused={("a", 10): "database"}),
            WakeAt(20),  # the next try is at 22.5
            # the database answers again: a@20 starts, a@10 never after it (nor beside it)
            Wake(20, ["tell a: missed 1 10..10 database", "start a@20", "moved a"]),
            WakeAt(30),
        ],
    ),
    "claim_database_a_newer_queued_slot_leaving_the_queue_misses_the_waiting_one": (
        jobs("a: {every: 10s, overlap: allow, command: x}", daemon="max_running: 1"),
        [
            Wake(10, ["start a@10", "moved a"]),
            Wake(20, ["queued a@20 (1)", "moved a"]),
            Wake(30, ["queued a@30 (1)", "moved a"]),
            End("a"),
            Wake(30, [], refused={("a", 20): "database"}),
            # a@30 leaves the queue while a@20 waits for the database: a@20 is missed
            Wake(30.5, ["tell a: missed 1 20..20 database", "start a@30"]),
            Runs(["a@30"]),
            WakeAt(40),
        ],
    ),
    "claim_database_a_paused_jobs_waiting_start_is_passed_over": (
        jobs(A),
        [
            Wake(60, ["moved a"], refused={("a", 60): "database"}),
            Pause("a"),
            Wake(60.5, []),
            Resume("a", 1),
            WakeAt(120),
        ],
    ),
    # --- told slots another replica tells of ----------------------------------------------
    "quiet_skip_is_not_told": (
        jobs(A),
        [Wake(60, ["start a@60", "moved a"]), Wake(120, ["moved a"], quiet=(("a", 120),))],
    ),
    "quiet_missed_is_not_told": (
        jobs(A_GRACE10),
        [Wake(130.5, ["moved a"], quiet=(("a", 120),))],
    ),
    "quiet_queue_miss_is_not_told": (
        jobs(A_GRACE10, B_GRACE10, daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            Wake(71, [], quiet=(("b", 60),)),
        ],
    ),
    # --- pauses ---------------------------------------------------------------------------
    "a_pause_passes_over_slots": (
        jobs(A),
        [
            Pause("a"),
            Wake(60, ["tell a: paused 1", "moved a"]),
            Wake(125, ["tell a: paused 1", "moved a"]),
            Resume("a", 2),
            Wake(180, ["start a@180", "moved a"]),
        ],
    ),
    "a_pause_ends_by_itself_and_the_slot_at_its_end_runs": (
        jobs(A),
        [
            Pause("a", until=120),
            WakeAt(60),
            Wake(60, ["tell a: paused 1", "moved a"]),
            WakeAt(120),
            Wake(120, ["resumed a (1)", "start a@120", "moved a"]),
        ],
    ),
    "a_pause_ending_at_a_slot_decided_in_the_lead_runs_it": (
        jobs(A),
        [
            Pause("a", until=120),
            Wake(60, ["tell a: paused 1", "moved a"]),
            WakeAt(119.5, lead=0.5),
            Wake(119.5, ["start a@120", "moved a"], lead=0.5),
            WakeAt(120),
            Wake(120, ["resumed a (1)"]),
        ],
    ),
    "a_suspend_across_a_pause_ending_at_a_slot_runs_that_slot": (
        jobs(A),
        [Pause("a", until=120), Wake(125, ["resumed a (1)", "start a@120", "moved a"])],
    ),
    "a_pause_end_between_slots_wakes_at_the_end": (
        jobs("a: {every: 1h, command: x}"),
        [Pause("a", until=90), WakeAt(90), Wake(90, ["resumed a (0)"]), WakeAt(3600)],
    ),
    "a_suspend_across_a_pause_end": (
        jobs(A),
        [
            Pause("a", until=150),
            Wake(185, ["resumed a (2)", "start a@180", "moved a"]),
        ],
    ),
    "a_suspend_across_a_pause_end_misses_what_came_after_it": (
        jobs(A),
        [
            Pause("a", until=150),
            Wake(
                245, ["resumed a (2)", "tell a: missed 1 180..180 grace", "start a@240", "moved a"]
            ),
        ],
    ),
    # --- trigger --------------------------------------------------------------------------
    "trigger_starts_now": (jobs(A), [Trigger("a", 10, ["start a@10"]), WakeAt(60)]),
    "trigger_of_a_paused_job_starts": (jobs(A), [Pause("a"), Trigger("a", 10, ["start a@10"])]),
    "trigger_refused_skip_with_a_run_going": (
        jobs(A),
        [Trigger("a", 10, ["start a@10"]), Trigger("a", 11, "a has a run going and overlap: skip")],
    ),
    "trigger_refused_at_the_jobs_max_running": (
        jobs(A_ALLOW2),
        [
            Trigger("a", 10, ["start a@10"]),
            Trigger("a", 11, ["start a@11"]),
            Trigger("a", 12, "a's max_running (2) is reached: 2 going"),
        ],
    ),
    "trigger_refused_at_the_daemons_max_running": (
        jobs(A, B, daemon="max_running: 1"),
        [
            Trigger("a", 10, ["start a@10"]),
            Trigger("b", 11, "the daemon's max_running (1) is reached: 1 going"),
        ],
    ),
    "trigger_refused_while_runs_wait": (
        jobs(A, B, "c: {every: 1h, command: x}", daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            Trigger("c", 61, "the daemon's max_running (1) is reached: 1 going, and 1 waiting"),
        ],
    ),
    "trigger_refused_skip_while_its_start_waits_for_the_database": (
        jobs(A),
        [
            Wake(60, ["moved a"], refused={("a", 60): "database"}),
            Trigger("a", 60.2, "a has a run going and overlap: skip"),
            Wake(60.5, ["start a@60"]),
            Runs(["a@60"]),
        ],
    ),
    "trigger_replace_takes_the_place_of_its_start_waiting_for_the_database": (
        jobs(A_REPLACE),
        [
            Wake(60, ["moved a"], refused={("a", 60): "database"}),
            Trigger(
                "a",
                60.2,
                ["tell a: missed 1 60..60 database (if not told elsewhere)", "start a@60.2"],
            ),
            Wake(60.5, []),
            Runs(["a@60.2"]),
        ],
    ),
    "trigger_refused_unknown_job": (jobs(A), [Trigger("nope", 10, 'there is no job "nope"')]),
    "trigger_replace_with_a_run_going": (
        jobs(A_REPLACE, daemon="max_running: 1"),
        [Trigger("a", 10, ["start a@10"]), Trigger("a", 11, ["replace a@11"]), Runs(["a@11"])],
    ),
    "trigger_replace_refused_while_its_run_waits": (
        jobs(B, A_REPLACE, daemon="max_running: 1"),
        [
            Wake(60, ["start b@60", "queued a@60 (1)", "moved b,a"]),
            End("b"),
            # a queued run is not going: nothing to replace, and runs wait
            Trigger("a", 61, "the daemon's max_running (1) is reached: 0 going, and 1 waiting"),
        ],
    ),
    # --- reloads --------------------------------------------------------------------------
    "load_a_removed_job_stops_and_an_added_one_starts_from_now": (
        jobs(A, B),
        [
            Load(jobs(A, "c: {every: 1m, command: x}"), 90, (["c"], ["b"], [])),
            Wake(120, ["tell a: missed 1 60..60 grace", "start a@120", "start c@120", "moved a,c"]),
        ],
    ),
    "load_a_changed_job_keeps_its_cursor": (
        jobs(A),
        [
            Wake(60, ["start a@60", "moved a"]),
            End("a"),
            Load(jobs("a: {every: 30s, command: x}"), 60, ([], [], ["a"])),
            WakeAt(90),
            Wake(90, ["start a@90", "moved a"]),
        ],
    ),
    "load_a_removed_jobs_queued_run_is_dropped": (
        jobs(A, B, daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            Load(jobs(A), 61, ([], ["b"], [])),
            End("a"),
            Wake(62, []),
        ],
    ),
    "load_a_removed_and_added_job_is_still_paused": (
        jobs(A),
        [
            Pause("a"),
            Load(jobs(B), 10, (["b"], ["a"], [])),
            Load(jobs(A, B), 20, (["a"], [], [])),
            Wake(60, ["tell a: paused 1", "start b@60", "moved a,b"]),
        ],
    ),
    # --- wake_at: the earliest of what it waits for ---------------------------------------
    "wake_at_nothing_to_wake_for": (
        jobs("a: {every: 1m, enabled: false, command: x}"),
        [WakeAt(None)],
    ),
    "wake_at_a_retry_before_the_next_fire": (
        jobs(A, "b: {every: 1h, command: x}"),
        [Wake(60, ["moved a"], refused={("a", 60): "database"}), WakeAt(60.5, lead=0.1)],
    ),
    "wake_at_the_lead_before_a_fire_before_a_pause_end": (
        jobs(A),
        [
            Pause("b", until=100),
            WakeAt(59.9, lead=0.1),
            Wake(60, ["start a@60", "moved a"]),
            WakeAt(100),
        ],
    ),
}


@pytest.mark.parametrize(("text", "steps"), CASES.values(), ids=CASES.keys())
def test_core(text: str, steps: list[Step]) -> None:
    shell = Shell(text)
    for step in steps:
        step(shell)
