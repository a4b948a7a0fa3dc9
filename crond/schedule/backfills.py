"""Backfills (docs/schedules.md, "Backfill"): the runs of a job for each of its slots in a
past range, asked for by an operator (`crond backfill`).

The rules `Backfills` keeps (the loop asks `ready` at every wake):

- At most one backfill goes per job. Its slots start one at a time, oldest first: the
  next once the run of the one before has ended (whatever its outcome).
- A backfill's run is a start of the job beside its other runs (scheduled, triggered,
  chained, waiting), and their rules apply to it as to a trigger's: with `overlap: skip`,
  `queue` or `replace`, it starts only while no run of the job is going or waiting;
  with `allow`, while the job's `max_running` has room. The daemon's `max_running` and
  the job's locks hold it too. A backfill slot that may not start now is never skipped
  nor does it stop a run: it waits, and is asked again when a run ends.
- Like a trigger, it runs for a paused or disabled job (an operator asked for it).
- A backfill of a job no longer in the file (a reload) starts nothing more: the shell
  cancels it.
- A start whose claim was refused: "taken" (with replicas, another replica runs this
  backfill slot) counts as dealt with here and the next slot follows; "database" puts
  the slot back first in line, tried again a second later (so does "busy": with
  replicas, a run of an `overlap: skip` job goes on another replica).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from crond.config.loaded import LoadedJob
from crond.config.model import Overlap
from crond.schedule.actions import Key, Refusal
from crond.schedule.heap import Schedule
from crond.schedule.locks import Locks
from crond.schedule.proposal import Proposer, Running
from crond.schedule.queue import RunQueue

# How long a slot whose claim the database did not answer waits before it is tried again.
RETRY = timedelta(seconds=1)


@dataclass
class Backfill:
    """One backfill: its range, the slots left to start (oldest first) and its tally."""

    id: str
    job: str
    start: datetime  # the range [start, end)
    end: datetime
    left: deque[datetime]
    total: int  # slots in the range when it was asked for
    succeeded: int = 0  # slots whose run ended `success`
    failed: int = 0  # slots whose run did not succeed (failed, timeout, killed, lost)
    elsewhere: int = 0  # with replicas: slots another replica ran (told there)
    current: datetime | None = None  # the slot whose run is going
    retry_at: datetime | None = None  # a claim the database did not answer: not before
    ending: bool = False  # with replicas: ended through another replica (how: being read)

    @property
    def done(self) -> int:
        """Slots dealt with: their runs ended, here or on another replica."""
        return self.succeeded + self.failed + self.elsewhere

    @property
    def next_slot(self) -> datetime | None:
        """The slot going, else the next to start (None: all done)."""
        return self.current or (self.left[0] if self.left else None)

    @property
    def finished(self) -> bool:
        return self.current is None and not self.left


@dataclass
class Backfills:
    """The backfills going, by job, over the core's schedule, queue and locks."""

    schedule: Schedule
    queue: RunQueue
    locks: Locks
    proposer: Proposer  # (its `waiting`: a job's runs queued, for a lock, the database)
    by_job: dict[str, Backfill] = field(default_factory=dict)
    # The backfill starts decided, by (job, slot), until the shell records and spawns
    # them (it takes them: their record marks the run `backfill`, moves the progress).
    starting: dict[Key, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        """Whether a backfill waits to start its next slot (the loop wakes when runs end)."""
        return any(b.current is None and b.left for b in self.by_job.values())

    def refusal(self, name: str) -> str | None:
        """Why a new backfill of job `name` may not begin, if so."""
        going = self.by_job.get(name)
        if going is None:
            return None
        return (
            f"a backfill of {name} is already going ({going.id}: {going.done}/{going.total} "
            "done); wait for it, or stop it with `crond kill`"
        )

    def add(self, backfill: Backfill) -> None:
        self.by_job[backfill.job] = backfill

    def find(self, target: str) -> Backfill | None:
        """The backfill of job `target`, or the one whose id is `target`."""
        found = self.by_job.get(target)
        return found or next((b for b in self.by_job.values() if b.id == target), None)

    def wake_at(self) -> datetime | None:
        """When a slot the database did not answer is tried again (None: no such slot)."""
        return min((b.retry_at for b in self.by_job.values() if b.retry_at), default=None)

    def ready(self, now: datetime, running: Running) -> list[tuple[LoadedJob, datetime]]:
        """The backfill slots to start now, the oldest left of each backfill whose job may
        start a run (each taken off its backfill, its locks taken). A job's runs going
        (`running`) or waiting count against it."""
        starts: list[tuple[LoadedJob, datetime]] = []
        total = sum(running.values())
        for backfill in list(self.by_job.values()):
            if backfill.current is not None or not backfill.left or backfill.ending:
                continue
            entry = self.schedule.entries.get(backfill.job)
            if entry is None:  # (removed by a reload: the shell cancels it)
                continue
            if backfill.retry_at is not None and now < backfill.retry_at:
                continue
            runs = running.get(backfill.job, 0) + self.proposer.waiting(backfill.job)
            runs += self.proposer.backlog.count(backfill.job)  # (or for its own run's end)
            if not self._may_start(entry.job, runs, total + len(starts)):
                continue
            slot = backfill.left.popleft()
            backfill.current, backfill.retry_at = slot, None
            self.locks.take(entry.job, slot)
            self.starting[(backfill.job, slot)] = backfill.id
            starts.append((entry.job, slot))
        return starts

    def _may_start(self, job: LoadedJob, runs: int, total: int) -> bool:
        """The rule of a backfill's start beside the job's other `runs` (going or
        waiting) and the daemon's `total` runs going."""
        settings = job.settings
        if runs and settings.overlap is not Overlap.ALLOW:
            return False
        if settings.max_running is not None and runs >= settings.max_running:
            return False
        if self.queue.refusal(total) is not None:
            return False
        return self.locks.refusal(job) is None

    def ended(self, name: str, slot: datetime, outcome: str | None) -> Backfill | None:
        """The run of `name`'s backfill for `slot` ended with `outcome` (None: another
        replica ran the slot): its backfill, counted (None: no such backfill run)."""
        backfill = self.by_job.get(name)
        if backfill is None or backfill.current != slot:
            return None
        backfill.current = None
        if outcome is None:
            backfill.elsewhere += 1
        elif outcome == "success":
            backfill.succeeded += 1
        else:
            backfill.failed += 1
        if backfill.finished:
            del self.by_job[name]
        return backfill

    def refused(self, name: str, slot: datetime, reason: Refusal, now: datetime) -> Backfill | None:
        """A backfill start whose claim was refused (see the module's rules); its locks
        are given back. The backfill, when that ended it."""
        self.locks.release(name, slot)
        self.starting.pop((name, slot), None)
        backfill = self.by_job.get(name)
        if backfill is None or backfill.current != slot:
            return None
        if reason != "taken":  # the database did not answer, or the job is busy elsewhere
            backfill.current = None
            backfill.left.appendleft(slot)
            backfill.retry_at = now + RETRY
            return None
        return self.ended(name, slot, None)  # another replica runs it, and tells of it

    def cancel(self, name: str) -> Backfill | None:
        """Stop `name`'s backfill: no further slot of it starts (its run going, if any,
        is the shell's to stop). The backfill, or None."""
        backfill = self.by_job.pop(name, None)
        if backfill is not None:
            backfill.left.clear()
        return backfill

    def restore(self, backfills: Iterable[Backfill]) -> None:
        """The backfills a previous daemon left unfinished (from the store)."""
        for backfill in backfills:
            self.by_job[backfill.job] = backfill
