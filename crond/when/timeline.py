"""A zone's timeline: the stretches of constant UTC offset between its transitions.

Owns the frame every computation of crond.when works in: an instant is whole seconds
since the Unix epoch ("u"), and a wall time of a zone is the same kind of number read as
a naive local time ("w", u = w - offset). Transitions are found by probing the zone's
offset, not by reading tzdata's files, so any tzinfo works (zoneinfo, datetime.timezone,
a test's own zone). What the rules do where two stretches meet (R4-R6 of
docs/schedules.md) is timing.py's business.

A zone's data is probed in chunks of 384 days, every 12 h; bisection finds each change to
the second. That finds every offset change as long as changes are more than 12 h apart:
in tzdata they are at least 95 h apart (tests/when/test_timing.py checks the installed data).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import NamedTuple

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DAY = 86400
BIG_JUMP = 3 * 3600  # R6: a change of 3 h or more is a calendar change, not DST
NEAR = 2 * DAY  # transitions farther than this from a fire cannot touch it
CHUNK = 384 * DAY
PROBE = 12 * 3600
_S = timedelta(seconds=1)


def seconds(t: datetime) -> int:
    """Floor of t in epoch seconds; t must be aware."""
    last, s = _last_seconds[0]
    if t is last:  # a load asks every job for its first fire after its `now`
        return s
    if t.utcoffset() is None:
        raise ValueError(f"{t!r} has no time zone; crond compares UTC instants only")
    delta = t - EPOCH
    s = delta.days * DAY + delta.seconds
    _last_seconds[0] = t, s
    return s


# The last instant `seconds` converted, with its answer (a datetime is immutable). One
# pair, replaced whole: a reload validates its file in a thread.
_last_seconds: list[tuple[datetime | None, int]] = [(None, 0)]


class Jump(NamedTuple):
    """A transition: the offset changes from `before` to `after` at instant `at`."""

    at: int  # first instant with the new offset
    before: int  # offset before, seconds
    after: int  # offset after, seconds


@dataclass(frozen=True)
class _Chunk:
    start_offset: int
    times: tuple[int, ...]
    jumps: tuple[Jump, ...]


_chunks: dict[tuple[tzinfo, int], _Chunk] = {}


def _offset(zone: tzinfo, u: int) -> int:
    # fromtimestamp with a zone is always aware; "or" only satisfies the type checker
    return (datetime.fromtimestamp(u, zone).utcoffset() or timedelta(0)) // _S


def _chunk(zone: tzinfo, index: int) -> _Chunk:
    found = _chunks.get((zone, index))
    if found is None:
        if len(_chunks) > 10_000:  # bound memory across very long walks
            _chunks.clear()
        found = _chunks[(zone, index)] = _probe(zone, index)
    return found


def _probe(zone: tzinfo, index: int) -> _Chunk:
    start, end = index * CHUNK, (index + 1) * CHUNK
    jumps: list[Jump] = []
    lo, lo_offset = start - 1, _offset(zone, start - 1)
    while lo < end - 1:
        hi = min(lo + PROBE, end - 1)
        hi_offset = _offset(zone, hi)
        if hi_offset != lo_offset:
            a, b = lo, hi  # the offset changes in (a, b]: bisect to the second
            while b - a > 1:
                mid = (a + b) // 2
                a, b = (mid, b) if _offset(zone, mid) == lo_offset else (a, mid)
            jumps.append(Jump(b, lo_offset, _offset(zone, b)))
        lo, lo_offset = hi, hi_offset
    return _Chunk(_offset(zone, start), tuple(j.at for j in jumps), tuple(jumps))


class Stretch(NamedTuple):
    """[lo, hi) at one offset. lo and hi are transitions or chunk edges; `jump` is the
    transition at lo, None at a chunk edge (which carries no rule)."""

    lo: int
    hi: int
    offset: int
    jump: Jump | None


NO_STRETCH = Stretch(0, 0, 0, None)

# The last stretch found in each zone: the first fires of a file's jobs, computed one
# after the other at a load, mostly fall in the stretch of "now" of their zone.
_last_stretch: dict[tzinfo, Stretch] = {}


def stretch_at(zone: tzinfo, u: int) -> Stretch:
    """The constant-offset stretch holding u."""
    last = _last_stretch.get(zone)
    if last is not None and last.lo <= u < last.hi:
        return last
    found = _last_stretch[zone] = _find_stretch(zone, u)
    return found


def _find_stretch(zone: tzinfo, u: int) -> Stretch:
    index = u // CHUNK
    chunk = _chunk(zone, index)
    i = bisect.bisect_right(chunk.times, u)
    hi = chunk.times[i] if i < len(chunk.times) else (index + 1) * CHUNK
    if i == 0:
        return Stretch(index * CHUNK, hi, chunk.start_offset, None)
    jump = chunk.jumps[i - 1]
    return Stretch(jump.at, hi, jump.after, jump)


def jump_back(zone: tzinfo, stretch: Stretch, u: int) -> Jump | None:
    """The latest transition at or before u (in `stretch`) if it is less than NEAR before
    u; without a lookup when the stretch tells."""
    if stretch.jump is not None:
        return stretch.jump if u - stretch.lo < NEAR else None
    return None if u - stretch.lo >= NEAR else _jump_at_or_before(zone, u)


def jump_ahead(zone: tzinfo, stretch: Stretch, u: int) -> Jump | None:
    """The first transition after u (in `stretch`) if it is at most NEAR after u; without
    a lookup when the stretch tells."""
    return None if stretch.hi - u > NEAR else _jump_after(zone, u)


def _jump_at_or_before(zone: tzinfo, u: int) -> Jump | None:
    for index in (u // CHUNK, (u - NEAR) // CHUNK):
        chunk = _chunk(zone, index)
        i = bisect.bisect_right(chunk.times, u)
        if i:
            jump = chunk.jumps[i - 1]
            return jump if u - jump.at < NEAR else None
    return None


def _jump_after(zone: tzinfo, u: int) -> Jump | None:
    for index in (u // CHUNK, (u + NEAR) // CHUNK):
        chunk = _chunk(zone, index)
        i = bisect.bisect_right(chunk.times, u)
        if i < len(chunk.times):
            jump = chunk.jumps[i]
            return jump if jump.at - u <= NEAR else None
    return None


def jumps_between(zone: tzinfo, lo: int, hi: int) -> Iterator[Jump]:
    """Every transition in [lo, hi), in order."""
    for index in range(lo // CHUNK, hi // CHUNK + 1):
        yield from (j for j in _chunk(zone, index).jumps if lo <= j.at < hi)


def _steady(zone: tzinfo) -> int | None:
    """The zone's offset in seconds if it is the same at every instant, else None.

    `utcoffset(None)` tells: a datetime.timezone answers with its offset, and zoneinfo
    answers only for a zone with no transition and no DST rule at all (its "fixed
    offset" zones: UTC, Etc/GMT+5, ...); every zone that has or may have a transition
    gives None, as do other tzinfo classes for zones with DST."""
    offset = zone.utcoffset(None)
    return None if offset is None else offset // _S


# Caches are applied by assignment rather than with `@`: mutmut, which `make mutate`
# runs, leaves decorated functions alone, and these hold rules worth testing.
steady_offset = functools.lru_cache(maxsize=256)(_steady)
