"""Calendars and CalendarTiming in-process (docs/schedules.md, "Calendars"): what
`crond next --all` says a calendar removed and why, and the edges the oracles'
tables do not reach (tests/when/test_calendar_oracle.py compares whole years of fires).
Every expected date here was worked out by hand from a wall calendar."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from crond.when.calendars import Calendar, Dates, Holidays, Listed, Weekdays, Window
from crond.when.dayfilter import CalendarTiming, DayRules
from crond.when.timing import CronTiming, parse_cron

BERLIN = ZoneInfo("Europe/Berlin")
WEEKDAYS = Calendar("business", [Weekdays(frozenset(range(5)))])
BY = Calendar("de-holidays", [Holidays("DE", "BY")])


def timing(cron: str, rules: DayRules, zone: ZoneInfo = BERLIN) -> CalendarTiming:
    return CalendarTiming(CronTiming(parse_cron(cron), zone), rules, zone)


def at(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, zone: ZoneInfo = BERLIN
) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=zone).astimezone(UTC)


def removed(t: CalendarTiming, after: datetime, until: datetime, limit: int = 100) -> list[str]:
    return [f"{r.fire.local:%m-%d %H:%M} {r.why}" for r in t.removed(after, until, limit)]


# --- what `crond next --all` lists ---------------------------------------------------------


def test_removed_names_the_skip_calendar_and_the_holiday() -> None:
    """A window without an offset is read in the job's zone: 08:30-09:30 in Berlin."""
    freeze = Calendar(
        "freeze", windows=[Window(datetime(2026, 12, 30, 8, 30), datetime(2026, 12, 30, 9, 30))]
    )
    t = timing("0 9 * * *", DayRules(skip=[BY, freeze]))
    assert removed(t, at(2026, 12, 23), at(2026, 12, 31, 9)) == [
        "12-25 09:00 skipped: de-holidays (Christmas Day)",
        "12-26 09:00 skipped: de-holidays (Second Day of Christmas)",
        "12-30 09:00 skipped: freeze",
    ]


def test_removed_stops_at_until_and_at_the_limit() -> None:
    t = timing("0 9 * * *", DayRules(days=WEEKDAYS))
    # Saturday 2026-01-03 and Sunday the 4th; the fire at `until` itself counts.
    assert removed(t, at(2026, 1, 1), at(2026, 1, 4, 9)) == [
        "01-03 09:00 not in business",
        "01-04 09:00 not in business",
    ]
    assert removed(t, at(2026, 1, 1), at(2026, 1, 4, 8, 59)) == ["01-03 09:00 not in business"]
    assert removed(t, at(2026, 1, 1), at(2026, 1, 31), limit=3) == [
        "01-03 09:00 not in business",
        "01-04 09:00 not in business",
        "01-10 09:00 not in business",
    ]


def test_removed_says_which_nth_day() -> None:
    last = timing("0 9 * * *", DayRules(days=WEEKDAYS, nth_day=-1))
    assert removed(last, at(2026, 1, 28), at(2026, 2, 1, 9)) == [
        "01-28 09:00 not the last day of business in its month",
        "01-29 09:00 not the last day of business in its month",
        # the 30th, a Friday, is the last business day of January
        "01-31 09:00 not in business",
        "02-01 09:00 not in business",
    ]
    second = timing("0 9 * * *", DayRules(nth_day=2))
    assert removed(second, at(2026, 2, 28), at(2026, 3, 3, 9)) == [
        "02-28 09:00 not the nth_day 2 day in its month",
        "03-01 09:00 not the nth_day 2 day in its month",
        "03-03 09:00 not the nth_day 2 day in its month",
    ]


def test_a_rolled_fire_is_not_removed_but_a_window_still_is() -> None:
    freeze = Calendar(
        "freeze", windows=[Window(datetime(2026, 1, 7, 8, 30), datetime(2026, 1, 7, 9, 30))]
    )
    t = timing("0 9 * * *", DayRules(days=WEEKDAYS, skip=[freeze], roll="next"))
    assert removed(t, at(2026, 1, 1), at(2026, 1, 8)) == ["01-07 09:00 skipped: freeze"]
    fires = t.fires(at(2026, 1, 5))
    # the 7th is frozen; Saturday's and Sunday's fires roll onto Monday the 12th, once
    assert [f"{next(fires).local:%d %H:%M}" for _ in range(5)] == [
        "05 09:00",
        "06 09:00",
        "08 09:00",
        "09 09:00",
        "12 09:00",
    ]
    assert next(fires).at == at(2026, 1, 13, 9)


def test_of_overlapping_windows_the_one_that_ends_last_holds_a_fire() -> None:
    """The fire is skipped, told by the window that lasts longest; the next fire is the
    first after that window."""
    short = Window(datetime(2026, 3, 2, 8), datetime(2026, 3, 2, 10), "short")
    long = Window(datetime(2026, 3, 2, 7), datetime(2026, 3, 4, 12), "long")
    later = Window(datetime(2026, 3, 2, 8, 30), datetime(2026, 3, 3, 0), "later")
    same_end = Window(datetime(2026, 3, 2, 8, 45), datetime(2026, 3, 4, 12), "as-long")
    skip = Calendar("maintenance", windows=[short, long, later, same_end])
    t = timing("0 9 * * *", DayRules(skip=[skip]))
    assert removed(t, at(2026, 3, 1), at(2026, 3, 3, 9)) == [
        "03-02 09:00 skipped: maintenance (long)",  # the first of the two that end last
        "03-03 09:00 skipped: maintenance (long)",
    ]
    fire = t.next_after(at(2026, 3, 1, 10))
    assert fire is not None
    assert fire.at == at(2026, 3, 5, 9)


def test_why_follows_includes_to_the_source_that_holds_the_day() -> None:
    weekend = Calendar("weekend", [Weekdays(frozenset({5, 6}))])
    offsite = Calendar(
        "offsite",
        [
            Dates(((date(2026, 12, 29), date(2026, 12, 29)),)),  # first: named by the second
            Listed({date(2026, 12, 28): "Offsite"}),
        ],
    )
    freeze = Calendar(
        "freeze", windows=[Window(datetime(2026, 12, 31, 8), datetime(2026, 12, 31, 10))]
    )
    off = Calendar("off", include=[BY, weekend, offsite, freeze])
    t = timing("0 9 * * *", DayRules(skip=[off]))
    assert removed(t, at(2026, 12, 24), at(2026, 12, 31, 9)) == [
        "12-25 09:00 skipped: de-holidays (Christmas Day)",
        "12-26 09:00 skipped: de-holidays (Second Day of Christmas)",
        "12-27 09:00 skipped: weekend",
        "12-28 09:00 skipped: offsite (Offsite)",
        "12-29 09:00 skipped: offsite",
        "12-31 09:00 skipped: freeze",
    ]


def test_a_listed_calendar_holds_only_its_days() -> None:
    """An iCalendar file's all-day events: New Year's Day, not listed, keeps its fire."""
    offsite = Calendar("offsite", [Listed({date(2026, 12, 28): "Offsite"})])
    t = timing("0 9 * * *", DayRules(skip=[offsite]))
    fires = t.fires(at(2026, 12, 27, 10))
    assert [f"{next(fires).local:%m-%d}" for _ in range(3)] == ["12-29", "12-30", "12-31"]
    assert next(fires).local.date() == date(2027, 1, 1)


def test_roll_next_takes_only_the_days_since_the_good_day_before() -> None:
    """`0 9 1 * *` on business days, rolled forward: 1 January 2027 is a Friday, a
    business day, so its fire stays, and Monday the 4th gets none of it."""
    t = timing("0 9 1 * *", DayRules(days=WEEKDAYS, roll="next"))
    fires = t.fires(at(2026, 12, 15))
    assert [f"{next(fires).local:%Y-%m-%d %H:%M}" for _ in range(3)] == [
        "2027-01-01 09:00",
        "2027-02-01 09:00",
        "2027-03-01 09:00",
    ]
    # 1 and 2 January 2026 are business days: the 2nd gets nothing either
    fires = t.fires(at(2025, 12, 15))
    assert [f"{next(fires).local:%Y-%m-%d %H:%M}" for _ in range(3)] == [
        "2026-01-01 09:00",
        "2026-02-02 09:00",  # 1 February and 1 March 2026 are Sundays
        "2026-03-02 09:00",
    ]
    # 1 August 2027 is a Sunday: Monday the 2nd
    assert t.next_after(at(2027, 7, 15)).local.date() == date(2027, 8, 2)  # type: ignore[union-attr]


def test_the_good_day_before_looks_back_across_the_new_year() -> None:
    """1 and 2 January 2028 are a weekend, and the business days end on 23 December."""
    year_end = Calendar("year-end", [Dates(yearly=(((12, 24), (12, 31)),))])
    business = DayRules(
        days=Calendar("business", [Weekdays(frozenset(range(5)))], exclude=[year_end])
    )
    assert business.find(date(2028, 1, 2), forward=False) == date(2027, 12, 23)
    assert business.find(date(2027, 1, 3), forward=False) == date(2027, 1, 1)  # the year's first
    assert business.find(date(2027, 12, 24)) == date(2028, 1, 3)


def test_a_window_with_an_offset_is_that_instant_in_any_zone() -> None:
    """08:30Z-09:30Z is 09:30-10:30 in Berlin: of a Berlin job's 09:00 and 10:00 it holds
    the 10:00 fire only (a window without an offset is read in the job's zone)."""
    utc = Window(datetime(2026, 3, 2, 8, 30, tzinfo=UTC), datetime(2026, 3, 2, 9, 30, tzinfo=UTC))
    t = timing("0 9,10 * * *", DayRules(skip=[Calendar("migration", windows=[utc])]))
    assert removed(t, at(2026, 3, 2), at(2026, 3, 3)) == ["03-02 10:00 skipped: migration"]


# --- days ----------------------------------------------------------------------------------


def test_yearly_dates_around_29_february() -> None:
    """A yearly range from 29 February starts on 1 March in a common year; one to 29
    February ends on the 28th; 29 February alone is a leap year's day only."""
    spring = Calendar("spring", [Dates(yearly=(((2, 29), (3, 2)),))])
    winter = Calendar("winter", [Dates(yearly=(((2, 27), (2, 29)),))])
    leap = Calendar("leap", [Dates(yearly=(((2, 29), (2, 29)),))])
    assert [d.day for d in _days(spring, 2027, 2, 26, 3, 3)] == [1, 2]
    assert [d.day for d in _days(spring, 2028, 2, 26, 3, 3)] == [29, 1, 2]
    assert [d.day for d in _days(winter, 2027, 2, 26, 3, 3)] == [27, 28]
    assert [d.day for d in _days(winter, 2028, 2, 26, 3, 3)] == [27, 28, 29]
    assert _days(leap, 2027, 1, 1, 12, 31) == []
    assert _days(leap, 2028, 1, 1, 12, 31) == [date(2028, 2, 29)]


def _days(calendar: Calendar, year: int, m1: int, d1: int, m2: int, d2: int) -> list[date]:
    lo, hi = date(year, m1, d1), date(year, m2, d2)
    return [
        lo + timedelta(days=i)
        for i in range((hi - lo).days + 1)
        if lo + timedelta(days=i) in calendar
    ]


def test_dates_of_several_spans_and_across_a_new_year() -> None:
    spans = ((date(2026, 6, 1), date(2026, 6, 2)), (date(2026, 12, 31), date(2027, 1, 1)))
    cal = Calendar("off", [Dates(spans=spans)])
    assert _days(cal, 2026, 5, 31, 12, 31) == [
        date(2026, 6, 1),
        date(2026, 6, 2),
        date(2026, 12, 31),
    ]
    assert _days(cal, 2027, 1, 1, 1, 3) == [date(2027, 1, 1)]


def test_a_country_without_a_new_year_holiday() -> None:
    israel = Calendar("il", [Holidays("IL")])
    assert date(2026, 1, 1) not in israel
    assert date(2026, 9, 21) in israel  # Yom Kippur
    assert israel.why(date(2026, 9, 21)) == "il (Yom Kippur)"


def test_windows_of_a_calendar_and_of_those_it_includes() -> None:
    own = Window(datetime(2026, 3, 2, 8), datetime(2026, 3, 2, 10))
    theirs = Window(datetime(2026, 3, 3, 8), datetime(2026, 3, 3, 10))
    inner = Calendar("inner", windows=[theirs])
    outer = Calendar("outer", include=[inner], windows=[own])
    assert outer.all_windows() == [(own, "outer"), (theirs, "inner")]
    t = timing("0 9 * * *", DayRules(skip=[outer]))
    assert removed(t, at(2026, 3, 1), at(2026, 3, 4)) == [
        "03-02 09:00 skipped: outer",
        "03-03 09:00 skipped: inner",
    ]


def test_nth_day_in_months_with_fewer_days() -> None:
    """March has three days of the calendar, April two: the third is March's only, the
    second from the end one of each, the third from the end March's first."""
    spans = ((date(2026, 3, 2), date(2026, 3, 4)), (date(2026, 4, 6), date(2026, 4, 7)))
    days = Calendar("few", [Dates(spans=spans)])

    def good(nth: int) -> list[date]:
        rules = DayRules(days=days, nth_day=nth)
        found, day = [], date(2026, 3, 1)
        while (day := rules.find(day)) is not None and day.year == 2026:  # type: ignore[assignment]
            found.append(day)
            day += timedelta(days=1)
        return found

    assert good(3) == [date(2026, 3, 4)]
    assert good(2) == [date(2026, 3, 3), date(2026, 4, 7)]
    assert good(-2) == [date(2026, 3, 3), date(2026, 4, 6)]
    assert good(-3) == [date(2026, 3, 2)]
    assert good(4) == good(-4) == []


def test_all_good_over_single_days_and_years() -> None:
    off = Calendar("off", [Dates(spans=((date(2026, 6, 10),) * 2, (date(2027, 1, 1),) * 2))])
    rules = DayRules(skip=[off])
    assert rules.all_good(date(2026, 12, 20), date(2026, 12, 31))
    assert not rules.all_good(date(2026, 12, 20), date(2027, 1, 1))
    assert not rules.all_good(date(2027, 1, 1), date(2027, 1, 1))
    assert rules.all_good(date(2027, 1, 2), date(2028, 1, 5))
    assert not rules.all_good(date(2026, 1, 1), date(2027, 12, 31))
    assert rules.all_good(date(2026, 6, 1), date(2026, 6, 9))
    assert rules.all_good(date(2026, 6, 11), date(2026, 6, 30))
    assert not rules.all_good(date(2026, 6, 10), date(2026, 6, 10))


def test_a_fire_rolled_from_the_day_before_in_a_zone_behind_utc() -> None:
    """Sunday 1 February 2026 is the one day left out; its 22:00 fire rolls to Monday
    22:00, still ahead at 20:00 New York time (01:00 UTC on the 3rd)."""
    ny = ZoneInfo("America/New_York")
    days = Calendar("not-1-feb", exclude=[Calendar("x", [Dates(spans=((date(2026, 2, 1),) * 2,))])])
    t = timing("0 22 1 * *", DayRules(days=days, roll="next"), ny)
    fire = t.next_after(at(2026, 2, 2, 20, zone=ny))
    assert fire is not None
    assert fire.at == at(2026, 2, 2, 22, zone=ny)


def test_the_century_years() -> None:
    """2000 has a 31 December (a leap year: its 366th day), 2100 has 365 days."""
    new_year = Calendar("new-year", [Dates(yearly=(((1, 1), (1, 1)),))])
    eve = Calendar("eve", [Dates(yearly=(((12, 31), (12, 31)),))])
    not_new_year = DayRules(days=Calendar("rest", exclude=[new_year]))
    assert not_new_year.find(date(2000, 12, 31)) == date(2000, 12, 31)
    assert not_new_year.find(date(2001, 1, 1), forward=False) == date(2000, 12, 31)
    neither = DayRules(days=Calendar("rest", exclude=[new_year, eve]))
    assert neither.find(date(2100, 12, 30)) == date(2100, 12, 30)
    assert neither.find(date(2100, 12, 31)) == date(2101, 1, 2)
    assert neither.find(date(2028, 12, 31)) == date(2029, 1, 2)
    assert neither.find(date(2101, 1, 1), forward=False) == date(2100, 12, 30)


def test_a_roll_looks_ten_years_ahead_and_no_further() -> None:
    """From 2 January 2026 a rolled job's next good day is looked for from the day before
    up to 3,660 days (366 x 10) on: on that day it fires, one day later it does not."""
    for ahead, fires in ((3660, True), (3661, False)):
        day = date(2026, 1, 1) + timedelta(days=ahead)
        only = Calendar("one-day", [Dates(spans=((day, day),))])
        t = timing("0 9 * * *", DayRules(days=only, roll="next"))
        fire = t.next_after(at(2026, 1, 2, 12))
        assert (fire is not None) == fires, ahead
        if fire is not None:
            assert fire.local.date() == day


def test_late_fires_roll_and_keep_their_notes() -> None:
    """22:00 every day, on business days, rolled forward: Saturday's and Sunday's land
    on Monday with Monday's own (one fire, told as the first rolled there); a fire on
    its own day has no note."""
    t = timing("0 22 * * *", DayRules(days=WEEKDAYS, roll="next"))
    fires = t.fires(at(2026, 1, 2, 23))
    shown = [(f"{f.local:%a %d %H:%M}", f.note) for f in (next(fires) for _ in range(2))]
    assert shown == [("Mon 05 22:00", "rolled from 2026-01-03"), ("Tue 06 22:00", None)]
    once = timing("0 9 1 * *", DayRules(days=WEEKDAYS, roll="next"))
    fires = once.fires(at(2025, 12, 15))
    assert [(f"{f.local:%m-%d}", f.note) for f in (next(fires) for _ in range(2))] == [
        ("01-01", None),
        ("02-02", "rolled from 2026-02-01"),
    ]


@pytest.fixture
def host_in_kolkata(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The host's own zone (TZ) plays no part: fires are UTC instants and job-zone times."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("host_in_kolkata")
@pytest.mark.parametrize("minute", [1, 10, 17, 45, 59])
def test_a_fire_rolled_into_the_spring_gap_runs_at_the_jump(minute: int) -> None:
    """Saturday's 02:mm fire rolls onto Sunday 29 March 2026, when Berlin's clocks go
    from 02:00 to 03:00: it runs at the jump, 01:00 UTC (R4); a week before, at 02:mm."""
    sundays = Calendar("sundays", [Weekdays(frozenset({6}))])
    t = timing(f"{minute} 2 * * sat", DayRules(days=sundays, roll="next"))
    before = t.next_after(at(2026, 3, 20))
    assert before is not None
    assert (before.at, before.at.utcoffset(), before.note) == (
        datetime(2026, 3, 22, 1, minute, tzinfo=UTC),
        timedelta(0),
        "rolled from 2026-03-21",
    )
    assert (before.local.tzinfo, f"{before.local:%d %H:%M}") == (BERLIN, f"22 02:{minute:02}")
    fire = t.next_after(at(2026, 3, 27))
    assert fire is not None
    assert (fire.at, fire.at.utcoffset()) == (datetime(2026, 3, 29, 1, 0, tzinfo=UTC), timedelta(0))
    assert (fire.local.tzinfo, f"{fire.local:%d %H:%M}") == (BERLIN, "29 03:00")
    assert fire.note == (
        f"rolled from 2026-03-28; 02:{minute:02} skipped by DST; runs at the jump (R4)"
    )


def test_a_rolled_job_fires_again_right_at_the_end_of_a_window() -> None:
    """A window holds [from, until): 09:00 is inside 08:45-09:30, 09:30 is not."""
    freeze = Calendar(
        "freeze", windows=[Window(datetime(2026, 1, 7, 8, 45), datetime(2026, 1, 7, 9, 30))]
    )
    for rules in (DayRules(days=WEEKDAYS, skip=[freeze], roll="next"), DayRules(skip=[freeze])):
        fire = timing("0,30 9 * * *", rules).next_after(at(2026, 1, 7, 8, 50))
        assert fire is not None
        assert fire.at == at(2026, 1, 7, 9, 30)


def test_skip_alone_across_the_new_year() -> None:
    """Without `days`, every day is good but those skipped: from 31 December, 2 January."""
    off = Calendar("off", [Dates(yearly=(((12, 31), (12, 31)), ((1, 1), (1, 1))))])
    rules = DayRules(skip=[off])
    assert rules.find(date(2026, 12, 31)) == date(2027, 1, 2)
    assert rules.find(date(2028, 12, 31)) == date(2029, 1, 2)
    assert rules.find(date(2027, 1, 1), forward=False) == date(2026, 12, 30)


def test_days_up_to_the_first_and_last_dates_python_has() -> None:
    every = DayRules(days=Calendar("every", exclude=[]))
    assert every.find(date(9999, 12, 31)) == date(9999, 12, 31)
    assert every.find(date(1, 1, 1), forward=False) == date(1, 1, 1)
    assert every.find(date(1, 1, 2), forward=False) == date(1, 1, 2)
    nothing = DayRules(skip=[Calendar("every", exclude=[])])  # no good day: none, no error
    assert nothing.find(date(9999, 12, 31)) is None
    assert nothing.find(date(1, 1, 1), forward=False) is None


def test_a_plain_job_looks_ten_years_ahead_and_no_further() -> None:
    """Without roll, a fire is looked for up to 3,660 days (366 x 10) after the day of t."""
    for ahead, fires in ((3660, True), (3661, False)):
        day = date(2026, 1, 2) + timedelta(days=ahead)
        only = Calendar("one-day", [Dates(spans=((day, day),))])
        # 00:30 in Berlin: still 1 January in UTC; the days count in the job's zone
        fire = timing("0 9 * * *", DayRules(days=only)).next_after(at(2026, 1, 2, 0, 30))
        assert (fire is not None) == fires, ahead


class Counting:
    """A plain timing that counts the fires asked of it."""

    def __init__(self, inner: CronTiming) -> None:
        self.inner, self.asked = inner, 0

    def next_after(self, t: datetime) -> object:
        self.asked += 1
        return self.inner.next_after(t)


def test_a_sparse_calendar_is_not_walked_day_by_day() -> None:
    """A daily job whose calendar's next day is five years on: a few plain fires are
    asked for, not 1,800."""
    day = date(2031, 6, 2)
    plain = Counting(CronTiming(parse_cron("0 9 * * *"), BERLIN))
    only = Calendar("one-day", [Dates(spans=((day, day),))])
    t = CalendarTiming(plain, DayRules(days=only), BERLIN)  # type: ignore[arg-type]
    fire = t.next_after(at(2026, 6, 1))
    assert fire is not None
    assert fire.local.date() == day
    assert plain.asked <= 3


def test_a_fire_early_in_the_day_rolls_in_a_zone_far_ahead_of_utc() -> None:
    """Tokyo is 9 hours ahead: Saturday 02:00 there is Friday 17:00 UTC. It rolls to
    Monday 02:00, still ahead at Monday 00:00."""
    tokyo = ZoneInfo("Asia/Tokyo")
    t = timing("0 2 * * sat", DayRules(days=WEEKDAYS, roll="next"), tokyo)
    fire = t.next_after(at(2026, 3, 2, zone=tokyo))
    assert fire is not None
    assert (fire.at, fire.note) == (at(2026, 3, 2, 2, zone=tokyo), "rolled from 2026-02-28")
