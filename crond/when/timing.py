"""When jobs fire: cron schedules in the job's zone (rules R1-R7 of docs/schedules.md),
and intervals (R8).

Pure arithmetic, no I/O and no clock: every function is given the instant it works from.
Instants are integer seconds since the Unix epoch inside this module ("u"); wall times of
a zone are the same kind of number read as a naive local time ("w", u = w - offset).

How a cron fire is found: a zone's timeline is a run of stretches of constant UTC offset
between transitions. Inside a stretch, wall time runs with real time, so the next match is
plain calendar arithmetic (`CronExpr.next_wall`). The DST rules act only where stretches meet:
a forward jump of less than 3 h makes up skipped slots of fixed-time jobs at the jump (R4),
a backward one hides the second pass from fixed-time jobs (R5), bigger jumps are calendar
changes left alone (R6). One fire per instant covers R7. A zone without any transition
(UTC, a fixed offset) is a single stretch, and its fires are calendar arithmetic alone.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import NamedTuple, Protocol

from crond.when.cronexpr import CronError, CronExpr, is_wildcard, parse_cron

__all__ = [
    "CronError",
    "CronExpr",
    "CronTiming",
    "Fire",
    "IntervalTiming",
    "Timing",
    "dst_warnings",
    "is_wildcard",
    "jitter_offset",
    "parse_cron",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 -- wall times are naive on purpose
_ORDINAL_1970 = date(1970, 1, 1).toordinal()
_DAY = 86400
_BIG_JUMP = 3 * 3600  # R6: a change of 3 h or more is a calendar change, not DST
_NEAR = 2 * _DAY  # transitions farther than this from a fire cannot touch it
_SEARCH_LIMIT = 400 * 366 * _DAY  # a Gregorian cycle: a valid expression fires within it
# Zone data is probed in chunks of 384 days, every 12 h; bisection finds each change to
# the second. That finds every offset change as long as changes are more than 12 h apart:
# in tzdata they are at least 95 h apart (tests/test_timing.py checks the installed data).
_CHUNK = 384 * _DAY
_PROBE = 12 * 3600
_ZERO, _US, _MS, _S = (
    timedelta(0),
    timedelta(microseconds=1),
    timedelta(milliseconds=1),
    timedelta(seconds=1),
)


class Fire(NamedTuple):
    """One fire: its UTC instant (jitter included), the same instant in the job's zone,
    and a note when a DST or calendar rule moved, dropped or repeated something.
    (A NamedTuple: a 10,000-job file makes 10,000 at start, and it is made 3x faster
    than a frozen dataclass.)"""

    at: datetime
    local: datetime
    note: str | None


class Timing(Protocol):
    def next_after(self, t: datetime) -> Fire: ...

    def fires(self, after: datetime) -> Iterator[Fire]: ...


def jitter_offset(name: str, jitter: timedelta) -> timedelta:
    """Stable per-job offset in [0, jitter), from a hash of the name, millisecond resolution.

    sha256, not hash(): the offset must be the same on every host, restart and Python.
    """
    if not jitter:  # the usual job: no division, no hash
        return _ZERO
    span = jitter // _MS
    if span <= 0:
        return _ZERO
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % span)


def _seconds(t: datetime) -> int:
    """Floor of t in epoch seconds."""
    last, s = _last_seconds[0]
    if t is last:  # a load asks every job for its first fire after its `now`
        return s
    if t.utcoffset() is None:
        raise ValueError(f"{t!r} has no time zone; crond compares UTC instants only")
    delta = t - EPOCH
    s = delta.days * _DAY + delta.seconds
    _last_seconds[0] = t, s
    return s


# The last instant _seconds converted, with its answer (a datetime is immutable). One
# pair, replaced whole: a reload validates its file in a thread.
_last_seconds: list[tuple[datetime | None, int]] = [(None, 0)]


# --- a zone's timeline ----------------------------------------------------------------


class _Jump(NamedTuple):
    at: int  # first instant with the new offset
    before: int  # offset before, seconds
    after: int  # offset after, seconds


@dataclass(frozen=True)
class _Chunk:
    start_offset: int
    times: tuple[int, ...]
    jumps: tuple[_Jump, ...]


_chunks: dict[tuple[tzinfo, int], _Chunk] = {}


def _offset(zone: tzinfo, u: int) -> int:
    # fromtimestamp with a zone is always aware; "or" only satisfies the type checker
    return (datetime.fromtimestamp(u, zone).utcoffset() or _ZERO) // _S


def _chunk(zone: tzinfo, index: int) -> _Chunk:
    found = _chunks.get((zone, index))
    if found is None:
        if len(_chunks) > 10_000:  # bound memory across very long walks
            _chunks.clear()
        found = _chunks[(zone, index)] = _probe(zone, index)
    return found


def _probe(zone: tzinfo, index: int) -> _Chunk:
    start, end = index * _CHUNK, (index + 1) * _CHUNK
    jumps: list[_Jump] = []
    lo, lo_offset = start - 1, _offset(zone, start - 1)
    while lo < end - 1:
        hi = min(lo + _PROBE, end - 1)
        hi_offset = _offset(zone, hi)
        if hi_offset != lo_offset:
            a, b = lo, hi  # the offset changes in (a, b]: bisect to the second
            while b - a > 1:
                mid = (a + b) // 2
                a, b = (mid, b) if _offset(zone, mid) == lo_offset else (a, mid)
            jumps.append(_Jump(b, lo_offset, _offset(zone, b)))
        lo, lo_offset = hi, hi_offset
    return _Chunk(_offset(zone, start), tuple(j.at for j in jumps), tuple(jumps))


class _Stretch(NamedTuple):
    lo: int
    hi: int
    offset: int
    jump: _Jump | None  # the transition at lo, None when lo is a chunk edge


_NO_STRETCH = _Stretch(0, 0, 0, None)


# The last stretch found in each zone: the first fires of a file's jobs, computed one
# after the other at a load, mostly fall in the stretch of "now" of their zone.
_last_stretch: dict[tzinfo, _Stretch] = {}


def _stretch(zone: tzinfo, u: int) -> _Stretch:
    """(lo, hi, offset, jump at lo or None): the constant-offset stretch holding u.

    lo and hi are transitions or chunk edges; a chunk edge carries no rule.
    """
    last = _last_stretch.get(zone)
    if last is not None and last.lo <= u < last.hi:
        return last
    found = _last_stretch[zone] = _find_stretch(zone, u)
    return found


def _find_stretch(zone: tzinfo, u: int) -> _Stretch:
    index = u // _CHUNK
    chunk = _chunk(zone, index)
    i = bisect.bisect_right(chunk.times, u)
    hi = chunk.times[i] if i < len(chunk.times) else (index + 1) * _CHUNK
    if i == 0:
        return _Stretch(index * _CHUNK, hi, chunk.start_offset, None)
    jump = chunk.jumps[i - 1]
    return _Stretch(jump.at, hi, jump.after, jump)


def _back(zone: tzinfo, stretch: _Stretch, u: int) -> _Jump | None:
    """_jump_at_or_before for u in stretch, without a lookup when the stretch tells."""
    if stretch.jump is not None:
        return stretch.jump if u - stretch.lo < _NEAR else None
    return None if u - stretch.lo >= _NEAR else _jump_at_or_before(zone, u)


def _ahead(zone: tzinfo, stretch: _Stretch, u: int) -> _Jump | None:
    """_jump_after for u in stretch, without a lookup when the stretch tells."""
    return None if stretch.hi - u > _NEAR else _jump_after(zone, u)


def _jump_at_or_before(zone: tzinfo, u: int) -> _Jump | None:
    """The latest transition at or before u, if it is less than _NEAR before u."""
    for index in (u // _CHUNK, (u - _NEAR) // _CHUNK):
        chunk = _chunk(zone, index)
        i = bisect.bisect_right(chunk.times, u)
        if i:
            jump = chunk.jumps[i - 1]
            return jump if u - jump.at < _NEAR else None
    return None


def _jump_after(zone: tzinfo, u: int) -> _Jump | None:
    """The first transition after u, if it is at most _NEAR after u."""
    for index in (u // _CHUNK, (u + _NEAR) // _CHUNK):
        chunk = _chunk(zone, index)
        i = bisect.bisect_right(chunk.times, u)
        if i < len(chunk.times):
            jump = chunk.jumps[i]
            return jump if jump.at - u <= _NEAR else None
    return None


def _jumps_between(zone: tzinfo, lo: int, hi: int) -> Iterator[_Jump]:
    for index in range(lo // _CHUNK, hi // _CHUNK + 1):
        yield from (j for j in _chunk(zone, index).jumps if lo <= j.at < hi)


# --- notes ----------------------------------------------------------------------------


def _naive(w: int) -> datetime:
    return _NAIVE_EPOCH + timedelta(seconds=w)


def _hm(w: int) -> str:
    return f"{_naive(w):%H:%M}"


def describe_walls(walls: Sequence[int], day: int) -> str:
    """Wall times as `02:00`, `02:00 and 02:30` or `02:00 to 02:59 (60 times)`; each is
    dated when it is not on `day` (days since 1970-01-01)."""

    def one(w: int) -> str:
        return f"{_naive(w):%H:%M}" if w // _DAY == day else f"{_naive(w):%Y-%m-%d %H:%M}"

    if not walls:
        return ""
    if len(walls) > 3:
        return f"{one(walls[0])} to {one(walls[-1])} ({len(walls)} times)"
    *head, last = [one(w) for w in walls]
    return f"{', '.join(head)} and {last}" if head else last


def note_made_up(skipped: str, *, many: bool, merged: str | None) -> str:
    """R4: a fixed-time job's skipped slot(s), run at the jump."""
    if merged is not None:
        return f"{skipped} skipped by DST; runs once at the jump, with its {merged} run (R4, R7)"
    if many:
        return f"{skipped} skipped by DST; runs once at the jump (R4, R7)"
    return f"{skipped} skipped by DST; runs at the jump (R4)"


def note_not_made_up(skipped: str, *, big: bool) -> str:
    """R4 for wildcard jobs, R6 for every job: skipped slots are not made up."""
    if big:
        return f"{skipped} skipped by a calendar change; not made up (R6)"
    return f"{skipped} skipped by DST; not made up (wildcard job, R4)"


def note_pass(wall: str, *, second: bool, fixed: bool, big: bool) -> str:
    """R5/R6: a fire on a wall time that happens twice."""
    if big:
        which = "second pass" if second else "first of two passes"
        return f"{which} of {wall} (calendar change, R6)"
    if fixed:
        return f"first pass of {wall}; the second pass is not run (R5)"
    which = "second pass" if second else "first of two passes"
    return f"{which} of {wall} (wildcard job, R5)"


# --- cron ------------------------------------------------------------------------------

# (expression, zone, jitter in µs, second after which) -> the first fire. Big files repeat
# a few expressions in a few zones across thousands of jobs, and the daemon asks every job
# for its first fire after the same instant (at start and reload) and every job due in a
# wake for its next fire after that wake: each distinct question is answered once. The
# answer depends on nothing else, and a Fire is immutable, so jobs share it. Bounded:
# cleared when full (a file of distinct expressions gains nothing from keeping them).
_first_fires: dict[tuple[CronExpr, tzinfo, int, int], Fire] = {}
_FIRST_FIRES_MAX = 4096


@functools.lru_cache(maxsize=256)
def _steady_offset(zone: tzinfo) -> int | None:
    """The zone's offset in seconds if it is the same at every instant, else None.

    `utcoffset(None)` tells: a datetime.timezone answers with its offset, and zoneinfo
    answers only for a zone with no transition and no DST rule at all (its "fixed
    offset" zones: UTC, Etc/GMT+5, ...); every zone that has or may have a transition
    gives None, as do other tzinfo classes for zones with DST."""
    offset = zone.utcoffset(None)
    return None if offset is None else offset // _S


class CronTiming:
    """A cron expression in a zone: R1-R7."""

    # One per job: 10,000 at the start of a big file.
    __slots__ = ("_fixed", "_jitter_us", "_steady", "_stretch", "expr", "jitter", "zone")

    def __init__(self, expr: CronExpr, zone: tzinfo, jitter: timedelta = timedelta(0)) -> None:
        self.expr = expr
        self.zone = zone
        self.jitter = jitter
        self._fixed = not expr.wildcard
        self._jitter_us = jitter // _US if jitter else 0
        self._stretch = _NO_STRETCH  # the last one used: fires come in order
        self._steady = _steady_offset(zone)

    def __repr__(self) -> str:
        return f"CronTiming({str(self.expr)!r}, {self.zone}, jitter={self.jitter})"

    def next_after(self, t: datetime) -> Fire:
        s = _seconds(t - self.jitter if self._jitter_us else t)
        key = (self.expr, self.zone, self._jitter_us, s)
        fire = _first_fires.get(key)
        if fire is None:
            fire = self._fire(*self._next(s))
            if len(_first_fires) >= _FIRST_FIRES_MAX:
                _first_fires.clear()
            _first_fires[key] = fire
        return fire

    def fires(self, after: datetime) -> Iterator[Fire]:
        s = _seconds(after - self.jitter)
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
                raise CronError(
                    f"{self.expr} does not fire in 400 years", field=None, value=str(self.expr)
                )
            return w - offset, None
        u = s
        while u < s + _SEARCH_LIMIT:
            stretch = self._stretch
            if not stretch.lo <= u < stretch.hi:
                stretch = self._stretch = _stretch(self.zone, u)
            lo, hi, offset, jump = stretch
            made_up = self._made_up(jump) if jump and lo > s else None
            start = max(s + 1, lo)
            back = _back(self.zone, stretch, start) if self._fixed and start < hi else None
            if back and 0 < back.before - back.after < _BIG_JUMP:  # R5: no second pass
                start = max(start, back.at + back.before - back.after)
            w = self.expr.next_wall(start + offset, hi + offset)
            if made_up is not None:
                merged = f"{_naive(lo + offset):%H:%M}" if w == lo + offset else None
                return lo, note_made_up(made_up[0], many=made_up[1] > 1, merged=merged)
            if w is not None:
                return w - offset, self._note(stretch, w - offset, w)
            u = hi
        raise CronError(f"{self.expr} does not fire in 400 years", field=None, value=str(self.expr))

    def _made_up(self, jump: _Jump) -> tuple[str, int] | None:
        """R4 for fixed-time jobs: the skipped wall times it matched, if any."""
        if not self._fixed or not 0 < jump.after - jump.before < _BIG_JUMP:
            return None
        skipped = self.expr.walls(jump.at + jump.before, jump.at + jump.after)
        if not skipped:
            return None
        return describe_walls(skipped, (jump.at + jump.after) // _DAY), len(skipped)

    def _note(self, stretch: _Stretch, u: int, w: int) -> str | None:
        """What R4-R6 did around the regular fire at u (wall time w), if anything."""
        back, ahead = _back(self.zone, stretch, u), _ahead(self.zone, stretch, u)
        if back is None and ahead is None:
            return None
        notes: list[str] = []
        if back and back.after > back.before:  # after a forward jump: not made up?
            big = back.after - back.before >= _BIG_JUMP
            landed = back.at + back.after
            first = landed // _DAY == w // _DAY and self.expr.next_wall(landed, w + 1) == w
            if (big or not self._fixed) and first:  # the first fire after the jump that day
                skipped = self.expr.walls(back.at + back.before, landed)
                if skipped:
                    notes.append(note_not_made_up(describe_walls(skipped, w // _DAY), big=big))
        elif back and u < back.at + back.before - back.after:  # on a second pass
            big = back.before - back.after >= _BIG_JUMP
            notes.append(note_pass(_hm(w), second=True, fixed=self._fixed, big=big))
        if ahead and ahead.after < ahead.before and u >= ahead.at - ahead.before + ahead.after:
            big = ahead.before - ahead.after >= _BIG_JUMP
            notes.append(note_pass(_hm(w), second=False, fixed=self._fixed, big=big))
        return "; ".join(notes) or None


# --- intervals -------------------------------------------------------------------------


class IntervalTiming:
    """R8: slots at anchor + k·every for k = 0, 1, 2, … in absolute time, plus jitter."""

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
        self.every = every
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
    after it starts (see daemon.py); for the scheduler it never falls due."""

    reboot = True

    def __repr__(self) -> str:
        return "RebootTiming()"

    def next_after(self, t: datetime) -> Fire:  # noqa: ARG002  (the Timing protocol)
        raise StopIteration

    def fires(self, after: datetime) -> Iterator[Fire]:  # noqa: ARG002  (the Timing protocol)
        return iter(())


# --- validation help -------------------------------------------------------------------


def dst_warnings(expr: CronExpr, zone: tzinfo, start: datetime, days: int = 366) -> list[str]:
    """For fixed-time jobs: one sentence per date in [start, start+days) on which the job's
    wall time falls into a DST gap or repeat of its zone, saying what crond does."""
    if expr.wildcard:
        return []
    s = _seconds(start)
    first_day: int | None = None
    found: list[tuple[int, str]] = []
    for jump in _jumps_in(zone, s - _DAY, s + (days + 2) * _DAY):
        lo, hi = sorted((jump.at + jump.before, jump.at + jump.after))
        if not _may_match(expr, lo, hi):
            continue  # most jobs: no time of day of theirs is in the gap or repeat
        if first_day is None:
            first_day = start.astimezone(zone).date().toordinal() - _ORDINAL_1970
        name = getattr(zone, "key", None) or str(zone)
        by_day: dict[int, list[int]] = {}
        for w in expr.walls(lo, hi):
            by_day.setdefault(w // _DAY, []).append(w)
        for day, walls in by_day.items():
            if first_day <= day < first_day + days:
                found.append((walls[0], _warning(jump, walls, name, zone)))
    return [text for _, text in sorted(found)]


@functools.lru_cache(maxsize=64)
def _jumps_in(zone: tzinfo, lo: int, hi: int) -> tuple[_Jump, ...]:
    """_jumps_between, kept: validate asks it for the same year of every job's zone."""
    return tuple(_jumps_between(zone, lo, hi))


def _may_match(expr: CronExpr, lo: int, hi: int) -> bool:
    """Whether a time of day of `expr` falls in the wall times [lo, hi): False rules out
    any matching wall time there without looking at dates."""
    if hi - lo >= _DAY:
        return True
    first, last = lo % _DAY, hi % _DAY
    i = bisect.bisect_left(expr.times, first)
    if first < last:
        return i < len(expr.times) and expr.times[i] < last
    return i < len(expr.times) or (bool(expr.times) and expr.times[0] < last)  # wraps midnight


def _warning(jump: _Jump, walls: list[int], name: str, zone: tzinfo) -> str:
    day = walls[0] // _DAY
    times = describe_walls(walls, day)
    plural = len(walls) > 1
    on = f"on {_naive(walls[0]):%Y-%m-%d} in {name}"
    big = abs(jump.after - jump.before) >= _BIG_JUMP
    if jump.after > jump.before:
        head = f"{times} {'do' if plural else 'does'} not exist {on}"
        if big:
            return f"{head} (a calendar change); the job does not run then (R6)"
        landed = jump.at + jump.after
        at = EPOCH + timedelta(seconds=jump.at)
        when = "that day" if landed // _DAY == day else f"on {_naive(landed):%Y-%m-%d}"
        abbr = at.astimezone(zone).tzname()
        once = "once " if plural else ""
        return f"{head}; the job runs {once}at {_naive(landed):%H:%M} ({abbr}) {when}"
    head = f"{times} {'happen' if plural else 'happens'} twice {on}"
    if big:
        return f"{head} (a calendar change); the job runs on both passes (R6)"
    first_pass = [w - jump.before for w in walls]
    utc = describe_walls(first_pass, first_pass[0] // _DAY)
    if len(first_pass) > 3:
        utc = f"{_hm(first_pass[0])} to {_hm(first_pass[-1])}"
    return f"{head}; the job runs on the first pass only ({utc} UTC)"
