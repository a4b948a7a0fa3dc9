"""Backfills in the scheduling core (crond/schedule/backfills.py) as tables, in the shape
of test_core.py: a backfill of past slots is begun, the loop asks at each wake which of
its slots start (`Core.backfill_ready`), runs end; the job's scheduled slots go on
beside it under the job's own rules."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import pytest

from crond.schedule.actions import Refusal
from crond.schedule.backfills import RETRY, Backfill
from tests.schedule.shell import Run, Shell, at, secs
from tests.schedule.test_core import A, B, Pause, Step, Wake, jobs


@dataclass(frozen=True)
class Begin:
    """A backfill of `job` over these slots (seconds after T0: the past ones negative)."""

    job: str
    slots: tuple[float, ...]

    def __call__(self, shell: Shell) -> None:
        assert shell.core.backfills.refusal(self.job) is None
        slots = deque(at(s) for s in self.slots)
        backfill = Backfill(f"bf-{self.job}", self.job, slots[0], at(0), slots, len(slots))
        shell.core.backfills.add(backfill)


@dataclass(frozen=True)
class Fill:
    """At `t`, the backfill slots that start (`job@slot`), each then a run going.
    `refused`: the store's answer for their claims (else each starts)."""

    t: float
    expect: list[str]
    refused: Refusal | None = None

    def __call__(self, shell: Shell) -> None:
        shell.now = at(self.t)
        starts = shell.core.backfills.ready(shell.now, shell.counts())
        assert [f"{job.name}@{secs(slot)}" for job, slot in starts] == self.expect
        for job, slot in starts:
            assert shell.core.backfills.starting.pop((job.name, slot)) == f"bf-{job.name}"
            if self.refused is None:
                shell.add(Run(job.name, slot))
            else:
                shell.core.backfills.refused(job.name, slot, self.refused, shell.now)


@dataclass(frozen=True)
class Ended:
    """The backfill run of `job` ends with `outcome`: its backfill's tally after it,
    `done/total succeeded failed` (`finished` once its last slot ended)."""

    job: str
    outcome: str
    expect: str

    def __call__(self, shell: Shell) -> None:
        backfill = shell.core.backfills.by_job[self.job]
        run = next(r for r in shell.runs if r.job == self.job and r.slot == backfill.current)
        shell.runs.remove(run)
        shell.core.locks.release(run.job, run.slot)
        got = shell.core.backfills.ended(self.job, run.slot, self.outcome)
        assert got is backfill
        tally = f"{got.done}/{got.total} {got.succeeded} {got.failed}"
        assert tally + (" finished" if got.finished else "") == self.expect
        assert got.finished is (self.job not in shell.core.backfills.by_job)


@dataclass(frozen=True)
class EndScheduled:
    """The oldest run of `job` that is not a backfill's (its slot not negative) ends."""

    job: str

    def __call__(self, shell: Shell) -> None:
        run = next(r for r in shell.runs if r.job == self.job and r.slot >= at(0))
        shell.runs.remove(run)
        shell.core.locks.release(run.job, run.slot)


@dataclass(frozen=True)
class Cancel:
    job: str
    left: int  # the slots it had left to start

    def __call__(self, shell: Shell) -> None:
        backfill = shell.core.backfills.by_job[self.job]
        assert len(backfill.left) == self.left
        assert shell.core.backfills.cancel(self.job) is backfill
        assert shell.core.backfills.find(backfill.id) is None


A_ALLOW2 = "a: {every: 1m, overlap: allow, max_running: 2, command: x}"
A_REPLACE = "a: {every: 1m, overlap: replace, command: x}"
A_QUEUE = "a: {every: 1m, overlap: queue, command: x}"
A_LOCK = "a: {every: 1m, command: x, locks: [db]}"
B_LOCK = "b: {every: 1m, command: x, locks: [db]}"
A_OFF = "a: {every: 1m, command: x, enabled: false}"

CASES: dict[str, tuple[str, list[Step]]] = {
    "one_at_a_time_oldest_first": (
        jobs(A),
        [
            Begin("a", (-300, -240, -180)),
            Fill(1, ["a@-300"]),
            Fill(2, []),  # its run goes
            Ended("a", "success", "1/3 1 0"),
            Fill(3, ["a@-240"]),
            Ended("a", "failed", "2/3 1 1"),  # whatever the outcome, the next follows
            Fill(4, ["a@-180"]),
            Ended("a", "success", "3/3 2 1 finished"),
            Fill(5, []),
        ],
    ),
    "overlap_skip_waits_for_a_scheduled_run_never_beside_it": (
        jobs(A),
        [
            Wake(60, ["start a@60", "moved a"]),
            Begin("a", (-300, -240)),
            Fill(61, []),
            EndScheduled("a"),
            Fill(62, ["a@-300"]),
        ],
    ),
    "a_scheduled_slot_while_a_backfill_run_goes_obeys_overlap_skip": (
        jobs(A),
        [
            Begin("a", (-300, -240)),
            Fill(1, ["a@-300"]),
            Wake(60, ["tell a: skip@60 overlap", "moved a"]),
        ],
    ),
    "overlap_queue_waits_while_a_slot_is_queued": (
        jobs(A_QUEUE),
        [
            Wake(60, ["start a@60", "moved a"]),
            Wake(120, ["queued a@120 (1)", "moved a"]),  # (BufferOne)
            Begin("a", (-300,)),
            EndScheduled("a"),
            Wake(121, ["start a@120"]),  # the queued slot first
            Fill(121, []),
            EndScheduled("a"),
            Fill(122, ["a@-300"]),
        ],
    ),
    "overlap_replace_waits_and_stops_nothing": (
        jobs(A_REPLACE),
        [
            Wake(60, ["start a@60", "moved a"]),
            Begin("a", (-300,)),
            Fill(61, []),
            EndScheduled("a"),
            Fill(62, ["a@-300"]),
        ],
    ),
    "overlap_allow_starts_beside_up_to_max_running": (
        jobs(A_ALLOW2),
        [
            Wake(60, ["start a@60", "moved a"]),
            Begin("a", (-300, -240)),
            Fill(61, ["a@-300"]),  # beside the scheduled run: 2 going
            Ended("a", "success", "1/2 1 0"),
            Wake(120, ["start a@120", "moved a"]),  # 2 going again
            Fill(121, []),  # max_running 2 reached
            EndScheduled("a"),
            Fill(122, ["a@-240"]),
        ],
    ),
    "the_daemons_max_running_holds_it": (
        jobs(A, B, daemon="max_running: 1"),
        [
            Wake(60, ["start a@60", "queued b@60 (1)", "moved a,b"]),
            Begin("b", (-300,)),
            Fill(61, []),
            EndScheduled("a"),
            Wake(62, ["start b@60"]),  # the daemon's queue goes first
            EndScheduled("b"),
            Fill(63, ["b@-300"]),
        ],
    ),
    "the_jobs_locks_hold_it": (
        "locks: {db: 1}\n" + jobs(A_LOCK, B_LOCK),
        [
            Wake(60, ["start a@60", "waits b@60 for db (a@60)", "moved a,b"]),
            Begin("a", (-300,)),
            Fill(61, []),  # db is held, and b waits for it first
            EndScheduled("a"),
            Wake(62, ["start b@60"]),
            Fill(62, []),
            EndScheduled("b"),
            Fill(63, ["a@-300"]),
        ],
    ),
    "a_paused_or_disabled_job_is_backfilled_as_a_trigger_runs": (
        jobs(A, "b: {every: 1m, command: x, enabled: false}"),
        [
            Pause("a"),
            Begin("a", (-300,)),
            Begin("b", (-300,)),
            Fill(1, ["a@-300", "b@-300"]),
        ],
    ),
    "cancelled_starts_nothing_more": (
        jobs(A),
        [
            Begin("a", (-300, -240, -180)),
            Fill(1, ["a@-300"]),
            Cancel("a", left=2),
            Fill(2, []),  # (its run goes on: the shell stops it)
        ],
    ),
    "the_database_did_not_answer_the_slot_is_tried_again": (
        jobs(A),
        [
            Begin("a", (-300, -240)),
            Fill(1, ["a@-300"], refused="database"),
            Fill(1.5, []),
            Fill(1 + RETRY.total_seconds(), ["a@-300"]),  # the same slot, first in line
        ],
    ),
    "another_replica_took_the_slot_the_next_follows": (
        jobs(A),
        [
            Begin("a", (-300, -240)),
            Fill(1, ["a@-300"], refused="taken"),
            Fill(2, ["a@-240"]),
            Ended("a", "success", "2/2 1 0 finished"),  # (1 ran elsewhere)
        ],
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_backfill_table(case: str) -> None:
    text, steps = CASES[case]
    shell = Shell(text)
    for step in steps:
        step(shell)


def test_one_backfill_a_job_at_a_time() -> None:
    shell = Shell(jobs(A, B))
    Begin("a", (-300,))(shell)
    refusal = shell.core.backfills.refusal("a")
    assert refusal is not None
    assert "bf-a" in refusal
    assert "0/1 done" in refusal
    assert shell.core.backfills.refusal("b") is None


def test_a_retry_is_a_wake_of_its_own() -> None:
    shell = Shell(jobs(A))
    Begin("a", (-300,))(shell)
    Fill(1, ["a@-300"], refused="database")(shell)
    assert shell.core.backfills.wake_at() == at(1) + RETRY
    assert shell.core.wake_at(at(0) - at(0)) == at(1) + RETRY


def test_a_backfill_ending_through_another_replica_starts_no_slot_meanwhile() -> None:
    """With replicas, a backfill found no longer running in the cluster waits for how it
    ended to be read (`ending`): none of its slots left starts meanwhile."""
    shell = Shell(jobs(A))
    Begin("a", (-300, -240))(shell)
    shell.core.backfills.by_job["a"].ending = True
    Fill(1, [])(shell)
    shell.core.backfills.by_job["a"].ending = False
    Fill(2, ["a@-300"])(shell)
