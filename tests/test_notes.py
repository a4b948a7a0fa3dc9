"""crond.when.notes: the DST rules in words, as `crond validate` warns of them (a fixed-time
job's wall time in a gap or a repeat of its zone) and as `crond next` notes them."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from crond.when.cronexpr import parse_cron
from crond.when.notes import dst_warnings


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
