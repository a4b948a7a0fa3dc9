"""crond.when.preview: what `crond next` computes and prints."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from crond.when.preview import PreviewRow, format_json_lines, format_table, next_fires
from crond.when.timing import CronTiming, Fire, IntervalTiming, Timing, parse_cron

NY = ZoneInfo("America/New_York")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _spring_night() -> dict[str, Timing]:
    return {
        "nightly-backup": CronTiming(parse_cron("30 2 * * *"), NY),
        "every-2h": CronTiming(parse_cron("0 */2 * * *"), NY),
        "cleanup": IntervalTiming(
            timedelta(hours=2), jitter=timedelta(seconds=9, milliseconds=223)
        ),
    }


def test_next_fires_n_per_job_in_time_order() -> None:
    rows = next_fires(_spring_night(), utc("2026-03-08T04:30Z"), 2)
    assert [(r.job, r.fire.at) for r in rows] == [
        ("every-2h", utc("2026-03-08T05:00Z")),
        ("cleanup", utc("2026-03-08T06:00:09.223Z")),
        ("nightly-backup", utc("2026-03-08T07:00Z")),
        ("every-2h", utc("2026-03-08T08:00Z")),
        ("cleanup", utc("2026-03-08T08:00:09.223Z")),
        ("nightly-backup", utc("2026-03-09T06:30Z")),
    ]


def test_equal_instants_are_ordered_by_job_name() -> None:
    timings: dict[str, Timing] = {
        name: CronTiming(parse_cron("0 * * * *"), UTC) for name in ("b", "c", "a")
    }
    rows = next_fires(timings, utc("2026-01-01T00:30Z"), 2)
    assert [r.job for r in rows] == ["a", "b", "c", "a", "b", "c"]


def test_no_jobs_no_rows() -> None:
    assert next_fires({}, utc("2026-01-01T00:00Z"), 5) == []
    assert format_json_lines([]) == ""
    assert format_table([]).split() == ["JOB", "ZONE", "LOCAL", "TIME", "UTC", "NOTE"]


def test_json_lines_as_spec() -> None:
    rows = next_fires(_spring_night(), utc("2026-03-08T06:30Z"), 1)
    assert [json.loads(line) for line in format_json_lines(rows).splitlines()] == [
        {
            "job": "nightly-backup",
            "at": "2026-03-08T07:00:00Z",
            "local": "2026-03-08T03:00:00-04:00",
            "note": "02:30 skipped by DST; runs at the jump (R4)",
        },
        {
            "job": "every-2h",
            "at": "2026-03-08T08:00:00Z",
            "local": "2026-03-08T04:00:00-04:00",
            "note": "02:00 skipped by DST; not made up (wildcard job, R4)",
        },
        {
            "job": "cleanup",
            "at": "2026-03-08T08:00:09.223Z",
            "local": "2026-03-08T08:00:09.223+00:00",
            "note": None,
        },
    ]
    first = format_json_lines(rows).splitlines()[0]
    assert first.startswith('{"job": "nightly-backup", "at": "2026-03-08T07:00:00Z", "local": ')


def test_table_on_a_dst_night() -> None:
    rows = next_fires(_spring_night(), utc("2026-03-08T04:30Z"), 2)
    assert format_table(rows) == "\n".join(
        [
            "JOB             ZONE              LOCAL TIME                          UTC                       NOTE",  # noqa: E501
            "every-2h        America/New_York  Sun 2026-03-08 00:00:00 EST -05:00  2026-03-08T05:00:00Z",  # noqa: E501
            "cleanup         UTC               Sun 2026-03-08 06:00:09.223 UTC     2026-03-08T06:00:09.223Z",  # noqa: E501
            "nightly-backup  America/New_York  Sun 2026-03-08 03:00:00 EDT -04:00  2026-03-08T07:00:00Z      02:30 skipped by DST; runs at the jump (R4)",  # noqa: E501
            "every-2h        America/New_York  Sun 2026-03-08 04:00:00 EDT -04:00  2026-03-08T08:00:00Z      02:00 skipped by DST; not made up (wildcard job, R4)",  # noqa: E501
            "cleanup         UTC               Sun 2026-03-08 08:00:09.223 UTC     2026-03-08T08:00:09.223Z",  # noqa: E501
            "nightly-backup  America/New_York  Mon 2026-03-09 02:30:00 EDT -04:00  2026-03-09T06:30:00Z",  # noqa: E501
        ]
    )


def test_table_shows_numeric_zone_abbreviations_as_offsets() -> None:
    fire = CronTiming(parse_cron("15 2 * * *"), ZoneInfo("Australia/Lord_Howe")).next_after(
        utc("2026-10-03T00:00Z")
    )
    line = format_table([PreviewRow("lh", fire)]).splitlines()[1]
    assert "Sun 2026-10-04 02:30:00 +11:00  2026-10-03T15:30:00Z" in line


def test_many_jobs_come_out_in_time_order() -> None:
    timings: dict[str, Timing] = {
        f"job-{i:04d}": CronTiming(parse_cron(f"{i % 60} */{1 + i % 5} * * *"), NY)
        for i in range(200)
    }
    rows = next_fires(timings, utc("2026-11-01T04:00Z"), 5)
    assert len(rows) == 1000
    keys = [(r.fire.at, r.job) for r in rows]
    assert keys == sorted(keys)
    assert all(isinstance(r.fire, Fire) for r in rows)
