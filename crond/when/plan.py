"""When jobs run: the pure `plan` (R9 grace, coalescing, overlap) and the loop around it.

`plan` is arithmetic over instants: given an entry's cursor and timing, `now` and how
many runs of the job are going, it says which slot starts, which is skipped for overlap
and which were missed. `Scheduler` keeps one entry per job on a heap ordered by the next
fire, sleeps until the earliest one (never longer than one heartbeat), re-reads the
clock after each wake, and hands due slots to the runner.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from crond.config.loaded import LoadedJob
from crond.config.model import Catchup, Overlap
from crond.when.timing import Fire, Timing

# Counting missed slots one by one would take seconds after a month's suspend of an
# every-second job; past this many, intervals are counted by arithmetic.
_SCAN_LIMIT = 10_000


@dataclass
class Entry:
    """A job as the scheduler sees it: its schedule and where it has got to."""

    job: LoadedJob
    timing: Timing
    cursor: datetime  # R9: UTC, never decreasing; slots at or before it are handled
    next_fire: Fire | None = None  # the first fire after the cursor (cached)
    name: str = field(init=False)  # the job's, kept here: the hot path reads it often

    def __post_init__(self) -> None:
        self.name = self.job.name
        if self.next_fire is None:
            self.next_fire = _first_after(self.timing, self.cursor)


@dataclass(frozen=True)
class Missed:
    count: int
    first_slot: datetime
    last_slot: datetime


@dataclass(frozen=True)
class Decision:
    """What to do for one entry at one wake."""

    job: str
    cursor: datetime
    next_fire: Fire | None
    start: datetime | None = None  # the slot to run now
    skip: datetime | None = None  # the slot not run because a run is still going
    replace: bool = False  # stop the running runs first (overlap: replace)
    missed: Missed | None = None
    caught_up: int | None = None  # `start` is a catch-up run; this many older slots skipped


def _first_after(timing: Timing, instant: datetime) -> Fire | None:
    try:
        return timing.next_after(instant)
    except StopIteration:  # a schedule that never fires again (a cron date that never comes)
        return None


def _due(timing: Timing, first: Fire, now: datetime) -> tuple[int, datetime, datetime]:
    """Count the slots in [first, now]: (count, first slot, last slot)."""
    count, last = 0, first.at
    fires: Iterator[Fire] = itertools.chain([first], timing.fires(first.at))
    for fire in fires:
        if fire.at > now:
            break
        count, last = count + 1, fire.at
        if count >= _SCAN_LIMIT and hasattr(timing, "every"):
            every: timedelta = timing.every
            extra = (now - last) // every
            return count + extra, first.at, last + extra * every
    return count, first.at, last


def plan_entry(entry: Entry, now: datetime, running: int) -> Decision:
    """R9 for one entry: the latest due slot starts if within grace; the others are missed.
    With `catchup: latest`, a latest slot later than grace but within `catchup_window`
    still starts, as a catch-up run (the older slots are skipped, counted, not missed)."""
    fire = entry.next_fire
    if now <= entry.cursor:  # the clock stepped back: nothing is due, the cursor stays
        return Decision(entry.name, entry.cursor, fire)
    if fire is None or fire.at > now or not entry.job.settings.enabled:
        nxt = fire if fire is None or fire.at > now else _first_after(entry.timing, now)
        return Decision(entry.name, now, nxt)
    count, first, latest = _due(entry.timing, fire, now)
    next_fire = _first_after(entry.timing, now)
    job = entry.job
    caught_up = None
    if now - latest > job.settings.grace:
        if job.settings.catchup is Catchup.NONE or now - latest > job.settings.catchup_window:
            return Decision(entry.name, now, next_fire, missed=Missed(count, first, latest))
        caught_up = count - 1
    missed = None
    if count > 1 and caught_up is None:
        missed = Missed(count - 1, first, _previous(entry.timing, first, latest))
    if running and job.settings.overlap is Overlap.SKIP:
        if caught_up:  # the catch-up slot is skipped: every slot of the stretch was missed
            missed = Missed(count - 1, first, _previous(entry.timing, first, latest))
        return Decision(entry.name, now, next_fire, skip=latest, missed=missed)
    replace = bool(running) and job.settings.overlap is Overlap.REPLACE
    return Decision(
        entry.name,
        now,
        next_fire,
        start=latest,
        replace=replace,
        missed=missed,
        caught_up=caught_up,
    )


def _previous(timing: Timing, first: datetime, latest: datetime) -> datetime:
    """The last slot before `latest` (the last one missed when `latest` runs)."""
    if hasattr(timing, "every"):
        every: timedelta = timing.every
        return latest - every
    prev = first
    for fire in timing.fires(first):
        if fire.at >= latest:
            break
        prev = fire.at
    return prev


def plan(entries: Iterable[Entry], now: datetime, running: Mapping[str, int]) -> list[Decision]:
    """Decisions for every entry at `now`, given how many runs each job has going."""
    return [plan_entry(entry, now, running.get(entry.name, 0)) for entry in entries]


@dataclass
class Schedule:
    """The set of entries and the heap of their next fires (stale heap items are skipped)."""

    entries: dict[str, Entry] = field(default_factory=dict)
    _heap: list[tuple[datetime, int, str]] = field(default_factory=list)
    _seq: Iterator[int] = field(default_factory=itertools.count)

    def put(self, entry: Entry) -> None:
        self.entries[entry.name] = entry
        if entry.next_fire is not None and entry.job.settings.enabled:
            heapq.heappush(self._heap, (entry.next_fire.at, next(self._seq), entry.name))

    def remove(self, name: str) -> Entry | None:
        return self.entries.pop(name, None)  # its heap items become stale

    def _is_current(self, at: datetime, name: str) -> bool:
        entry = self.entries.get(name)
        return entry is not None and entry.next_fire is not None and entry.next_fire.at == at

    def next_due(self) -> tuple[datetime, str] | None:
        """The earliest (instant, job) still current."""
        while self._heap:
            at, _, name = self._heap[0]
            if self._is_current(at, name):
                return at, name
            heapq.heappop(self._heap)
        return None

    def pop_due(self, now: datetime) -> list[Entry]:
        """Entries whose next fire is at or before `now`, each once, taken off the heap."""
        due: dict[str, Entry] = {}
        while self._heap and self._heap[0][0] <= now:
            at, _, name = heapq.heappop(self._heap)
            if self._is_current(at, name):
                due[name] = self.entries[name]
        return list(due.values())

    def apply(self, entry: Entry, decision: Decision) -> None:
        entry.cursor = max(entry.cursor, decision.cursor)
        entry.next_fire = decision.next_fire
        self.put(entry)

    def advance_all(self, now: datetime) -> None:
        """Move every cursor to `now` (after a reload, say). Cheap: no fire is recomputed
        unless a slot is due, and due ones are planned by the loop's next wake."""
        for entry in self.entries.values():
            if entry.next_fire is None or entry.next_fire.at > now:
                entry.cursor = max(entry.cursor, now)


def make_entry(
    job: LoadedJob, cursor: datetime, timing_of: Callable[[LoadedJob], Timing] | None = None
) -> Entry:
    timing = timing_of(job) if timing_of else job.make_timing()
    return Entry(job, timing, cursor)  # (positional: a start makes one per job)
