"""Named locks (docs/workflows.md): who holds each, and the due runs waiting for them.

The rules `Locks` keeps (crond/schedule/core.py and proposal.py ask it whenever a run is
about to start):

- A run takes all the locks its job names at once, or none (`grantable`, the one rule of
  granting): never some of them, so two runs never hold one lock each of a pair and wait
  for the other (no deadlock). It holds them from its start to its end, its retries
  included, and gives them back at every end (success, failure, timeout, kill; a replica's
  lost runs with the database's locks, crond/store/).
- A run that cannot take them waits (`on_lock: wait`, `job.waiting`, reason `lock`,
  naming the holders), or is skipped at once (`on_lock: skip`: `job.skipped`, reason
  `lock`). A waiting run counts as going, for its job's overlap and `max_running`.
- The waiting runs are granted in the order of their slots (`drain`): each in turn takes
  its locks if they all have room after the grants before it. A waiting run whose locks
  are not all free does not hold back a later one that fits (a lock is never left idle
  while a run that needs only it waits), but no later run ever takes a place an earlier
  one could have had.
- A waiting run whose grace (slot + its job's `grace`) runs out is missed: `job.missed`,
  reason `lock`. Of a job removed since it is dropped, of a job paused since passed over.
- With replicas the database has the last word (crond/store/pg_locks.py): a run that took
  its locks here is refused at its claim when runs of other replicas fill one of them
  (`refused`). It then waits like any (or is skipped, `on_lock: skip`), and asks again
  `RETRY` later: a lock given back on another replica wakes nothing here.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from crond.config.loaded import LoadedJob
from crond.config.model import OnLock
from crond.config.wording import quote
from crond.schedule.actions import Action, Key, LockedBy, LockWait, Tell
from crond.schedule.heap import Schedule
from crond.schedule.pauses import Pauses
from crond.schedule.queue import AFTER, Missed, Waiting

# A run holding locks: its job and slot (a job's runs of one slot hold as many places).
Hold = tuple[str, datetime]
# How soon a run refused for locks held on other replicas asks the database again.
RETRY = timedelta(seconds=1)


def grantable(needs: Iterable[str], held: Mapping[str, int], capacity: Mapping[str, int]) -> bool:
    """The rule of granting: a run may take its locks when every one of them has room
    (fewer holders than its capacity); then it takes them all, else none. A lock the file
    no longer has (its holders started before a reload) has no limit."""
    for name in needs:
        limit = capacity.get(name)
        if limit is not None and held.get(name, 0) >= limit:
            return False
    return True


def needs(job: LoadedJob) -> Sequence[str]:
    return job.settings.locks or ()


@dataclass(frozen=True)
class Blocked:
    """Why a run waits: the first lock of its job without room, and who holds it."""

    lock: str
    holders: tuple[Hold, ...]


@dataclass
class Locks:
    """The locks of one daemon (their capacities set at each load), their holders and the
    runs waiting for them, over one `Schedule`."""

    schedule: Schedule
    capacity: dict[str, int] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)  # lock -> places taken
    holders: dict[str, list[Hold]] = field(default_factory=dict)  # lock -> in grant order
    _taken: dict[Hold, list[Sequence[str]]] = field(default_factory=dict)
    _items: list[tuple[datetime, int, Waiting]] = field(default_factory=list)  # slot order
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    counts: dict[str, int] = field(default_factory=dict)  # job -> its runs waiting
    _freed: bool = False  # a lock was given back while runs wait: wake at once
    # The waiting runs the database refused (replicas): the lock and its holders it named
    # (`elsewhere`); what it said of a wake's claims (`said`, set by the core's settle).
    elsewhere: dict[Key, Blocked] = field(default_factory=dict)
    said: Mapping[Key, LockedBy] = field(default_factory=dict)
    _told: set[Key] = field(default_factory=set)  # told waiting (`job.waiting` once a run)
    _retry_at: datetime | None = None  # when those ask again

    def __bool__(self) -> bool:
        """Whether any run waits for a lock."""
        return bool(self._items)

    def waiting(self) -> list[Waiting]:
        return [item for _, _, item in self._items]

    def take(self, job: LoadedJob, slot: datetime) -> bool:
        """`job`'s run for `slot` takes all its locks, if it may (`grantable`)."""
        names = needs(job)
        if not names:
            return True
        if not grantable(names, self.held, self.capacity):
            return False
        for name in names:
            self.held[name] = self.held.get(name, 0) + 1
            self.holders.setdefault(name, []).append((job.name, slot))
        self._taken.setdefault((job.name, slot), []).append(names)
        return True

    def release(self, name: str, slot: datetime, *, wake: bool = True) -> bool:
        """A run of job `name` for `slot` ended (or never started): its locks are given
        back. Whether it held any (a run that held none gives back nothing). Not `wake`:
        a run the database refused for its locks (held elsewhere, so no waiting run here
        may take them now: it asks again `RETRY` later, not at once)."""
        taken = self._taken.get((name, slot))
        if not taken:
            return False
        names = taken.pop()
        if wake:
            self._freed = bool(self._items)  # a waiting run may take them: wake at once
        if not taken:
            del self._taken[(name, slot)]
        for lock in names:
            self.held[lock] -= 1
            if not self.held[lock]:
                del self.held[lock]
            holders = self.holders[lock]
            holders.remove((name, slot))
            if not holders:
                del self.holders[lock]
        return True

    def blocked(self, job: LoadedJob) -> Blocked:
        """The first of `job`'s locks without room, and its holders; or its first lock,
        held by none, when a run that took it gave it back after `job`'s run was told to
        wait (its claim was refused): the core wakes at once for it (`wake_at`)."""
        found = self.full(job)
        if found is None:
            for lock, holders in self.said.values():  # held elsewhere, the database said
                if lock in needs(job):
                    return Blocked(lock, holders)  # (asked again `RETRY` later)
            self._freed = True
            return Blocked(needs(job)[0], ())
        return found

    def full(self, job: LoadedJob) -> Blocked | None:
        """The first of `job`'s locks without room and its holders (None: all have room)."""
        for name in needs(job):
            limit = self.capacity.get(name)
            if limit is not None and self.held.get(name, 0) >= limit:
                return Blocked(name, tuple(self.holders.get(name, ())))
        return None

    def taken_by(self, name: str, slot: datetime) -> Sequence[str]:
        """The locks a run of job `name` for `slot` holds (none: [])."""
        taken = self._taken.get((name, slot))
        return taken[-1] if taken else ()

    def wait(self, job: LoadedJob, slot: datetime) -> LockWait:
        """`job`'s run for `slot`, which could not take its locks, waits for them, in slot
        order: what to tell of it."""
        blocked = self.blocked(job)
        bisect.insort(self._items, (slot, next(self._seq), Waiting.of(job, slot)))
        self.counts[job.name] = self.counts.get(job.name, 0) + 1
        self._told.add((job.name, slot))
        return LockWait(job, slot, blocked.lock, blocked.holders)

    def refused(self, job: LoadedJob, slot: datetime, now: datetime) -> list[Action]:
        """`job`'s run for `slot`, whose claim the database refused for its locks, waits for
        them, asking again `RETRY` later; or with `on_lock: skip`, is skipped (told by the
        one replica that claims the told slot)."""
        if job.settings.on_lock is OnLock.SKIP:
            skip = self.schedule.about(job.name, slot, skip=slot, skip_reason="lock")
            return [Tell(job, skip, check=(job.name, slot))]
        locked = self.said.get((job.name, slot))  # the lock and holders the database named
        blocked = Blocked(*locked) if locked else Blocked(needs(job)[0], ())
        bisect.insort(self._items, (slot, next(self._seq), Waiting.of(job, slot)))
        self.counts[job.name] = self.counts.get(job.name, 0) + 1
        self.elsewhere[(job.name, slot)] = blocked
        retry = now + RETRY
        self._retry_at = retry if self._retry_at is None else min(self._retry_at, retry)
        if (job.name, slot) in self._told:
            return []  # refused again: it was told waiting at its first refusal
        self._told.add((job.name, slot))
        return [LockWait(job, slot, blocked.lock, blocked.holders)]

    def refusal(self, job: LoadedJob) -> str | None:
        """Why a trigger of `job` may not take its locks now, if it may not: one is full,
        or an older run waits for one of them (it goes first)."""
        names = needs(job)
        if not names:
            return None
        ahead = [item for _, _, item in self._items if set(needs(item.job)) & set(names)]
        if ahead:
            return (
                f"{len(ahead)} older run(s) wait for {job.name}'s locks ({ahead[0].job.name} first)"
            )
        if grantable(names, self.held, self.capacity):
            return None
        blocked = self.blocked(job)
        by = ", ".join(dict.fromkeys(name for name, _ in blocked.holders))
        return f"lock {quote(blocked.lock)} is held by {by or 'runs going'}"

    def gated(
        self, starts: list[tuple[LoadedJob, datetime]], first: list[Action]
    ) -> list[tuple[LoadedJob, datetime]]:
        """Of runs that waited (in the queue, for the database), those that took their
        locks; the others wait for them, or are skipped (told in `first`)."""
        kept = []
        for job, slot in starts:
            if self.take(job, slot):
                kept.append((job, slot))
            elif job.settings.on_lock is OnLock.SKIP:
                skip = self.schedule.about(job.name, slot, skip=slot, skip_reason="lock")
                first.append(Tell(job, skip))
            else:
                first.append(self.wait(job, slot))
        return kept

    def wake_at(self) -> datetime | None:
        """When to wake for the waiting runs by itself: at once (their oldest slot) when a
        lock was given back since the last wake, else just after the earliest end of grace
        (None: none waits)."""
        if not self._items:
            return None
        if self._freed:
            return self._items[0][0]
        end = min(item.deadline for _, _, item in self._items) + AFTER
        return end if self._retry_at is None else min(end, self._retry_at)

    def drain(
        self, now: datetime, pauses: Pauses, room: int | None
    ) -> tuple[list[tuple[LoadedJob, datetime]], list[Missed]]:
        """The waiting runs that take their locks now, in slot order, taken off to start
        (at most `room`: the daemon's `max_running`, None: no limit); and those whose
        grace ran out (missed). Those of a job removed since are dropped, those of a job
        paused since passed over; the others wait on."""
        self._freed, self._retry_at = False, None
        starts: list[tuple[LoadedJob, datetime]] = []
        missed: list[Missed] = []
        kept: list[tuple[datetime, int, Waiting]] = []
        for key in self._items:
            item = key[2]
            entry = self.schedule.entries.get(item.job.name)
            if now > item.deadline:
                missed.append((item.job, self.schedule.missed(item.job.name, item.slot, "lock")))
            elif entry is None or pauses.pass_over(item.job.name, now):
                continue
            elif (room is None or len(starts) < room) and self.take(entry.job, item.slot):
                starts.append((entry.job, item.slot))
            else:
                kept.append(key)
        self._items = kept
        left = {(item.job.name, item.slot) for _, _, item in kept}
        if self.elsewhere:  # (those refused again say so again)
            self.elsewhere = {k: v for k, v in self.elsewhere.items() if k in left}
        if self._told:  # (those starting now may be refused again: told already)
            self._told &= left | {(job.name, slot) for job, slot in starts}
        self.counts = {}
        for _, _, item in kept:
            self.counts[item.job.name] = self.counts.get(item.job.name, 0) + 1
        return starts, missed
