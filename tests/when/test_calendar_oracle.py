"""Calendars against a brute-force oracle (docs/schedules.md, "Calendars").

For each job of a table, crond's fires (through the real loader: YAML in, `make_timing`
out) are compared with an oracle that knows nothing of crond's calendar search: it takes
the job's plain schedule (every fire, no calendar: the timing the DST oracle checks),
decides for every local day of 1999-2038 from the calendars' own definitions (Python
date sets, `date.weekday()`, the `holidays` package called directly) whether the day is
good, and keeps, drops or moves each fire by walking days one at a time. The bar is zero
differences over 2000-2037, in UTC and two DST zones.

Under `make mutate` (mutmut sets MUTANT_UNDER_TEST) the comparison covers a few short
spans instead, which still hold every shape the calendars below have: 2000 (a century's
leap year), 2026-2028 (the shutdown and the freeze across a year's end, a leap year, each
zone's changes) and the days around the 2030, 2031 and 2033 dates
(test_the_spans_hold_every_shape).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import holidays
import pytest

from crond.config import loader
from crond.when.timing import CronTiming, Fire, IntervalTiming, Timing, parse_cron

START, END = datetime(2000, 1, 1, tzinfo=UTC), datetime(2038, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
SPANS = [(START, END)]  # (after, before): the fires compared are those strictly inside
if "MUTANT_UNDER_TEST" in os.environ:  # `make mutate`: short spans of every shape
    SPANS = [
        (datetime(*lo, tzinfo=UTC), datetime(*hi, tzinfo=UTC))
        for lo, hi in [
            ((2000, 1, 1), (2000, 4, 1)),
            ((2026, 1, 1), (2029, 1, 1)),
            ((2030, 2, 20), (2030, 4, 10)),
            ((2031, 6, 20), (2031, 8, 25)),
            ((2033, 2, 20), (2033, 4, 10)),
        ]
    ]
YEARS = range(1999, 2040)


def days_between(lo: date, hi: date) -> Iterator[date]:
    d = lo
    while d <= hi:
        yield d
        d += DAY


BY = set(holidays.country_holidays("DE", subdiv="BY", years=YEARS))
US = set(holidays.country_holidays("US", years=YEARS))


def weekday_in(*days: int) -> Callable[[date], bool]:
    return lambda d: d.weekday() in days


def year_end(d: date) -> bool:
    return d.month == 12 and d.day >= 24


SHUTDOWN = {date(2026, 12, 24), *days_between(date(2026, 12, 28), date(2026, 12, 31))}
SHUTDOWN |= set(days_between(date(2031, 7, 1), date(2031, 8, 15)))


def business_by(d: date) -> bool:
    return d.weekday() < 5 and d not in BY and not year_end(d)


@dataclass
class Case:
    """A job, and its calendars as the oracle reads them: predicates over local dates."""

    name: str
    yaml: str  # the job's own lines, under `jobs: {NAME: {...}}`
    zone: str
    schedule: str  # a cron expression, or "every:<hours>"
    days: Callable[[date], bool] | None = None
    skip: Callable[[date], bool] = lambda d: False
    nth: int | None = None
    roll: str | None = None
    windows: list[tuple[datetime, datetime]] = field(default_factory=list)


CALENDARS = """
calendars:
  bavaria: {holidays: DE, subdiv: BY}
  us: {holidays: US}
  year-end: {dates: [12-24..12-31]}
  weekend: {weekdays: "sat,sun"}
  business-by: {weekdays: mon-fri, except: [bavaria, year-end]}
  shutdown: {dates: [2026-12-24, 2026-12-28..2026-12-31, 2031-07-01..2031-08-15]}
  us-off: {include: [us, weekend]}
  sundays: {weekdays: sun}
  mid-month: {dates: ["01-10..01-20", "06-10..06-20", 2030-03-01..2030-03-31]}
  not-mid: {except: [mid-month, weekend]}
  freeze: {windows: [{from: 2026-12-18T18:00, until: 2027-01-04T06:00},
                     {from: "2033-03-01T00:00Z", until: "2033-04-01T00:00Z"}]}
"""

CASES = [
    Case("payroll", "cron: '0 9 * * *', days: business-by, nth_day: -1", "Europe/Berlin",
         "0 9 * * *", days=business_by, nth=-1),
    Case("ny-night", "cron: '30 2 * * *', skip: [us-off]", "America/New_York", "30 2 * * *",
         skip=lambda d: d in US or d.weekday() >= 5),
    Case("invoice", "cron: '0 8 1 * *', days: business-by, roll: next", "Europe/Berlin",
         "0 8 1 * *", days=business_by, roll="next"),
    Case("month-end", "cron: '0 18 L * *', days: business-by, roll: previous", "UTC",
         "0 18 L * *", days=business_by, roll="previous"),
    Case("six-hourly", "cron: '0 */6 * * *', days: mid-month, nth_day: 2", "UTC",
         "0 */6 * * *", days=lambda d: (d.month in (1, 6) and 10 <= d.day <= 20)
         or (d.year == 2030 and d.month == 3), nth=2),
    Case("gap-roll", "cron: '30 2 * * *', days: sundays, roll: next", "Europe/Berlin",
         "30 2 * * *", days=weekday_in(6), roll="next"),
    Case("back-roll", "cron: '*/30 1 * * *', days: sundays, roll: previous",
         "America/New_York", "*/30 1 * * *", days=weekday_in(6), roll="previous"),
    Case("shut", "cron: '0 12 * * mon,thu', skip: [shutdown, freeze]", "Europe/Berlin",
         "0 12 * * mon,thu", skip=lambda d: d in SHUTDOWN,
         windows=[(datetime(2026, 12, 18, 18, tzinfo=ZoneInfo("Europe/Berlin")),
                   datetime(2027, 1, 4, 6, tzinfo=ZoneInfo("Europe/Berlin"))),
                  (datetime(2033, 3, 1, tzinfo=UTC), datetime(2033, 4, 1, tzinfo=UTC))]),
    Case("interval", "every: 5h, days: not-mid, nth_day: 1", "UTC", "every:5",
         days=lambda d: d.weekday() < 5 and not ((d.month in (1, 6) and 10 <= d.day <= 20)
                                                or (d.year == 2030 and d.month == 3)), nth=1),
]  # fmt: skip


def oracle(case: Case, start: datetime = START, end: datetime = END) -> list[datetime]:
    zone = ZoneInfo(case.zone)
    plain: Timing
    if case.schedule.startswith("every:"):
        plain = IntervalTiming(timedelta(hours=int(case.schedule[6:])), zone=UTC)
        zone = ZoneInfo("UTC")
    else:
        plain = CronTiming(parse_cron(case.schedule), zone)
    in_days = case.days or (lambda d: True)

    def nth_ok(d: date) -> bool:
        if case.nth is None:
            return True
        month = [x for x in days_between(d.replace(day=1), d + 31 * DAY) if x.month == d.month]
        chosen = [x for x in month if in_days(x)]
        index = case.nth - 1 if case.nth > 0 else len(chosen) + case.nth
        return 0 <= index < len(chosen) and chosen[index] == d

    def good(d: date) -> bool:
        return in_days(d) and nth_ok(d) and not case.skip(d)

    def in_window(t: datetime) -> bool:
        return any(lo <= t < hi for lo, hi in case.windows)

    out: set[datetime] = set()
    fires: Iterator[Fire] = plain.fires(start - 40 * DAY)
    for fire in fires:
        if fire.at > end + 40 * DAY:
            break
        d = fire.local.date()
        at = fire.at
        if not good(d):
            if case.roll is None:
                continue
            step = DAY if case.roll == "next" else -DAY
            target = next((d + k * step for k in range(1, 32) if good(d + k * step)), None)
            if target is None:
                continue
            at = at_wall(target, fire.local.replace(tzinfo=None).time(), zone)
        if not in_window(at):
            out.add(at)
    return sorted(t for t in out if start < t < end)


def at_wall(day: date, wall_time: object, zone: ZoneInfo) -> datetime:
    """The wall time on `day`: the first pass; in a gap, the first instant after it."""
    wall = datetime.combine(day, wall_time)  # type: ignore[arg-type]
    first = wall.replace(tzinfo=zone).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    t = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)  # before the jump: walk minutes
    while t.astimezone(zone).replace(tzinfo=None) <= wall:
        t += timedelta(minutes=1)
    return t.replace(second=0)


def crond_fires(case: Case, start: datetime = START, end: datetime = END) -> list[datetime]:
    zone = "" if case.schedule.startswith("every:") else f"timezone: {case.zone}, "
    text = CALENDARS + textwrap.dedent(f"""
        jobs:
          {case.name}: {{{zone}{case.yaml}, command: x}}
    """)
    cfg = loader.loads(text, "s.yaml", environ={}, now=start)
    timing = cfg.jobs[case.name].make_timing()
    found = []
    for fire in timing.fires(start):
        if fire.at >= end:
            break
        found.append(fire.at)
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_calendar_fires_match_the_oracle(case: Case) -> None:
    fired = 0
    for start, end in SPANS:
        expected = oracle(case, start, end)
        got = crond_fires(case, start, end)
        missing = sorted(set(expected) - set(got))[:5]
        extra = sorted(set(got) - set(expected))[:5]
        assert (missing, extra) == ([], []), (start, len(expected), len(got))
        assert got == expected  # in order, once each
        fired += len(expected)
    assert fired, "a case must fire"


def test_the_spans_hold_every_shape() -> None:
    """The spans compared hold a century's leap day and another, a day of each dated
    calendar entry above, the freeze's turn of the year, and a change of each zone."""

    def inside(d: date) -> bool:
        return any(lo.date() < d < hi.date() for lo, hi in SPANS)

    assert inside(date(2000, 2, 29))
    assert any(inside(date(y, 2, 29)) for y in range(2004, 2038, 4))
    # shutdown (2026, 2031), freeze (both windows, the first across New Year), mid-month
    dated = [(2026, 12, 28), (2031, 7, 15), (2026, 12, 31), (2027, 1, 2), (2033, 3, 15),
             (2030, 3, 15), (2026, 6, 15)]  # fmt: skip
    assert all(inside(date(*d)) for d in dated)
    for zone in ("Europe/Berlin", "America/New_York"):
        tz = ZoneInfo(zone)
        changes = {
            d
            for lo, hi in SPANS
            for d in days_between(lo.date(), hi.date() - DAY)
            if datetime.combine(d, datetime.min.time(), tz).utcoffset()
            != datetime.combine(d + DAY, datetime.min.time(), tz).utcoffset()
        }
        assert len(changes) >= 2, zone  # forward and back


def test_the_oracle_can_tell() -> None:
    """The oracle sees a wrong rule: the payroll case's fires without `nth_day` differ."""
    case = CASES[0]
    wrong = Case(case.name, "cron: '0 9 * * *', days: business-by", case.zone, case.schedule,
                 days=business_by)  # fmt: skip
    start, end = max(SPANS, key=lambda span: span[1] - span[0])
    assert oracle(wrong, start, end) != crond_fires(case, start, end)
