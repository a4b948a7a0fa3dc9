"""The richer day fields (L, L-n, nW, LW, nL, n#k, ?: docs/schedules.md, "Richer cron
fields") against a brute-force reference, over every day of 2000-2037, in UTC and in
zones with every shape of DST change.

Under `make mutate` (mutmut sets MUTANT_UNDER_TEST) the span is 2015-2017 instead, which
still holds every shape (a leap February whose 1st is a Monday, a 30- and a 31-day month
starting on each weekday, each zone's changes: test_the_span_holds_every_shape), so that
each mutant's run costs a second, not a minute.

The reference knows nothing of crond's parser or day search: it reads the day and month
fields of the expressions below itself and decides, date by date from the calendar alone,
whether the date matches ("the weekday nearest the 15th" is the Monday-to-Friday day of
the month closest to the 15th, found by looking at all of them). Each matching date then
fires at the expression's wall time, found with zoneinfo: the first pass of a repeated
wall time (R5), the instant of the jump for a wall time the clocks skipped (R4). crond's
fires come from CronTiming, as the daemon's do.
"""

from __future__ import annotations

import calendar
import functools
import os
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from crond.when.timing import CronTiming, parse_cron

# The reference's dates are computed once a process (`reference_dates`, ~3 s): under
# `make test`'s workers this file's tests stay on one worker, which computes them once.
pytestmark = pytest.mark.xdist_group("cron-fields-oracle")

FIRST, LAST = date(2000, 1, 1), date(2037, 12, 31)
if "MUTANT_UNDER_TEST" in os.environ:  # `make mutate`: a short span of every shape
    FIRST, LAST = date(2015, 1, 1), date(2017, 12, 31)
YEARS = range(FIRST.year, LAST.year + 1)
_WEEKDAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

# The day, month and weekday fields: each form alone, in lists, with months, under R2's
# "and" (a field starting with * or ?) and "or" (both restricted).
DAY_PARTS = [
    "L * *",
    "L-1 * *",
    "L-15 * *",
    "L-28 2 *",  # 1 February in leap years only
    "L-30 * *",  # the 1st of 31-day months
    "1W * *",
    "15W * *",
    "28W * *",
    "30W * *",
    "31W * *",  # months with a 31st only
    "LW * *",
    "1,L * *",
    "L,15W * ?",
    "1W,LW */2 *",
    "? * friL",
    "* * 0L",
    "* * 7L",
    "? * 1#1",
    "* * fri#3",
    "* * sun#5",
    "* 2 mon#5",  # a fifth Monday of February: leap years whose 1 February is a Monday
    "* * mon#1,fri#3",
    "* * satL,sun#2",
    "* * 1-5,friL",
    "*/2 * friL",  # and: an odd day that is the last Friday
    "L * mon",  # or: the last day, and every Monday
    "15W * fri#3",
    "1-5 * friL",
    "LW * sat,sun",
    "1,L 1,6 2#2",
    "? 12 wedL",
    "LW 2 *",
]

# Per zone, wall times that meet its changes: a wall time is taken in turn per expression.
ZONES = {
    "UTC": [time(12, 0), time(0, 0), time(23, 59)],
    "America/New_York": [time(2, 30), time(1, 30)],  # 02:00 forward, 02:00 back to 01:00
    "Australia/Lord_Howe": [time(2, 15), time(1, 45)],  # 30 minutes
    "America/Santiago": [time(0, 30), time(23, 30)],  # at midnight, both ways
    "Asia/Beirut": [time(0, 30), time(23, 30)],  # at midnight, both ways
    "America/Havana": [time(0, 30), time(0, 15)],  # 00:00 forward, 01:00 back to 00:00
    "Europe/Berlin": [time(2, 30), time(2, 0)],
}


# --- the reference -------------------------------------------------------------------


def _number(text: str, names: list[str]) -> int:
    return names.index(text.lower()) if text.lower() in names else int(text)


def _weekdays_of_month(day: date) -> list[int]:
    length = calendar.monthrange(day.year, day.month)[1]
    return [d for d in range(1, length + 1) if date(day.year, day.month, d).isoweekday() <= 5]


def _nearest_weekday(day: date, target: int) -> int | None:
    length = calendar.monthrange(day.year, day.month)[1]
    if target > length:
        return None
    return min(_weekdays_of_month(day), key=lambda d: abs(d - target))


def _dom_item(item: str, day: date) -> bool:
    length = calendar.monthrange(day.year, day.month)[1]
    if item in ("*", "?"):
        return True
    if item.startswith("*/"):
        return (day.day - 1) % int(item[2:]) == 0
    if item == "LW":
        return day.day == max(_weekdays_of_month(day))
    if item == "L":
        return day.day == length
    if item.startswith("L-"):
        return day.day == length - int(item[2:])
    if item.endswith("W"):
        return day.day == _nearest_weekday(day, int(item[:-1]))
    low, _, high = item.partition("-")
    return int(low) <= day.day <= int(high or low)


def _dow_item(item: str, day: date) -> bool:
    weekday = day.isoweekday() % 7
    length = calendar.monthrange(day.year, day.month)[1]
    if item in ("*", "?"):
        return True
    if "#" in item:
        name, _, k = item.partition("#")
        count = (day.day - 1) // 7 + 1  # the how-manieth of its weekday this day is
        return weekday == _number(name, _WEEKDAYS) % 7 and count == int(k)
    if item.endswith("L"):
        return weekday == _number(item[:-1], _WEEKDAYS) % 7 and day.day + 7 > length
    low, _, high = item.partition("-")
    first, last = _number(low, _WEEKDAYS), _number(high or low, _WEEKDAYS)
    return any(w % 7 == weekday for w in range(first, last + 1))


def _month_item(item: str, day: date) -> bool:
    if item == "*":
        return True
    if item.startswith("*/"):
        return (day.month - 1) % int(item[2:]) == 0
    return day.month == int(item)


@functools.cache
def reference_dates(part: str) -> tuple[date, ...]:
    """The dates of [FIRST, LAST] the day part "dom month dow" matches (R2 as written)."""
    dom, month, dow = part.split()
    both = dom[0] in "*?" or dow[0] in "*?"
    found = []
    day = FIRST
    while day <= LAST:
        if any(_month_item(m, day) for m in month.split(",")):
            in_month = any(_dom_item(i, day) for i in dom.split(","))
            in_week = any(_dow_item(i, day) for i in dow.split(","))
            if (in_month and in_week) if both else (in_month or in_week):
                found.append(day)
        day += timedelta(days=1)
    return tuple(found)


def reference_instant(day: date, wall: time, zone: ZoneInfo) -> datetime:
    """The instant a fixed-time job fires for `wall` on `day`: its first pass (R5), or
    the end of the gap the clocks skipped it in (R4)."""
    naive = datetime.combine(day, wall)
    u = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if u.astimezone(zone).replace(tzinfo=None) == naive:
        return u
    # Skipped: the first minute whose wall time is past it (a gap of at most 3 h).
    u = naive.replace(tzinfo=UTC) - timedelta(hours=15)
    while u.astimezone(zone).replace(tzinfo=None) <= naive:
        u += timedelta(minutes=1)
    return u


# --- the comparison ------------------------------------------------------------------


def crond_fires(text: str, zone: ZoneInfo) -> list[datetime]:
    timing = CronTiming(parse_cron(text), zone)
    found = []
    for fire in timing.fires(datetime.combine(FIRST - timedelta(days=2), time(0), UTC)):
        local = fire.local.date()
        if local > LAST:
            break
        if local >= FIRST:
            found.append(fire.at)
    return found


def test_the_reference_sees_the_shapes_it_is_meant_to() -> None:
    """The zones' changes are where the wall times are: a gap and a repeat each."""
    for name, walls in list(ZONES.items())[1:]:
        zone = ZoneInfo(name)
        skipped = repeated = 0
        for year in YEARS:
            for n in range(366 if calendar.isleap(year) else 365):
                day = date(year, 1, 1) + timedelta(days=n)
                for wall in walls:
                    naive = datetime.combine(day, wall)
                    first = naive.replace(tzinfo=zone, fold=0)
                    second = naive.replace(tzinfo=zone, fold=1)
                    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != naive:
                        skipped += 1
                    elif first.utcoffset() != second.utcoffset():
                        repeated += 1
        assert skipped, name
        assert repeated, name


def test_the_span_holds_every_shape() -> None:
    """The span has a leap February whose 1st is a Monday (`* 2 mon#5`), and 30- and
    31-day months starting on each day of the week."""
    firsts: dict[int, set[int]] = {}
    for year in YEARS:
        for month in range(1, 13):
            first, length = calendar.monthrange(year, month)
            firsts.setdefault(length, set()).add(first)
    assert firsts[29] & {0}
    assert firsts[30] == firsts[31] == set(range(7))


@pytest.mark.parametrize("zone_name", list(ZONES))
def test_day_forms_match_the_reference_every_day_2000_2037(zone_name: str) -> None:
    zone = ZoneInfo(zone_name)
    walls = ZONES[zone_name]
    differences = []
    for i, part in enumerate(DAY_PARTS):
        wall = walls[i % len(walls)]
        text = f"{wall.minute} {wall.hour} {part}"
        expected = [reference_instant(d, wall, zone) for d in reference_dates(part)]
        got = crond_fires(text, zone)
        if got != expected:
            missing = sorted(set(expected) - set(got))[:3]
            extra = sorted(set(got) - set(expected))[:3]
            differences.append(f"{text}: missing {missing}, extra {extra}")
    assert differences == []


def test_the_reference_is_not_empty() -> None:
    """Each expression fires at least once in the span, and the rare ones rarely."""
    counts = {part: len(reference_dates(part)) for part in DAY_PARTS}
    assert min(counts.values()) > 0
    leap = [y for y in YEARS if calendar.isleap(y)]
    assert counts["L-28 2 *"] == len(leap)  # 1 February of leap years
    assert counts["* 2 mon#5"] == len([y for y in leap if date(y, 2, 1).weekday() == 0])
