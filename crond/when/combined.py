"""Schedules made of parts (docs/schedules.md, "Schedules as a person writes them"):
several cron expressions as one schedule, one-shot `at` instants, and `start`/`end`
bounds around all of it.

Each part is a Timing of its own (timing.py, dayfilter.py), so every DST rule (R1-R10)
and calendar applies to each part exactly as to a job that has only it; these wrappers
only merge and cut their fires:

- `UnionTiming`: the fires of all parts, in order; an instant two parts share is one
  fire (a slot runs once). Its note is the first part's that has one.
- `AtTiming`: fixed instants, each fired once; none after the last.
- `BoundedTiming`: the inner fires with `start <= at <= end` (both included: "from
  Monday 09:00 until Friday 18:00" fires at both ends); none after `end`.

Pure, no I/O and no clock, like the rest of crond/when.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta, tzinfo

from crond.when.timing import Fire, Timing

__all__ = ["AtTiming", "BoundedTiming", "UnionTiming", "fires_of"]

_US = timedelta(microseconds=1)


def fires_of(timing: Timing, after: datetime) -> Iterator[Fire]:
    """Every fire of `timing` strictly after `after`, in order, by `next_after` alone
    (ends when it says None)."""
    t = after
    while (fire := timing.next_after(t)) is not None:
        yield fire
        t = fire.at


class UnionTiming:
    """The fires of several timings as one schedule."""

    __slots__ = ("parts",)

    period: timedelta | None = None  # two schedules' gaps are never one fixed distance

    def __init__(self, parts: Sequence[Timing]) -> None:
        if not parts:
            raise ValueError("a union needs at least one part")
        self.parts = tuple(parts)

    def __repr__(self) -> str:
        return f"UnionTiming({list(self.parts)!r})"

    def next_after(self, t: datetime) -> Fire | None:
        best: Fire | None = None
        for part in self.parts:
            fire = part.next_after(t)
            if fire is None:
                continue
            if best is None or fire.at < best.at or (fire.at == best.at and best.note is None):
                best = fire
        return best

    def fires(self, after: datetime) -> Iterator[Fire]:
        return fires_of(self, after)


class AtTiming:
    """One-shot instants (`at`), each fired once, shown in the job's zone."""

    __slots__ = ("instants", "notes", "zone")

    period: timedelta | None = None

    def __init__(
        self, instants: Iterable[datetime | tuple[datetime, str | None]], zone: tzinfo = UTC
    ) -> None:
        """`instants`: aware instants, or (instant, note) pairs (a note says which
        instant a local time in a DST change is: crond/when/instants.py)."""
        notes: dict[datetime, str | None] = {}
        for given in instants:
            instant, note = given if isinstance(given, tuple) else (given, None)
            if instant.utcoffset() is None:
                raise ValueError(f"{instant!r} has no time zone")
            at = instant.astimezone(UTC)
            notes[at] = notes.get(at) or note
        self.instants = sorted(notes)
        self.notes = notes
        self.zone = zone

    def __repr__(self) -> str:
        return f"AtTiming({[i.isoformat() for i in self.instants]})"

    @property
    def last(self) -> datetime | None:
        return self.instants[-1] if self.instants else None

    def next_after(self, t: datetime) -> Fire | None:
        if t.utcoffset() is None:
            raise ValueError(f"{t!r} has no time zone; crond compares UTC instants only")
        i = bisect.bisect_right(self.instants, t)
        if i == len(self.instants):
            return None
        at = self.instants[i]
        return Fire(at, at.astimezone(self.zone), self.notes[at])

    def fires(self, after: datetime) -> Iterator[Fire]:
        return fires_of(self, after)


class BoundedTiming:
    """The inner timing's fires within [start, end] (either bound may be absent)."""

    __slots__ = ("end", "inner", "period", "start")

    def __init__(
        self, inner: Timing, start: datetime | None = None, end: datetime | None = None
    ) -> None:
        for bound in (start, end):
            if bound is not None and bound.utcoffset() is None:
                raise ValueError(f"{bound!r} has no time zone")
        self.inner = inner
        self.start = None if start is None else start.astimezone(UTC)
        self.end = None if end is None else end.astimezone(UTC)
        # An interval's slots stay evenly spaced inside the bounds: the planner may count
        # them by arithmetic (schedule/rules.py), as long as it never counts past `end`.
        self.period = inner.period if self.end is None else None

    def __repr__(self) -> str:
        return f"BoundedTiming({self.inner!r}, start={self.start}, end={self.end})"

    def next_after(self, t: datetime) -> Fire | None:
        if self.start is not None and t < self.start:
            t = self.start - _US  # the first fire at or after start
        fire = self.inner.next_after(t)
        while fire is not None and self.start is not None and fire.at < self.start:
            fire = self.inner.next_after(fire.at)  # a part that rounds t down (cron: seconds)
        if fire is None or (self.end is not None and fire.at > self.end):
            return None
        return fire

    def fires(self, after: datetime) -> Iterator[Fire]:
        return fires_of(self, after)
