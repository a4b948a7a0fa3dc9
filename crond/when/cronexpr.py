"""A cron expression as the timing rules use it: the value sets of its five fields, the
facts of R2 (the day rule) and R3 (wildcard or fixed time), and the wall times it matches,
found by day searches that expressions with the same day fields share. `cronparse` makes
one from text.
"""

from __future__ import annotations

import bisect
import calendar
import functools
from dataclasses import dataclass, field
from datetime import date

from crond.when.cronforms import DayForm, month_days

__all__ = ["NEVER", "CronExpr"]

_DAY = 86400
NEVER = _NEVER = 10**9  # a day number beyond any date: "no matching day"
_DAYS_CACHED = 64
_ORDINAL_1970 = date(1970, 1, 1).toordinal()


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A validated cron expression: the value sets of its fields, and R2/R3 facts.
    (Slots: a file of distinct expressions keeps one per job for the daemon's life.)"""

    source: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday .. 6 = Saturday (7 is folded into 0)
    day_and: bool  # R2: day-of-month or day-of-week starts with "*": a day must match both
    wildcard: bool  # R3: minute or hour starts with "*"
    reboot: bool = False  # `@reboot`: no wall time at all; the daemon fires it at start
    # The day forms (L, L-n, nW, LW, nL, n#k: cronforms.py), beside `days` and `weekdays`.
    day_forms: frozenset[DayForm] = frozenset()
    # The expression with its `H` values resolved for its job ("17 2 * * *"), else "".
    resolved: str = ""
    # Seconds from midnight of the matching wall times, ascending.
    times: tuple[int, ...] = field(init=False, repr=False, compare=False)
    # The months, ascending: the day search jumps from one to the next.
    month_list: tuple[int, ...] = field(init=False, repr=False, compare=False)
    # The day search, shared by the expressions with the same day fields (below).
    _days: DaySearch = field(init=False, repr=False, compare=False, hash=False)
    # The fields `==` compares, hashed once: an expression is a cache key (first fires, a
    # load's parsed expressions) thousands of times at a load.
    _hash: int = field(init=False, repr=False, compare=False, hash=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "times", _times(self.hours, self.minutes))
        object.__setattr__(self, "month_list", _sorted(self.months))
        days = _day_search(self.days, self.weekdays, self.day_and, self.month_list, self.day_forms)
        object.__setattr__(self, "_days", days)
        fields = (self.source, self.minutes, self.hours, self.days, self.months,
                  self.weekdays, self.day_and, self.wildcard, self.reboot, self.day_forms,
                  self.resolved)  # fmt: skip
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return self.source

    def next_wall(self, lo: int, hi: int) -> int | None:
        """The first matching wall time in [lo, hi), or None. Wall times are seconds since
        1970-01-01 00:00 read as a naive local time; matches are whole minutes (R1)."""
        minute = -(-lo // 60) * 60
        day = minute // _DAY
        second = minute - day * _DAY  # (operators: cheaper than a call of divmod)
        times = self.times
        i = bisect.bisect_left(times, second)
        if i < len(times):
            # When `day` does not match, the first matching day after it is the one this
            # lookup found: a second search from day + 1 would only find it again.
            found = self.next_day(day)
            w = day * _DAY + times[i] if found == day else found * _DAY + times[0]
        else:
            w = self.next_day(day + 1) * _DAY + times[0]
        return w if w < hi else None

    def next_day(self, day: int) -> int:
        """The first matching day on or after `day` (days since 1970-01-01), cached."""
        return self._days.next_day(day)

    def walls(self, lo: int, hi: int) -> list[int]:
        """Every matching wall time in [lo, hi)."""
        found: list[int] = []
        w = self.next_wall(lo, hi)
        while w is not None:
            found.append(w)
            w = self.next_wall(w + 60, hi)
        return found


class DaySearch:
    """The days that match R2 for one set of day fields (day of month, weekday, months,
    the day rule), found month by month and remembered.

    Expressions that differ only in their times share one (`_day_search`): a file of
    10,000 jobs with distinct times keeps a few dozen searches and their memory instead of
    one each, ~0.4 kB a job of the daemon's idle RSS (docs/performance.md); and jobs of
    one file ask the same few days.
    """

    __slots__ = ("_cache", "_span", "day_and", "days", "forms", "month_list", "weekdays")

    def __init__(
        self,
        days: frozenset[int],
        weekdays: frozenset[int],
        day_and: bool,
        month_list: tuple[int, ...],
        forms: frozenset[DayForm] = frozenset(),
    ) -> None:
        self.days, self.weekdays, self.day_and = days, weekdays, day_and
        self.month_list, self.forms = month_list, forms
        # day -> the first matching day on or after it. Small: a walk asks about the
        # same few days again and again, a daemon about the next day.
        self._cache: dict[int, int] = {}
        # [lo, found]: the last search, from day lo, found day `found`, so no day in
        # between matches and every one of them has the same answer. A fire's successor
        # is found from the day after it and asked again from wherever the zone's
        # timeline is cut (a chunk edge, a DST change) on the way there: for yearly jobs,
        # two searches of a year.
        self._span = [1, 0]

    def next_day(self, day: int) -> int:
        """The first matching day on or after `day` (days since 1970-01-01), cached."""
        span = self._span
        if span[0] <= day <= span[1]:
            return span[1]
        found = self._cache.get(day)
        if found is None:
            if len(self._cache) >= _DAYS_CACHED:  # thousands of searches live long
                self._cache.clear()
            found = self._cache[day] = self._find(day)
        span[0], span[1] = day, found
        return found

    def _find(self, day: int) -> int:
        # Month by month as (year, month) numbers, jumping straight to the next month of
        # the expression: a yearly job's next fire is up to 11 other months away, and
        # `crond next` asks that of every job n times. Dates come from small caches: the
        # jobs of a file all start from today, and look at the same few months.
        year, month, first = _civil(day)
        ordered = self.month_list
        days, weekdays, day_and, forms = self.days, self.weekdays, self.day_and, self.forms
        end = year + 400  # a Gregorian cycle: a valid expression matches within it
        while ordered:
            i = bisect.bisect_left(ordered, month)
            if i == len(ordered):  # past its last month (13 included): next year's first
                year, month, first = year + 1, ordered[0], 1
            elif ordered[i] != month:
                month, first = ordered[i], 1
            if year >= end:
                break
            start, length, weekday = _month(year, month)
            matching = _days_of_month(days, weekdays, day_and, length, weekday, forms=forms)
            j = bisect.bisect_left(matching, first)
            if j < len(matching):
                return start + matching[j] - 1
            month, first = month + 1, 1
        return _NEVER


# The caches below are applied by assignment rather than with `@`: mutmut, which
# `make mutate` runs, leaves decorated functions alone, and these hold rules (R2 is one).


def _civil_date(day: int) -> tuple[int, int, int]:
    """(year, month, day of month) of a day number (days since 1970-01-01)."""
    d = date.fromordinal(day + _ORDINAL_1970)
    return d.year, d.month, d.day


_civil = functools.lru_cache(maxsize=64)(_civil_date)


def _month_facts(year: int, month: int) -> tuple[int, int, int]:
    """(day number of the 1st, number of days, weekday of the 1st with 0 = Sunday)."""
    monday_based, length = calendar.monthrange(year, month)
    return date(year, month, 1).toordinal() - _ORDINAL_1970, length, (monday_based + 1) % 7


_month = functools.lru_cache(maxsize=1024)(_month_facts)


def _times_of_day(hours: frozenset[int], minutes: frozenset[int]) -> tuple[int, ...]:
    # Hours apart by more than any minute: hour by hour, minute by minute is in order.
    return tuple([h * 3600 + m for h in _sorted(hours) for m in _minute_seconds(minutes)])


def _in_seconds(minutes: frozenset[int]) -> tuple[int, ...]:
    return tuple([m * 60 for m in sorted(minutes)])


def _ascending(values: frozenset[int]) -> tuple[int, ...]:
    return tuple(sorted(values))


# Field sets come from `cronparse._field`'s cache, so expressions share them, and what is
# derived from them alone is derived once: a file of thousands of distinct expressions
# repeats a few dozen hour and minute sets (and "* * * * *" has 1,440 times). Room for
# 2,048 pairs: a file of single times ("17 5 ...") can name all 1,440 minutes of the day,
# and a smaller cache, met in file order, would lose each pair before it came round again.
_times = functools.lru_cache(maxsize=2048)(_times_of_day)
_minute_seconds = functools.lru_cache(maxsize=1024)(_in_seconds)
_sorted = functools.lru_cache(maxsize=1024)(_ascending)
# One DaySearch per set of day fields (past 1,024 sets, new expressions get new ones).
_day_search = functools.lru_cache(maxsize=1024)(DaySearch)


def _matching_days(
    days: frozenset[int],
    weekdays: frozenset[int],
    day_and: bool,
    length: int,
    first: int,
    *,
    forms: frozenset[DayForm] = frozenset(),
) -> tuple[int, ...]:
    """R2 over a month of `length` days whose 1st is weekday `first`; the day forms add
    the days they pick to their field's (L to day-of-month, fri#3 to day-of-week)."""
    if forms:
        extra_days, extra_weekdays = month_days(forms, length, first)
        days, in_week = days | extra_days, extra_weekdays
    else:
        in_week = frozenset()
    return tuple(
        d
        for d in range(1, length + 1)
        if (
            (d in days and ((first + d - 1) % 7 in weekdays or d in in_week))
            if day_and
            else (d in days or (first + d - 1) % 7 in weekdays or d in in_week)
        )
    )


# A month is only two numbers to R2 and its day forms, and expressions share their day
# fields: thousands of expressions need a few dozen of these.
_days_of_month = functools.lru_cache(maxsize=4096)(_matching_days)
