"""Named locks in the scheduling core (crond/schedule/locks.py) as tables, in the shape of
test_core.py: a file's jobs, then wakes, ends and triggers with the whole list of
actions each must give. Times are seconds after T0; `every: 1m` fires at 60, 120, ...
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from crond.config import loader
from crond.schedule.locks import grantable
from tests.schedule.shell import Shell, at
from tests.schedule.test_core import End, Runs, Step, Trigger, Wake, WakeAt

LOCKS = "locks: {db: 1, gpu: 2}\n"


def jobs(*lines: str, daemon: str = "") -> str:
    head = f"daemon: {{{daemon}}}\n" if daemon else ""
    return LOCKS + head + "jobs:\n" + "".join(f"  {line}\n" for line in lines)


A = "a: {every: 1m, command: x, locks: [db]}"
B = "b: {every: 1m, command: x, locks: [db]}"
B_SKIP = "b: {every: 1m, command: x, locks: [db], on_lock: skip}"
B_GRACE = "b: {every: 1m, grace: 30s, command: x, locks: [db]}"
C_BOTH = "c: {every: 1m, command: x, locks: [db, gpu]}"
G1 = "g1: {every: 1m, command: x, locks: [gpu]}"
G2 = "g2: {every: 1m, command: x, locks: [gpu]}"
G3 = "g3: {every: 1m, command: x, locks: [gpu]}"
FREE = "f: {every: 1m, command: x}"
B_2M = "b: {every: 2m, command: x, locks: [db]}"

CASES: dict[str, tuple[str, list[Step]]] = {
    "one_place_the_second_waits_naming_the_holder": (
        jobs(A, B),
        [
            Wake(60, ["start a@60", "waits b@60 for db (a@60)", "moved a,b"]),
            Runs(["a@60"]),
            End("a"),
            Wake(61, ["start b@60"]),
            Runs(["b@60"]),
        ],
    ),
    "a_waiting_run_counts_as_going_for_overlap": (
        jobs(A, B),
        [
            Wake(60, ["start a@60", "waits b@60 for db (a@60)", "moved a,b"]),
            Wake(120, ["tell a: skip@120 overlap", "tell b: skip@120 overlap", "moved a,b"]),
        ],
    ),
    "on_lock_skip_is_skipped_at_once": (
        jobs(A, B_SKIP),
        [
            Wake(60, ["start a@60", "tell b: skip@60 lock", "moved a,b"]),
            End("a"),
            Wake(120, ["start a@120", "tell b: skip@120 lock", "moved a,b"]),
        ],
    ),
    "waiting_beyond_grace_is_missed_for_lock": (
        jobs(A, B_GRACE),
        [
            Wake(60, ["start a@60", "waits b@60 for db (a@60)", "moved a,b"]),
            WakeAt(90.000001),  # b's grace ends at 90: missed just after
            Wake(90.5, ["tell b: missed 1 60..60 lock"]),
            End("a"),
            Wake(120, ["start a@120", "waits b@120 for db (a@120)", "moved a,b"]),
        ],
    ),
    "capacity_two_lets_two_go": (
        jobs(G1, G2, G3),
        [
            Wake(
                60,
                [
                    "start g1@60",
                    "start g2@60",
                    "waits g3@60 for gpu (g1@60,g2@60)",
                    "moved g1,g2,g3",
                ],
            ),
            End("g2"),
            Wake(61, ["start g3@60"]),
            Runs(["g1@60", "g3@60"]),
        ],
    ),
    "all_or_nothing_never_one_of_two": (
        jobs(A, G1, G2, C_BOTH),
        [
            # c needs db and gpu: db is a's, so c takes no gpu place either.
            Wake(
                60,
                [
                    "start a@60",
                    "start g1@60",
                    "start g2@60",
                    "waits c@60 for db (a@60)",
                    "moved a,g1,g2,c",
                ],
            ),
            End("a"),
            Wake(61, []),  # db free, gpu full: c still holds nothing
            End("g1"),
            Wake(62, ["start c@60"]),
            Runs(["g2@60", "c@60"]),
        ],
    ),
    "slot_order_older_waiter_first": (
        jobs(A, B_2M),
        [
            Wake(60, ["start a@60", "moved a"]),
            Wake(120, ["waits b@120 for db (a@60)", "tell a: skip@120 overlap", "moved b,a"]),
            End("a"),
            # a's next slot (180) and b's waiting 120: b is older, it goes first.
            Wake(180, ["start b@120", "waits a@180 for db (b@120)", "moved a"]),
        ],
    ),
    "a_later_run_takes_a_lock_an_earlier_one_could_not_use": (
        jobs(C_BOTH, G1, G2, "d: {every: 1m, command: x, locks: [db]}"),
        [
            Wake(
                60,
                [
                    "start c@60",
                    "start g1@60",
                    "waits g2@60 for gpu (c@60,g1@60)",
                    "waits d@60 for db (c@60)",
                    "moved c,g1,g2,d",
                ],
            ),
            End("c"),
            # db and one gpu place are free: g2 (older in the waiting order) and d both fit.
            Wake(61, ["start g2@60", "start d@60"]),
        ],
    ),
    "jobs_without_locks_are_not_held": (
        jobs(A, B, FREE),
        [Wake(60, ["start a@60", "waits b@60 for db (a@60)", "start f@60", "moved a,b,f"])],
    ),
    "trigger_refused_while_the_lock_is_held": (
        jobs(A, B),
        [
            Wake(60, ["start a@60", "waits b@60 for db (a@60)", "moved a,b"]),
            Trigger("b", 70, "b has a run going and overlap: skip"),
            End("a"),
            Wake(61, ["start b@60"]),
            Trigger("a", 70, 'lock "db" is held by b'),
        ],
    ),
    "trigger_takes_the_lock": (
        jobs(A, B),
        [
            Trigger("a", 30, ["start a@30"]),
            Wake(60, ["tell a: skip@60 overlap", "waits b@60 for db (a@30)", "moved a,b"]),
        ],
    ),
    "claim_refused_gives_the_lock_back": (
        jobs(A, B),
        [
            # a took db and b waited; a's claim was refused: db is given back, and the
            # core wakes at once for b (whose claim this wake did not ask).
            Wake(60, ["waits b@60 for db ()", "moved a,b"], refused={("a", 60): "taken"}),
            WakeAt(60),
            Wake(60.5, ["start b@60"]),
            Runs(["b@60"]),
        ],
    ),
    "daemon_limit_and_locks": (
        jobs(A, B, FREE, daemon="max_running: 1"),
        [
            # The daemon's limit first: b and f wait in its queue.
            Wake(60, ["start a@60", "queued b@60 (1)", "queued f@60 (1)", "moved a,b,f"]),
            End("a"),
            Wake(61, ["start b@60"]),
            End("b"),
            Wake(62, ["start f@60"]),
        ],
    ),
    "daemon_limit_bounds_the_runs_that_waited_for_a_lock": (
        jobs(G1, G2, G3, FREE, daemon="max_running: 3"),
        [
            Wake(
                60,
                [
                    "start g1@60",
                    "start g2@60",
                    "waits g3@60 for gpu (g1@60,g2@60)",
                    "start f@60",
                    "moved g1,g2,g3,f",
                ],
            ),
            End("g1"),
            Wake(61, ["start g3@60"]),
        ],
    ),
    # With replicas the database has the last word: a run that took its locks here is
    # refused at its claim when runs of other replicas fill one (crond/store/pg_locks.py).
    "replicas_refused_for_a_lock_held_elsewhere_waits_and_asks_again_each_second": (
        jobs(A, FREE),
        [
            Wake(60, ["waits a@60 for db ()", "start f@60", "moved a,f"], {("a", 60): "lock"}),
            WakeAt(61),  # not at once: a lock given back elsewhere wakes nothing here
            Wake(61, [], {("a", 60): "lock"}),  # (refused again: told once, waits on)
            WakeAt(62),
            Wake(62, ["start a@60"]),
            Runs(["f@60", "a@60"]),
        ],
    ),
    "replicas_two_runs_refused_for_a_lock_held_elsewhere_ask_again_each_second_no_sooner": (
        jobs(A, B),
        [
            Wake(
                60,
                ["waits a@60 for db ()", "waits b@60 for db ()", "moved a,b"],
                {("a", 60): "lock", ("b", 60): "lock"},
            ),
            WakeAt(60),  # once at once: b was told to wait for a lock a had just given back
            Wake(60, [], {("a", 60): "lock", ("b", 60): "lock"}),  # (told once)
            WakeAt(61),  # the database's refusal frees nothing here: not at once again
            Wake(61, [], {("a", 60): "lock", ("b", 60): "lock"}),
            WakeAt(62),
            Wake(62, ["start a@60"]),
        ],
    ),
    "replicas_a_run_waiting_for_a_lock_elsewhere_is_missed_after_its_grace": (
        jobs(B_GRACE),
        [
            Wake(60, ["waits b@60 for db ()", "moved b"], {("b", 60): "lock"}),
            Wake(61, [], {("b", 60): "lock"}),
            Wake(90.5, ["tell b: missed 1 60..60 lock"]),
            WakeAt(120),
        ],
    ),
    "replicas_on_lock_skip_refused_elsewhere_is_skipped_told_by_one_replica": (
        jobs(B_SKIP),
        [
            Wake(
                60,
                ["tell b: skip@60 lock (if not told elsewhere)", "moved b"],
                {("b", 60): "lock"},
            ),
            WakeAt(120),
            Runs([]),
        ],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_locks(name: str) -> None:
    text, steps = CASES[name]
    shell = Shell(text)
    for step in steps:
        step(shell)


@pytest.mark.parametrize(
    ("needs", "held", "capacity", "expect"),
    [
        pytest.param(["db"], {}, {"db": 1}, True, id="free"),
        pytest.param(["db"], {"db": 1}, {"db": 1}, False, id="full"),
        pytest.param(["db", "gpu"], {"gpu": 2}, {"db": 1, "gpu": 2}, False, id="one_of_two_full"),
        pytest.param(["gpu"], {"gpu": 1}, {"gpu": 2}, True, id="room_left"),
        pytest.param(["gone"], {"gone": 5}, {}, True, id="lock_no_longer_in_the_file"),
        pytest.param([], {}, {}, True, id="no_locks"),
    ],
)
def test_grantable(
    needs: list[str], held: dict[str, int], capacity: dict[str, int], expect: bool
) -> None:
    assert grantable(needs, held, capacity) is expect


def test_removed_job_waiting_run_is_dropped() -> None:
    shell = Shell(jobs(A, B))
    shell.wake(at(60))
    shell.core.load(loader.loads(jobs(A)).jobs, at(61), None)
    shell.end("a")
    assert shell.wake(at(62)) == []
    assert not shell.core.locks
    assert shell.core.wake_at(timedelta(0)) == at(120)


def test_a_run_told_to_wait_for_a_lock_held_elsewhere_names_the_holders_the_database_named() -> (
    None
):
    """With replicas: b is told to wait for db, which a took here and gave back when the
    database refused a's claim (db is held on another replica): b's `job.waiting` names
    the holders the database named, and b is not woken at once for a lock not free."""
    shell = Shell(jobs(A, B))
    locks = shell.core.locks
    locks.said = {("a", at(60)): ("db", (("x", at(0)),))}
    wait = locks.wait(shell.core.schedule.entries["b"].job, at(60))
    assert (wait.lock, wait.holders) == ("db", (("x", at(0)),))
    assert locks.wake_at() != at(60)
