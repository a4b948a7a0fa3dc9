"""When jobs fire: cron schedules in the job's zone (rules R1-R7 of docs/schedules.md),
and intervals (R8).

Pure arithmetic, no I/O and no clock: every function is given the instant it works from.
Instants are whole seconds since the epoch inside ("u"), wall times the same kind of
number read as a naive local time ("w"): see timeline.py.

How a cron fire is found: a zone's timeline is a run of stretches of constant UTC offset
between transitions (timeline.py). Inside a stretch, wall time runs with real time, so
the next match is plain calendar arithmetic (`CronExpr.next_wall`). The DST rules act only
where stretches meet: a forward jump of less than 3 h makes up skipped slots of
fixed-time jobs at the jump (R4), a backward one hides the second pass from fixed-time
jobs (R5), bigger jumps are calendar changes left alone (R6). One fire per instant covers
R7. A zone without any transition (UTC, a fixed offset) is a single stretch, and its
fires are calendar arithmetic alone. The words of the notes are notes.py's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from typing import NamedTuple, Protocol

from crond.when.cronexpr import CronExpr
from crond.when.cronparse import CronError, parse_cron
from crond.when.notes import (
    describe_walls,
    dst_warnings,
    hm,
    note_made_up,
    note_not_made_up,
    note_pass,
)
from crond.when.timeline import (
    BIG_JUMP,
    DAY,
    EPOCH,
    NO_STRETCH,
    Jump,
    Stretch,
    jump_ahead,
    jump_back,
    seconds,
    steady_offset,
    stretch_at,
)

__all__ = [
    "CronError",
    "CronExpr",
    "CronTiming",
    "Fire",
    "IntervalTiming",
    "RebootTiming",
    "Timing",
    "dst_warnings",
    "jitter_offset",
    "parse_cron",
]

_SEARCH_LIMIT = 400 * 366 * DAY  # a Gregorian cycle: a valid expression fires within it
_ZERO, _US, _MS = timedelta(0), timedelta(microseconds=1), timedelta(milliseconds=1)


class Fire(NamedTuple):
    """One fire: its UTC instant (jitter included), the same instant in the job's zone,
    and a note when a DST or calendar rule moved, dropped or repeated something.
    (A NamedTuple: a 10,000-job file makes 10,000 at start, and it is made 3x faster
    than a frozen dataclass.)"""

    at: datetime
    local: datetime
    note: str | None


class Timing(Protocol):
    """A job's schedule: its fires, in order, after any instant."""

    @property
    def period(self) -> timedelta | None:
        """The fixed distance between consecutive fires when there is one (an interval),
        else None: the planner counts an interval's missed slots without walking them."""
        ...

    def next_after(self, t: datetime) -> Fire | None:
        """The first fire strictly after t (jitter included), None if none ever comes."""
        ...

    def fires(self, after: datetime) -> Iterator[Fire]:
        """Every fire strictly after `after`, in order."""
        ...


def jitter_offset(name: str, jitter: timedelta) -> timedelta:
    """Stable per-job offset in [0, jitter), from a hash of the name, millisecond resolution.

    sha256, not hash(): the offset must be the same on every host, restart and Python.
    """
    if not jitter:  # the usual job: no division, no hash
        return _ZERO
    span = jitter // _MS
    if span <= 0:
        return _ZERO
    digest = hashlib.sha256(name.encode()).digest()  # UTF-8
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % span)


# --- cron ------------------------------------------------------------------------------

# (expression, zone, jitter in µs, second after which) -> the first fire. Big files repeat
# a few expressions in a few zones across thousands of jobs, and the daemon asks every job
# for its first fire after the same instant (at start and reload) and every job due in a
# wake for its next fire after that wake: each distinct question is answered once. The
# answer depends on nothing else, and a Fire is immutable, so jobs share it. Bounded:
# cleared when full (a file of distinct expressions gains nothing from keeping them).
_first_fires: dict[tuple[CronExpr, tzinfo, int, int], Fire] = {}
_FIRST_FIRES_MAX = 4096


def _never(expr: CronExpr) -> CronError:
    # parse_cron refuses an expression that never fires: only a hand-made CronExpr gets here
    return CronError(f"{expr} does not fire in 400 years", field=None, value=str(expr))


class CronTiming:
    """A cron expression in a zone: R1-R7."""

    # One per job: 10,000 at the start of a big file.
    __slots__ = ("_fixed", "_jitter_us", "_steady", "_stretch", "expr", "jitter", "zone")

    period: timedelta | None = None  # months and DST make no two gaps alike

    def __init__(self, expr: CronExpr, zone: tzinfo, jitter: timedelta = timedelta(0)) -> None:
        self.expr = expr
        self.zone = zone
        self.jitter = jitter
        self._fixed = not expr.wildcard
        self._jitter_us = jitter // _US
        self._stretch = NO_STRETCH  # the last one used: fires come in order
        self._steady = steady_offset(zone)

    def __repr__(self) -> str:
        return f"CronTiming({str(self.expr)!r}, {self.zone}, jitter={self.jitter})"

    def next_after(self, t: datetime) -> Fire:
        s = seconds(t - self.jitter if self._jitter_us else t)
        key = (self.expr, self.zone, self._jitter_us, s)
        fire = _first_fires.get(key)
        if fire is None:
            fire = self._fire(*self._next(s))
            if len(_first_fires) >= _FIRST_FIRES_MAX:
                _first_fires.clear()
            _first_fires[key] = fire
        return fire

    def fires(self, after: datetime) -> Iterator[Fire]:
        s = seconds(after - self.jitter)
        while True:
            u, note = self._next(s)
            yield self._fire(u, note)
            s = u

    def _fire(self, u: int, note: str | None) -> Fire:
        at = EPOCH + timedelta(0, u, self._jitter_us)  # (days, seconds, µs): no keywords, faster
        # tuple.__new__ makes the same Fire without Fire.__new__'s Python call.
        return tuple.__new__(Fire, (at, at.astimezone(self.zone), note))

    def _next(self, s: int) -> tuple[int, str | None]:
        """The first rule instant after s (jitter not included), with its note."""
        offset = self._steady
        if offset is not None:
            # A zone without transitions (UTC, the default; fixed offsets): one stretch
            # without end, no DST rule to apply, no note. The walk below gives the same
            # answer, after finding stretches and looking for jumps around the fire.
            w = self.expr.next_wall(s + 1 + offset, s + _SEARCH_LIMIT + offset)
            if w is None:
                raise _never(self.expr)
            return w - offset, None
        u = s
        while u < s + _SEARCH_LIMIT:
            stretch = self._stretch
            if not stretch.lo <= u < stretch.hi:
                stretch = self._stretch = stretch_at(self.zone, u)
            lo, hi, offset, jump = stretch
            made_up = self._made_up(jump) if jump and lo > s else None
            start = max(s + 1, lo)
            back = jump_back(self.zone, stretch, start) if self._fixed and start < hi else None
            if back and 0 < back.before - back.after < BIG_JUMP:  # R5: no second pass
                start = max(start, back.at + back.before - back.after)
            w = self.expr.next_wall(start + offset, hi + offset)
            if made_up is not None:
                merged = hm(lo + offset) if w == lo + offset else None
                return lo, note_made_up(made_up[0], many=made_up[1] > 1, merged=merged)
            if w is not None:
                return w - offset, self._note(stretch, w - offset, w)
            u = hi
        raise _never(self.expr)

    def _made_up(self, jump: Jump) -> tuple[str, int] | None:
        """R4 for fixed-time jobs: the skipped wall times it matched, if any."""
        if not self._fixed or not 0 < jump.after - jump.before < BIG_JUMP:
            return None
        skipped = self.expr.walls(jump.at + jump.before, jump.at + jump.after)
        if not skipped:
            return None
        return describe_walls(skipped, (jump.at + jump.after) // DAY), len(skipped)

    def _note(self, stretch: Stretch, u: int, w: int) -> str | None:
        """What R4-R6 did around the regular fire at u (wall time w), if anything."""
        back, ahead = jump_back(self.zone, stretch, u), jump_ahead(self.zone, stretch, u)
        if back is None and ahead is None:
            return None
        notes: list[str] = []
        if back and back.after > back.before:  # after a forward jump: not made up?
            big = back.after - back.before >= BIG_JUMP
            landed = back.at + back.after
            first = landed // DAY == w // DAY and self.expr.next_wall(landed, w + 1) == w
            if (big or not self._fixed) and first:  # the first fire after the jump that day
                skipped = self.expr.walls(back.at + back.before, landed)
                if skipped:
                    notes.append(note_not_made_up(describe_walls(skipped, w // DAY), big=big))
        elif back and u < back.at + back.before - back.after:  # on a second pass
            big = back.before - back.after >= BIG_JUMP
            notes.append(note_pass(hm(w), second=True, fixed=self._fixed, big=big))
        if ahead and ahead.after < ahead.before and u >= ahead.at - ahead.before + ahead.after:
            big = ahead.before - ahead.after >= BIG_JUMP
            notes.append(note_pass(hm(w), second=False, fixed=self._fixed, big=big))
        return "; ".join(notes) or None


# --- intervals -------------------------------------------------------------------------


class IntervalTiming:
    """R8: slots at anchor + k·every for k = 0, 1, 2, … in absolute time, plus jitter."""

    # One per job, as CronTiming.
    __slots__ = ("_step", "anchor", "every", "jitter", "period", "zone")

    def __init__(
        self,
        every: timedelta,
        anchor: datetime | None = None,
        jitter: timedelta = timedelta(0),
        zone: tzinfo = UTC,
    ) -> None:
        if every < _MS:
            raise ValueError(f"interval {every} is too short; the minimum is 1 ms")
        if anchor is not None and anchor.utcoffset() is None:
            raise ValueError(f"anchor {anchor!r} has no time zone")
        self.every = self.period = every
        self.anchor = EPOCH if anchor is None else anchor.astimezone(UTC)
        self.jitter = jitter
        self.zone = zone
        self._step = every // _US

    def __repr__(self) -> str:
        return f"IntervalTiming({self.every}, anchor={self.anchor.isoformat()})"

    def next_after(self, t: datetime) -> Fire:
        if t.utcoffset() is None:
            raise ValueError(f"{t!r} has no time zone; crond compares UTC instants only")
        since = (t - self.jitter - self.anchor) // _US
        k = max(0, since // self._step + 1)  # integer microseconds: no float drift
        at = self.anchor + timedelta(microseconds=k * self._step) + self.jitter
        return Fire(at, at.astimezone(self.zone), None)

    def fires(self, after: datetime) -> Iterator[Fire]:
        t = after
        while True:
            fire = self.next_after(t)
            yield fire
            t = fire.at


class RebootTiming:
    """`@reboot`: no slot in time. The daemon starts the job once per host boot, just
    after it starts (daemon/lifecycle.py); for the planner it never falls due."""

    period = None

    def __repr__(self) -> str:
        return "RebootTiming()"

    def next_after(self, t: datetime) -> Fire | None:  # noqa: ARG002  (the Timing protocol)
        return None

    def fires(self, after: datetime) -> Iterator[Fire]:  # noqa: ARG002  (the Timing protocol)
        return iter(())
