"""What the DST rules say in words: the note on a fire that R4-R6 of docs/schedules.md
moved, dropped or repeated, and the warnings `crond validate` prints for fixed-time jobs
whose wall time falls into a gap or a repeat of their zone.

The wording is part of the contract: docs/schedules.md lists every note, and the oracle of
tests/when/test_timing_oracle.py builds its expected notes with these same functions.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence
from datetime import date, datetime, timedelta, tzinfo

from crond.when.cronexpr import CronExpr
from crond.when.timeline import BIG_JUMP, DAY, EPOCH, Jump, jumps_between, seconds

_NAIVE_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 -- wall times are naive on purpose
_ORDINAL_1970 = date(1970, 1, 1).toordinal()


def naive(w: int) -> datetime:
    """A wall time as a naive datetime."""
    return _NAIVE_EPOCH + timedelta(seconds=w)


def hm(w: int) -> str:
    return f"{naive(w):%H:%M}"


def describe_walls(walls: Sequence[int], day: int) -> str:
    """Wall times as `02:00`, `02:00 and 02:30` or `02:00 to 02:59 (60 times)`; each is
    dated when it is not on `day` (days since 1970-01-01)."""

    def one(w: int) -> str:
        return f"{naive(w):%H:%M}" if w // DAY == day else f"{naive(w):%Y-%m-%d %H:%M}"

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


# --- the warnings of `crond validate` --------------------------------------------------


def dst_warnings(expr: CronExpr, zone: tzinfo, start: datetime, days: int = 366) -> list[str]:
    """For fixed-time jobs: one sentence per date in [start, start+days) on which the job's
    wall time falls into a DST gap or repeat of its zone, saying what crond does."""
    if expr.wildcard:
        return []
    s = seconds(start)
    first_day: int | None = None
    found: list[tuple[int, str]] = []
    for jump in _jumps_in(zone, s - DAY, s + (days + 2) * DAY):
        lo, hi = sorted((jump.at + jump.before, jump.at + jump.after))
        if not _may_match(expr, lo, hi):
            continue  # most jobs: no time of day of theirs is in the gap or repeat
        if first_day is None:
            first_day = start.astimezone(zone).date().toordinal() - _ORDINAL_1970
        name = str(zone)  # a ZoneInfo's key, if it has one
        by_day: dict[int, list[int]] = {}
        for w in expr.walls(lo, hi):
            by_day.setdefault(w // DAY, []).append(w)
        for day, walls in by_day.items():
            if first_day <= day < first_day + days:
                found.append((walls[0], _warning(jump, walls, name, zone)))
    return [text for _, text in sorted(found)]


def _jumps(zone: tzinfo, lo: int, hi: int) -> tuple[Jump, ...]:
    return tuple(jumps_between(zone, lo, hi))


# Kept: validate asks for the same year of every job's zone. (Cached by assignment, not
# with `@`, so that `make mutate` tests the function: see timeline.steady_offset.)
_jumps_in = functools.lru_cache(maxsize=64)(_jumps)


def _may_match(expr: CronExpr, lo: int, hi: int) -> bool:
    """Whether a time of day of `expr` falls in the wall times [lo, hi): False rules out
    any matching wall time there without looking at dates."""
    if hi - lo >= DAY:
        return True
    first, last = lo % DAY, hi % DAY
    i = bisect.bisect_left(expr.times, first)
    if first < last:
        return i < len(expr.times) and expr.times[i] < last
    return i < len(expr.times) or (bool(expr.times) and expr.times[0] < last)  # wraps midnight


def _warning(jump: Jump, walls: list[int], name: str, zone: tzinfo) -> str:
    day = walls[0] // DAY
    times = describe_walls(walls, day)
    plural = len(walls) > 1
    on = f"on {naive(walls[0]):%Y-%m-%d} in {name}"
    big = abs(jump.after - jump.before) >= BIG_JUMP
    if jump.after > jump.before:
        head = f"{times} {'do' if plural else 'does'} not exist {on}"
        if big:
            return f"{head} (a calendar change); the job does not run then (R6)"
        landed = jump.at + jump.after
        at = EPOCH + timedelta(seconds=jump.at)
        when = "that day" if landed // DAY == day else f"on {naive(landed):%Y-%m-%d}"
        abbr = at.astimezone(zone).tzname()
        once = "once " if plural else ""
        return f"{head}; the job runs {once}at {naive(landed):%H:%M} ({abbr}) {when}"
    head = f"{times} {'happen' if plural else 'happens'} twice {on}"
    if big:
        return f"{head} (a calendar change); the job runs on both passes (R6)"
    first_pass = [w - jump.before for w in walls]
    utc = describe_walls(first_pass, first_pass[0] // DAY)
    if len(first_pass) > 3:
        utc = f"{hm(first_pass[0])} to {hm(first_pass[-1])}"
    return f"{head}; the job runs on the first pass only ({utc} UTC)"
