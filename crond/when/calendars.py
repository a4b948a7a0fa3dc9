"""Calendars: named sets of days, and the timed windows some of them hold
(docs/schedules.md, "Calendars").

A calendar's days in one year are an int used as a bit set: bit i is the year's day i
(1 January is bit 0). Unions, exceptions, "the next day inside" and "the n-th day of the
month" are then a few operations on ints, never a walk over days; each calendar keeps
the years it was asked for. What a calendar is made of:

- `Dates`: single days and `a..b` ranges, and month-days that come every year;
- `Weekdays`: days of the week;
- `Holidays`: public holidays of a country (and subdivision), computed offline by the
  `holidays` package, a year at a time when asked;
- `Listed`: days given with a name each (an iCalendar file's all-day events);
- windows: instants `[from, until)`, with a label (timed events, `windows:`).

`Calendar` joins them: its own sources and the calendars it includes, less the days of
the calendars it excepts (with neither sources nor includes, every day). Windows join
by union only. Pure: nothing here reads a file (crond/config/calendars.py does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Protocol

__all__ = [
    "Calendar",
    "Dates",
    "Holidays",
    "Listed",
    "Source",
    "Weekdays",
    "Window",
    "days_in_year",
    "month_bits",
    "year_start",
]

_YEAR_MAX = 9999


def days_in_year(year: int) -> int:
    return 366 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 365


def year_start(year: int) -> int:
    """The ordinal of 1 January of `year`."""
    return date(year, 1, 1).toordinal()


def all_days(year: int) -> int:
    return (1 << days_in_year(year)) - 1


def month_bits(year: int, month: int) -> tuple[int, int]:
    """The first bit and the number of days of `month` in `year`'s bit set."""
    first = date(year, month, 1).toordinal() - year_start(year)
    end = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
    return first, end.toordinal() - year_start(year) - first


def _span_bits(year: int, lo: date, hi: date) -> int:
    """The days from lo to hi (both included) that fall in `year`."""
    first, last = max(lo, date(year, 1, 1)), min(hi, date(year, 12, 31))
    if first > last:
        return 0
    start = first.toordinal() - year_start(year)
    return ((1 << (last.toordinal() - first.toordinal() + 1)) - 1) << start


class Source(Protocol):
    def mask(self, year: int) -> int:
        """The source's days in `year`, as bits."""
        ...

    def name_of(self, day: date) -> str | None:
        """What the day is called in this source (a holiday's name), if anything."""
        ...


@dataclass(frozen=True)
class Dates:
    """Days and ranges (`spans`, both ends included) and month-days of every year
    (`yearly`: (month, day) to (month, day), both included, in one year)."""

    spans: tuple[tuple[date, date], ...] = ()
    yearly: tuple[tuple[tuple[int, int], tuple[int, int]], ...] = ()

    def mask(self, year: int) -> int:
        bits = 0
        for lo, hi in self.spans:
            bits |= _span_bits(year, lo, hi)
        for (m1, d1), (m2, d2) in self.yearly:
            lo, hi = _month_day(year, m1, d1, up=True), _month_day(year, m2, d2, up=False)
            bits |= _span_bits(year, lo, hi)
        return bits

    def name_of(self, day: date) -> str | None:  # noqa: ARG002  (the Source protocol)
        return None


def _month_day(year: int, month: int, day: int, *, up: bool) -> date:
    """(month, day) in `year`; 29 February in a common year is 1 March as a start and
    28 February as an end."""
    try:
        return date(year, month, day)
    except ValueError:
        return date(year, 3, 1) if up else date(year, 2, 28)


@dataclass(frozen=True)
class Weekdays:
    """Days of the week: `days` holds Monday=0 … Sunday=6."""

    days: frozenset[int]

    def mask(self, year: int) -> int:
        first = date(year, 1, 1).weekday()
        week = 0
        for i in range(7):
            if (first + i) % 7 in self.days:
                week |= 1 << i
        n = days_in_year(year)
        bits = 0
        for start in range(0, n, 7):
            bits |= week << start
        return bits & all_days(year)

    def name_of(self, day: date) -> str | None:  # noqa: ARG002  (the Source protocol)
        return None


@dataclass(frozen=True)
class Listed:
    """Days given one by one with a name each (an iCalendar file's all-day events)."""

    days: Mapping[date, str]

    def mask(self, year: int) -> int:
        start = year_start(year)
        bits = 0
        for day in self.days:
            if day.year == year:
                bits |= 1 << (day.toordinal() - start)
        return bits

    def name_of(self, day: date) -> str | None:
        return self.days.get(day)


@dataclass(frozen=True)
class Holidays:
    """Public holidays of `country` (and `subdiv`) by the `holidays` package."""

    country: str
    subdiv: str | None = None
    _years: dict[int, dict[date, str]] = field(default_factory=dict, compare=False, repr=False)

    def _of(self, year: int) -> dict[date, str]:
        found = self._years.get(year)
        if found is None:
            import holidays  # noqa: PLC0415  (only for files that name a country)

            table = holidays.country_holidays(self.country, subdiv=self.subdiv, years=year)
            found = self._years[year] = {d: str(n) for d, n in table.items() if d.year == year}
        return found

    def mask(self, year: int) -> int:
        start = year_start(year)
        bits = 0
        for day in self._of(year):
            bits |= 1 << (day.toordinal() - start)
        return bits

    def name_of(self, day: date) -> str | None:
        return self._of(day.year).get(day)


@dataclass(frozen=True)
class Window:
    """`[start, end)`: an aware instant pair, or naive ones read in the job's zone."""

    start: datetime
    end: datetime
    label: str = ""

    def resolved(self, zone: tzinfo) -> tuple[datetime, datetime]:
        def aware(t: datetime) -> datetime:
            return (t if t.tzinfo is not None else t.replace(tzinfo=zone)).astimezone(UTC)

        return aware(self.start), aware(self.end)


@dataclass(eq=False)
class Calendar:
    """A named calendar. `sources` and `include` add days, `exclude` removes them; with
    neither sources nor includes, the calendar starts from every day. `windows` are its
    own timed windows; those of included calendars join them. A calendar of `except`
    alone starts from every day; one of windows alone has no days."""

    name: str
    sources: Sequence[Source] = ()
    include: Sequence[Calendar] = ()
    exclude: Sequence[Calendar] = ()
    windows: Sequence[Window] = ()
    _masks: dict[int, int] = field(default_factory=dict, repr=False)

    def mask(self, year: int) -> int:
        bits = self._masks.get(year)
        if bits is None:
            if year < 1 or year > _YEAR_MAX:
                return 0
            if self.sources or self.include or self.windows:
                bits = 0
                for source in self.sources:
                    bits |= source.mask(year)
                for other in self.include:
                    bits |= other.mask(year)
            else:
                bits = all_days(year)
            for other in self.exclude:
                bits &= ~other.mask(year)
            self._masks[year] = bits
        return bits

    def __contains__(self, day: date) -> bool:
        return bool(self.mask(day.year) >> (day.toordinal() - year_start(day.year)) & 1)

    def all_windows(self) -> list[tuple[Window, str]]:
        """Its windows and its included calendars', each with the calendar it is of."""
        found = [(w, self.name) for w in self.windows]
        for other in self.include:
            found += other.all_windows()
        return found

    def why(self, day: date) -> str:
        """Why `day` is in the calendar, in words: "de-holidays (Christmas Day)"."""
        for source in self.sources:
            if source.mask(day.year) >> (day.toordinal() - year_start(day.year)) & 1:
                name = source.name_of(day)
                return f"{self.name} ({name})" if name else self.name
        for other in self.include:
            if day in other:
                return other.why(day)
        return self.name


def nth_of_months(bits: int, year: int, nth: int) -> int:
    """Of each month's days in `bits`, the nth (1 = first, -1 = last) alone."""
    kept = 0
    for month in range(1, 13):
        first, length = month_bits(year, month)
        days = bits >> first & ((1 << length) - 1)
        count = days.bit_count()
        if nth > count or -nth > count:
            continue
        index = nth - 1 if nth > 0 else count + nth
        for _ in range(index):
            days &= days - 1  # drop the lowest day
        kept |= (days & -days) << first
    return kept


def next_bit(bits: int, i: int) -> int | None:
    """The lowest set bit at i or above."""
    rest = bits >> i
    return None if not rest else i + (rest & -rest).bit_length() - 1


def prev_bit(bits: int, i: int) -> int | None:
    """The highest set bit at i or below."""
    low = bits & ((2 << i) - 1) if i >= 0 else 0
    return None if not low else low.bit_length() - 1


def find_day(mask: Callable[[int], int], day: date, *, forward: bool, years: int) -> date | None:
    """The first day from `day` on (back, if not `forward`), `day` included, whose bit
    is set in `mask(year)`, looking `years` years at most past `day`'s year."""
    year = day.year
    i = day.toordinal() - year_start(year)
    for _ in range(years + 1):
        if year < 1 or year > _YEAR_MAX:
            return None
        bits = mask(year)
        found = next_bit(bits, i) if forward else prev_bit(bits, i)
        if found is not None:
            return date.fromordinal(year_start(year) + found)
        year += 1 if forward else -1
        i = 0 if forward else days_in_year(year) - 1
    return None


ONE_DAY = timedelta(days=1)
