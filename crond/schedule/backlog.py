"""Runs that wait for their own job (docs/schedules.md): `overlap: queue`'s one buffered
run (Temporal's BufferOne) and `catchup: all`'s missed slots, oldest first.

The rules `Backlog` keeps (crond/schedule/proposal.py asks it at every wake):

- A job's waiting slots start one at a time, oldest first, each once no run of the job is
  going (nor waiting in the daemon's queue or for the database); the core wakes when a
  run ends (the loop's `_ended`).
- Each waits at most until its deadline: `overlap: queue`, its slot + the job's `grace`
  (as the daemon's queue); a catch-up slot, its slot + `catchup_window`. Past it, it is
  missed (`job.missed`, reason `queue`, or `grace` for a catch-up slot).
- A slot of a job removed since is dropped; of a job paused since, passed over; of a job
  changed since (a reload), started as the job now is.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from crond.config.loaded import LoadedJob
from crond.schedule.actions import Action, Queued, Tell
from crond.schedule.heap import Schedule
from crond.schedule.pauses import Pauses
from crond.schedule.queue import AFTER, Missed
from crond.schedule.rules import Decision

Slot = tuple[LoadedJob, datetime]


class Backlog:
    """Per job, the slots waiting for its runs to end, over one `Schedule`."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self._waiting: dict[str, deque[tuple[datetime, datetime, str]]] = {}

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def __contains__(self, name: str) -> bool:
        return name in self._waiting

    def names(self) -> list[str]:
        return list(self._waiting)

    def count(self, name: str) -> int:
        return len(self._waiting.get(name, ()))

    def slots(self, name: str) -> list[datetime]:
        return [slot for slot, _, _ in self._waiting.get(name, ())]

    def wake_at(self) -> datetime | None:
        """Just after the earliest deadline (None: nothing waits)."""
        ends = [items[0][1] for items in self._waiting.values()]
        return min(ends) + AFTER if ends else None

    def put(
        self,
        job: LoadedJob,
        slots: Iterable[datetime],
        wait: timedelta,
        reason: str,
        most: int,
    ) -> list[datetime]:
        """`slots` of `job` wait (after those waiting), each until slot + `wait`; missed
        for `reason` after it. At most `most` wait: the oldest beyond are returned (to be
        told as missed): memory stays bounded while a run never ends."""
        items = self._waiting.setdefault(job.name, deque())
        items.extend((slot, slot + wait, reason) for slot in slots)
        over = [items.popleft()[0] for _ in range(len(items) - most)]
        if not items:
            del self._waiting[job.name]
        return over

    def wait(self, job: LoadedJob, decision: Decision, running: int) -> list[Action]:
        """A decision's slots that wait for the job's runs to end: each until its grace
        (`overlap: queue`, told as `job.queued`) or its catch-up window (`catchup: all`,
        at most `catchup_max`: the oldest beyond are told missed)."""
        settings = job.settings
        if decision.wait_reason == "queue":
            self.put(job, decision.waits, settings.grace, "queue", 1)
            return [Queued(job, slot, running) for slot in decision.waits]
        most, window = settings.catchup_max, settings.catchup_window
        over = self.put(job, decision.waits, window, "grace", most)
        return [Tell(job, self.schedule.missed(job.name, slot, "grace")) for slot in over]

    def ready(
        self, now: datetime, going: Mapping[str, int], pauses: Pauses
    ) -> tuple[list[Slot], list[Missed]]:
        """The oldest waiting slot of each job with no run going, taken off to start now;
        and the slots whose deadline passed (missed). Those of a job removed since are
        dropped, those of a job paused since passed over."""
        starts: list[Slot] = []
        missed: list[Missed] = []
        for name in list(self._waiting):
            items = self._waiting[name]
            entry = self.schedule.entries.get(name)
            while items and (entry is None or now > items[0][1]):
                slot, _, reason = items.popleft()
                if entry is not None:
                    missed.append((entry.job, self.schedule.missed(name, slot, reason)))
            if items and entry is not None and not going.get(name, 0):
                slot = items.popleft()[0]
                if not pauses.pass_over(name, now):
                    starts.append((entry.job, slot))
            if not items:
                del self._waiting[name]
        return starts, missed

    def drop(self, name: str) -> list[datetime]:
        """Forget `name`'s waiting slots (the job was removed)."""
        return [slot for slot, _, _ in self._waiting.pop(name, ())]
