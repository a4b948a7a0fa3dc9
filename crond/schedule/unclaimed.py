"""The runs a replica could not claim because the database did not answer (docs/replicas.md).

With `daemon.database`, nothing starts without a claim: a start whose claim failed (the
database unreachable, or too slow) is not run. It waits here and is tried again with
backoff — from half a second, doubling, to five seconds — until its grace (slot + the
job's `grace`) runs out; then it is missed (`job.missed`, `reason: database`). A claim
that another replica holds is not a failure: that replica runs the slot, and this one
forgets it.

One slot a job waits at most: a newer due slot of the job takes the older one's place
(the older one is missed), so an outage of an hour holds one start per job, not one per
slot, and the database's return starts each job once, not a burst of its old slots.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from crond.config.loaded import LoadedJob
from crond.schedule.actions import Refused
from crond.schedule.heap import Schedule
from crond.schedule.pauses import Pauses
from crond.schedule.queue import AFTER, Missed, Waiting

_FIRST = timedelta(milliseconds=500)
_LONGEST = timedelta(seconds=5)


class Unclaimed:
    """The starts waiting for the database, one a job, over one `Schedule`."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self._items: dict[str, Waiting] = {}  # by job name, in the order they fell due
        self._delay = _FIRST
        self._retry_at: datetime | None = None

    def __bool__(self) -> bool:
        return bool(self._items)

    def __contains__(self, name: object) -> bool:
        """Whether a start of job `name` waits."""
        return name in self._items

    def drop(self, name: str) -> list[Missed]:
        """`name`'s waiting start, replaced by a newer start of its job: missed."""
        item = self._items.pop(name, None)
        if not self._items:
            self._retry_at = None  # (the next one waits its own backoff)
        return [] if item is None else [self._missed(item)]

    def put(self, job: LoadedJob, slot: datetime, now: datetime) -> list[Missed]:
        """`job`'s start for `slot` could not be claimed: it waits, and is tried again
        after the current backoff. An older waiting slot of the job is missed: its
        decision."""
        older = self._items.pop(job.name, None)
        self._items[job.name] = Waiting.of(job, slot)
        if self._retry_at is None:
            self._retry_at = now + self._delay
        return [] if older is None else [self._missed(older)]

    def wake_at(self) -> datetime | None:
        """When to wake for these by itself: the next try, or just after the earliest end
        of grace (None: nothing waits)."""
        if not self._items:
            return None
        ends = min(item.deadline for item in self._items.values()) + AFTER
        return ends if self._retry_at is None else min(self._retry_at, ends)

    def due(
        self, now: datetime, newer: Collection[str], pauses: Pauses
    ) -> tuple[list[tuple[LoadedJob, datetime]], list[Missed]]:
        """The starts to try claiming again now (taken off: those that fail again are put
        back), in the order they fell due; and those missed: their grace ran out, or a
        newer slot of their job starts at this wake (`newer`: never an older slot after a
        newer one). Those of a job removed from the file since are dropped, those of a
        job paused since passed over."""
        missed: list[Missed] = []
        for name, item in list(self._items.items()):
            if now > item.deadline or name in newer:
                del self._items[name]
                missed.append(self._missed(item))
        if not self._items:
            self._retry_at = None  # (the next one waits its own backoff)
        if self._retry_at is None or now < self._retry_at or not self._items:
            return [], missed
        starts = []
        for name, item in self._items.items():
            entry = self.schedule.entries.get(name)
            if entry is not None and not pauses.pass_over(name, now):
                starts.append((entry.job, item.slot))
        self._items = {}
        self._retry_at = None
        return starts, missed

    def tried(
        self, starts: list[tuple[LoadedJob, datetime]], refused: Refused, now: datetime
    ) -> None:
        """The claims of `starts` were asked again: a database that did not answer is
        tried again later, after a longer wait; one that answered starts the next
        outage's backoff afresh."""
        if any(refused.get((job.name, slot)) == "database" for job, slot in starts):
            self.failed(now)
        else:
            self.answered()

    def failed(self, now: datetime) -> None:
        """A try failed again: wait longer before the next."""
        self._delay = min(self._delay * 2, _LONGEST)
        if self._items:
            self._retry_at = now + self._delay

    def answered(self) -> None:
        """The database answered a claim: the next outage's backoff starts afresh."""
        self._delay = _FIRST

    def _missed(self, item: Waiting) -> Missed:
        return item.job, self.schedule.missed(item.job.name, item.slot, "database")
