"""The daemon's `max_running` (docs/control.md "Concurrency limits"): how many runs the
whole daemon lets go at once, and the queue of due runs waiting beyond it.

The rules `RunQueue` keeps (crond/schedule/core.py asks it at every wake that starts runs):

- A due run beyond the limit waits (`job.queued`, with `job`, `slot`, `running`), first
  come first served: while any run waits, every later due start waits behind it, even
  when a place is free at that wake.
- A queued run counts as going, for its job's overlap and its job's `max_running`.
- It starts as soon as a place is free (a run ended, a reload raised or lifted the
  limit), in the order the runs fell due; if its grace (slot + the job's `grace`) runs
  out first it is missed: `job.missed` with `reason: queue`, count 1, its slot as first
  and last. The core wakes just after the earliest end of grace (`wake_at`): at the end
  itself the run may still start (R9: `now - slot <= grace` starts).
- A replacement of runs going (`overlap: replace`) takes their place: it is never held,
  and the job's queued runs, replaced by a newer one, are missed (`drop`).
- A queued run of a job removed since is dropped; of a job paused since, passed over
  (counted into the pause, as a slot of the pause).
- A trigger beyond the limit, or while runs wait, is refused, not queued (`refusal`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from crond.config.loaded import LoadedJob
from crond.schedule.heap import Schedule
from crond.schedule.pauses import Pauses
from crond.schedule.rules import Decision

# A waiting run whose grace ends at t is missed after t: the core wakes this much after
# t, never at t itself (it would find nothing to do, and wake at t again).
AFTER = timedelta(microseconds=1)
_NOTHING_HELD: frozenset[int] = frozenset()

# A run missed: its job (which may have left the file since) and the decision to tell.
Missed = tuple[LoadedJob, Decision]


@dataclass(frozen=True)
class Waiting:
    """A due run that waits: for a place under the daemon's `max_running` (here), or for
    the database to answer its claim (unclaimed.py). Missed after its deadline."""

    job: LoadedJob
    slot: datetime
    deadline: datetime  # slot + the job's grace: missed after it

    @classmethod
    def of(cls, job: LoadedJob, slot: datetime) -> Waiting:
        return cls(job, slot, slot + job.settings.grace)


class RunQueue:
    """The daemon's limit and the runs waiting for it, over one `Schedule`. `running`,
    wherever asked, is how many runs are going now."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.limit: int | None = None  # None: no limit
        self._items: deque[Waiting] = deque()  # in the order they fell due
        # How many of each job wait (read for every due entry: empty, the usual case, it
        # costs one truth test).
        self.counts: dict[str, int] = {}
        self._ends: datetime | None = None  # the earliest end of grace among them

    def __bool__(self) -> bool:
        return bool(self._items)

    def wake_at(self) -> datetime | None:
        """When to wake for the queue by itself: just after the earliest end of grace,
        when that run is missed (None: nothing waits)."""
        return None if self._ends is None else self._ends + AFTER

    def refusal(self, running: int) -> str | None:
        """Why a trigger may not start now (a replacement is never asked), if it may not."""
        limit = self.limit
        if limit is None:
            return None
        if running >= limit or self._items:
            queued = f", and {len(self._items)} waiting" if self._items else ""
            return f"the daemon's max_running ({limit}) is reached: {running} going{queued}"
        return None

    def hold(
        self,
        decisions: list[Decision],
        replacing: Collection[int],
        running: int,
        takes: Callable[[int], bool] | None = None,
    ) -> frozenset[int]:
        """Which of a wake's decisions wait (their indexes): the starts beyond the limit,
        and all starts while runs wait. `replacing`: the decisions that replace runs going
        (never held). `takes`: asked of each start not held whether it takes its locks
        (locks.py); one that does not takes no place either."""
        limit = self.limit
        if limit is None:
            for i, decision in enumerate(decisions):
                if takes is not None and decision.start is not None and i not in replacing:
                    takes(i)
            return _NOTHING_HELD
        room = limit - running
        held: set[int] = set()
        for i, decision in enumerate(decisions):
            if decision.start is None or i in replacing:
                continue
            if self._items or room <= 0:
                held.add(i)
            elif takes is None or takes(i):
                room -= 1
        return frozenset(held)

    def put(self, job: LoadedJob, slot: datetime) -> None:
        """A held start of `job` for `slot` waits, at the end of the queue."""
        item = Waiting.of(job, slot)
        self._items.append(item)
        self.counts[job.name] = self.counts.get(job.name, 0) + 1
        if self._ends is None or item.deadline < self._ends:
            self._ends = item.deadline

    def drain(
        self, now: datetime, pauses: Pauses, running: int
    ) -> tuple[list[tuple[LoadedJob, datetime]], list[Missed]]:
        """The queued runs there is room for, in order, taken off the queue to start now;
        and those whose grace ran out (missed). Those of a job removed
        since are dropped, those of a job paused since passed over."""
        limit = self.limit
        room = None if limit is None else limit - running
        starts: list[tuple[LoadedJob, datetime]] = []
        missed: list[Missed] = []
        kept: deque[Waiting] = deque()
        for item in self._items:
            if now > item.deadline:
                missed.append(self._missed(item))
            elif room is not None and room <= len(starts):
                kept.append(item)
            elif (entry := self.schedule.entries.get(item.job.name)) is not None and not (
                pauses.pass_over(item.job.name, now)
            ):
                starts.append((entry.job, item.slot))
        self._items = kept
        self.counts = {}
        for item in kept:
            self.counts[item.job.name] = self.counts.get(item.job.name, 0) + 1
        self._ends = min((item.deadline for item in kept), default=None)
        return starts, missed

    def drop(self, name: str) -> list[Missed]:
        """The queued runs of `name`, replaced by a newer one (overlap: replace): missed."""
        if name not in self.counts:
            return []
        dropped = [item for item in self._items if item.job.name == name]
        for item in dropped:
            self._items.remove(item)
        del self.counts[name]
        self._ends = min((item.deadline for item in self._items), default=None)
        return [self._missed(item) for item in dropped]

    def _missed(self, item: Waiting) -> Missed:
        return item.job, self.schedule.missed(item.job.name, item.slot, "queue")
