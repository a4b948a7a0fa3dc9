"""crond.when.notes: the DST rules in words, as `crond validate` warns of them (a fixed-time
job's wall time in a gap or a repeat of its zone) and as `crond next` notes them."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from crond.when import notes
from crond.when.cronparse import parse_cron
from crond.when.notes import (
    describe_walls,
    dst_warnings,
    note_made_up,
    note_not_made_up,
    note_pass,
)
from crond.when.timeline import EPOCH
from tests.when.test_timing_oracle import _tzif


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def test_dst_warnings_gap_and_repeat() -> None:
    ny = ZoneInfo("America/New_York")
    start = utc("2027-01-01T00:00Z")
    assert dst_warnings(parse_cron("30 2 * * *"), ny, start) == [
        "02:30 does not exist on 2027-03-14 in America/New_York; "
        "the job runs at 03:00 (EDT) that day"
    ]
    assert dst_warnings(parse_cron("30 1 * * *"), ny, start) == [
        "01:30 happens twice on 2027-11-07 in America/New_York; "
        "the job runs on the first pass only (05:30 UTC)"
    ]
    assert dst_warnings(parse_cron("0,30 1 * * *"), ny, start) == [
        "01:00 and 01:30 happen twice on 2027-11-07 in America/New_York; "
        "the job runs on the first pass only (05:00 and 05:30 UTC)"
    ]
    assert dst_warnings(parse_cron("0,30 2 * * sun"), ny, start) == [
        "02:00 and 02:30 do not exist on 2027-03-14 in America/New_York; "
        "the job runs once at 03:00 (EDT) that day"
    ]


def test_dst_warnings_only_for_fixed_time_jobs_on_matching_dates() -> None:
    ny = ZoneInfo("America/New_York")
    start = utc("2027-01-01T00:00Z")
    assert dst_warnings(parse_cron("*/5 * * * *"), ny, start) == []
    assert dst_warnings(parse_cron("30 2 * * mon-fri"), ny, start) == []  # both nights are Sundays
    assert dst_warnings(parse_cron("30 2 * * *"), UTC, start) == []
    assert dst_warnings(parse_cron("30 2 * * *"), ny, start, days=60) == []


def test_dst_warnings_midnight_and_half_hour_zones() -> None:
    assert dst_warnings(
        parse_cron("30 0,23 * * *"), ZoneInfo("America/Sao_Paulo"), utc("2018-06-01T00:00Z"), 300
    ) == [
        "00:30 does not exist on 2018-11-04 in America/Sao_Paulo; "
        "the job runs at 01:00 (-02) that day",
        "23:30 happens twice on 2019-02-16 in America/Sao_Paulo; "
        "the job runs on the first pass only (01:30 UTC)",
    ]
    assert dst_warnings(
        parse_cron("45 1 * * *"), ZoneInfo("Australia/Lord_Howe"), utc("2026-01-01T00:00Z")
    ) == [
        "01:45 happens twice on 2026-04-05 in Australia/Lord_Howe; "
        "the job runs on the first pass only (14:45 UTC)"
    ]


def test_dst_warnings_calendar_change() -> None:
    assert dst_warnings(
        parse_cron("0 9 * * *"), ZoneInfo("Pacific/Apia"), utc("2011-12-01T00:00Z"), 60
    ) == [
        "09:00 does not exist on 2011-12-30 in Pacific/Apia (a calendar change); "
        "the job does not run then (R6)"
    ]


def test_dst_warnings_many_times_and_calendar_changes() -> None:
    ny = ZoneInfo("America/New_York")
    assert dst_warnings(parse_cron("0-50/10 1 * * *"), ny, utc("2027-01-01T00:00Z")) == [
        "01:00 to 01:50 (6 times) happen twice on 2027-11-07 in America/New_York; "
        "the job runs on the first pass only (05:00 to 05:50 UTC)"
    ]
    casey = ZoneInfo("Antarctica/Casey")  # +11 -> +08 at 02:00: 23:00 to 01:59 twice
    assert dst_warnings(parse_cron("30 0,23 * * *"), casey, utc("2010-01-01T00:00Z"), 100) == [
        "23:30 happens twice on 2010-03-04 in Antarctica/Casey (a calendar change); "
        "the job runs on both passes (R6)",
        "00:30 happens twice on 2010-03-05 in Antarctica/Casey (a calendar change); "
        "the job runs on both passes (R6)",
    ]
    kwajalein = ZoneInfo("Pacific/Kwajalein")  # 1993-08-21 never happened there
    assert dst_warnings(parse_cron("0 12 * * *"), kwajalein, utc("1993-08-01T00:00Z"), 60) == [
        "12:00 does not exist on 1993-08-21 in Pacific/Kwajalein (a calendar change); "
        "the job does not run then (R6)"
    ]


# A zone of its own: 2 h forward at 23:00 on 2022-01-08 (to 01:00 the next day), back at
# 02:00 on 2022-02-17 (to 00:00).
DAY0 = 19000 * 86400  # 2022-01-08T00:00Z
NIGHT = _tzif(0, [(DAY0 + 23 * 3600, 7200), (DAY0 + 40 * 86400, 0)])

CROSSING_MIDNIGHT = [
    ("30 23 * * *", ["23:30 does not exist on 2022-01-08 in Test/Zone; "
                     "the job runs at 01:00 (T1) on 2022-01-09"]),
    ("0,30 23 * * *", ["23:00 and 23:30 do not exist on 2022-01-08 in Test/Zone; "
                       "the job runs once at 01:00 (T1) on 2022-01-09"]),
    ("30 0 * * *", ["00:30 does not exist on 2022-01-09 in Test/Zone; "
                    "the job runs at 01:00 (T1) that day",
                    "00:30 happens twice on 2022-02-17 in Test/Zone; "
                    "the job runs on the first pass only (22:30 UTC)"]),
    ("0 1 * * *", ["01:00 happens twice on 2022-02-17 in Test/Zone; "
                   "the job runs on the first pass only (23:00 UTC)"]),
    ("59 22 * * *", []),
    ("0 2 * * *", []),
]  # fmt: skip


@pytest.mark.parametrize(("text", "warnings"), CROSSING_MIDNIGHT)
def test_dst_warnings_across_midnight(text: str, warnings: list[str]) -> None:
    start = EPOCH + timedelta(seconds=DAY0)
    assert dst_warnings(parse_cron(text), NIGHT, start, 60) == warnings


# New York springs forward on 2027-03-14 and 2028-03-12: (start, days, the dates warned).
WINDOWS = [
    ("2027-03-14T00:00-05:00", 1, ["2027-03-14"]),  # the first day of the window
    ("2027-03-14T23:59-04:00", 1, ["2027-03-14"]),  # late on it
    ("2027-03-15T00:00-04:00", 363, []),  # the day after; 2028-03-12 is the 364th
    ("2027-03-15T00:00-04:00", 364, ["2028-03-12"]),
    ("2027-03-01T00:00-05:00", 14, ["2027-03-14"]),  # the last day of the window
    ("2027-03-01T00:00-05:00", 13, []),
    ("2026-12-31T00:00-05:00", 800, ["2027-03-14", "2028-03-12"]),
]


@pytest.mark.parametrize(("start", "days", "dates"), WINDOWS)
def test_dst_warnings_cover_days_from_the_start_date(
    start: str, days: int, dates: list[str]
) -> None:
    ny = ZoneInfo("America/New_York")
    assert dst_warnings(parse_cron("30 2 * * *"), ny, utc(start), days) == [
        f"02:30 does not exist on {date} in America/New_York; the job runs at 03:00 (EDT) that day"
        for date in dates
    ]


def test_a_zone_without_a_name_is_shown_as_it_prints() -> None:
    data = io.BytesIO()
    with (Path("/usr/share/zoneinfo") / "America" / "New_York").open("rb") as fh:
        data.write(fh.read())
    data.seek(0)
    zone = ZoneInfo.from_file(data)
    assert dst_warnings(parse_cron("30 2 * * *"), zone, utc("2027-01-01T00:00Z")) == [
        f"02:30 does not exist on 2027-03-14 in {zone}; the job runs at 03:00 (EDT) that day"
    ]


# --- the notes of fires -------------------------------------------------------------------

D = 15000  # a day number (2011-01-26), and wall times on it
H = 3600

WALLS = [
    ([], ""),
    ([D * 86400 + 2 * H], "02:00"),
    ([D * 86400 + 2 * H, D * 86400 + 2 * H + 1800], "02:00 and 02:30"),
    ([D * 86400 + H, D * 86400 + 2 * H, D * 86400 + 3 * H], "01:00, 02:00 and 03:00"),
    ([D * 86400 + 2 * H + 60 * m for m in range(4)], "02:00 to 02:03 (4 times)"),
    ([(D - 1) * 86400 + 23 * H, D * 86400], "2011-01-25 23:00 and 00:00"),
    ([(D - 1) * 86400 + 23 * H + 60 * m for m in range(60)] + [D * 86400],
     "2011-01-25 23:00 to 00:00 (61 times)"),
    ([(D + 1) * 86400 + 9 * H], "2011-01-27 09:00"),
]  # fmt: skip


@pytest.mark.parametrize(("walls", "text"), WALLS, ids=[w[1] or "none" for w in WALLS])
def test_describe_walls(walls: list[int], text: str) -> None:
    assert describe_walls(walls, D) == text


NOTES = [
    (note_made_up("02:30", many=False, merged=None), "02:30 skipped by DST; runs at the jump (R4)"),
    (note_made_up("02:00 and 02:30", many=True, merged=None),
     "02:00 and 02:30 skipped by DST; runs once at the jump (R4, R7)"),
    (note_made_up("02:00", many=False, merged="03:00"),
     "02:00 skipped by DST; runs once at the jump, with its 03:00 run (R4, R7)"),
    (note_made_up("02:00 and 02:30", many=True, merged="03:00"),
     "02:00 and 02:30 skipped by DST; runs once at the jump, with its 03:00 run (R4, R7)"),
    (note_not_made_up("02:00", big=False), "02:00 skipped by DST; not made up (wildcard job, R4)"),
    (note_not_made_up("2011-12-30 09:00", big=True),
     "2011-12-30 09:00 skipped by a calendar change; not made up (R6)"),
    (note_pass("01:30", second=False, fixed=True, big=False),
     "first pass of 01:30; the second pass is not run (R5)"),
    (note_pass("01:00", second=False, fixed=False, big=False),
     "first of two passes of 01:00 (wildcard job, R5)"),
    (note_pass("01:00", second=True, fixed=False, big=False),
     "second pass of 01:00 (wildcard job, R5)"),
    (note_pass("00:30", second=False, fixed=True, big=True),
     "first of two passes of 00:30 (calendar change, R6)"),
    (note_pass("00:30", second=True, fixed=True, big=True),
     "second pass of 00:30 (calendar change, R6)"),
    (note_pass("00:30", second=True, fixed=False, big=True),
     "second pass of 00:30 (calendar change, R6)"),
]  # fmt: skip


@pytest.mark.parametrize(("note", "text"), NOTES, ids=[n[1] for n in NOTES])
def test_notes_as_docs_schedules_md_lists_them(note: str, text: str) -> None:
    assert note == text


def test_dst_warnings_look_a_year_ahead_by_default() -> None:
    """366 days from the start's date: from 2027-03-12, New York's 2027-03-14 is in, and
    2028-03-12, the 367th day, is not."""
    ny = ZoneInfo("America/New_York")
    assert dst_warnings(parse_cron("30 2 * * *"), ny, utc("2027-03-12T00:00-05:00")) == [
        "02:30 does not exist on 2027-03-14 in America/New_York; "
        "the job runs at 03:00 (EDT) that day"
    ]


def test_dst_warnings_name_up_to_three_first_passes() -> None:
    ny, start = ZoneInfo("America/New_York"), utc("2027-01-01T00:00Z")
    assert dst_warnings(parse_cron("0,20,40 1 * * *"), ny, start) == [
        "01:00, 01:20 and 01:40 happen twice on 2027-11-07 in America/New_York; "
        "the job runs on the first pass only (05:00, 05:20 and 05:40 UTC)"
    ]
    assert dst_warnings(parse_cron("0,15,30,45 1 * * *"), ny, start) == [
        "01:00 to 01:45 (4 times) happen twice on 2027-11-07 in America/New_York; "
        "the job runs on the first pass only (05:00 to 05:45 UTC)"
    ]


# (expression, lo, hi (wall times of one day, seconds), whether a time of day of the
# expression is in [lo, hi))
MAY_MATCH = [
    ("30 2 * * *", 2 * H, 3 * H, True),
    ("0 2 * * *", 2 * H, 3 * H, True),  # lo is in
    ("0 3 * * *", 2 * H, 3 * H, False),  # hi is not
    ("59 1 * * *", 2 * H, 3 * H, False),
    ("0 1,4 * * *", 2 * H, 3 * H, False),
    ("30 23 * * *", 23 * H, 25 * H, True),  # across midnight
    ("30 0 * * *", 23 * H, 25 * H, True),
    ("0 0 * * *", 23 * H, 25 * H, True),
    ("0 1 * * *", 23 * H, 25 * H, False),
    ("59 22 * * *", 23 * H, 25 * H, False),
    ("0 12 * * *", 0, 86400, True),  # a whole day
    ("0 12 * * *", 12 * H + 60, 12 * H + 60 + 86400, True),  # a day from just after 12:00
    ("59 23 * * *", 0, 86400 - 60, False),
    ("0 12 * * *", 12 * H + 60, 36 * H, False),  # to 12:00 the next day, not included
]


@pytest.mark.parametrize(("text", "lo", "hi", "match"), MAY_MATCH)
def test_whether_a_time_of_day_falls_in_a_stretch_of_wall_times(
    text: str, lo: int, hi: int, match: bool
) -> None:
    assert notes._may_match(parse_cron(text), D * 86400 + lo, D * 86400 + hi) is match
