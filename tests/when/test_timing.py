"""crond.when.timing by example: named cases written out by hand, the parser's messages,
intervals, jitter and the validation warnings. The oracle comparison is in
test_timing_oracle.py."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest

from crond.when import cronexpr, timing
from crond.when.timeline import EPOCH
from crond.when.timing import (
    CronError,
    CronTiming,
    Fire,
    IntervalTiming,
    RebootTiming,
    jitter_offset,
    parse_cron,
)
from tests.when.test_timing_oracle import _tzif


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


# (id, expression, zone, after, [(at, local, note), ...]) -- checked by hand against the
# rules of docs/schedules.md.
NAMED = [
    (
        "ny_spring_gap_fixed_time",
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00Z",
        [
            (
                "2026-03-08T07:00Z",
                "2026-03-08T03:00-04:00",
                "02:30 skipped by DST; runs at the jump (R4)",
            ),
            ("2026-03-09T06:30Z", "2026-03-09T02:30-04:00", None),
        ],
    ),
    (
        "ny_fall_repeat_fixed_time",
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00Z",
        [
            (
                "2026-11-01T05:30Z",
                "2026-11-01T01:30-04:00",
                "first pass of 01:30; the second pass is not run (R5)",
            ),
            ("2026-11-02T06:30Z", "2026-11-02T01:30-05:00", None),
        ],
    ),
    (
        "ny_spring_wildcard_every_2h",
        "0 */2 * * *",
        "America/New_York",
        "2026-03-08T04:00Z",
        [
            ("2026-03-08T05:00Z", "2026-03-08T00:00-05:00", None),
            (
                "2026-03-08T08:00Z",
                "2026-03-08T04:00-04:00",
                "02:00 skipped by DST; not made up (wildcard job, R4)",
            ),
            ("2026-03-08T10:00Z", "2026-03-08T06:00-04:00", None),
        ],
    ),
    (
        "ny_fall_wildcard_every_20m",
        "*/20 * * * *",
        "America/New_York",
        "2026-11-01T04:50Z",
        [
            (
                "2026-11-01T05:00Z",
                "2026-11-01T01:00-04:00",
                "first of two passes of 01:00 (wildcard job, R5)",
            ),
            (
                "2026-11-01T05:20Z",
                "2026-11-01T01:20-04:00",
                "first of two passes of 01:20 (wildcard job, R5)",
            ),
            (
                "2026-11-01T05:40Z",
                "2026-11-01T01:40-04:00",
                "first of two passes of 01:40 (wildcard job, R5)",
            ),
            (
                "2026-11-01T06:00Z",
                "2026-11-01T01:00-05:00",
                "second pass of 01:00 (wildcard job, R5)",
            ),
            (
                "2026-11-01T06:20Z",
                "2026-11-01T01:20-05:00",
                "second pass of 01:20 (wildcard job, R5)",
            ),
            (
                "2026-11-01T06:40Z",
                "2026-11-01T01:40-05:00",
                "second pass of 01:40 (wildcard job, R5)",
            ),
            ("2026-11-01T07:00Z", "2026-11-01T02:00-05:00", None),
        ],
    ),
    (
        "spring_two_slots_collapse",
        "0 2,3 * * *",
        "America/New_York",
        "2026-03-08T00:00Z",
        [
            (
                "2026-03-08T07:00Z",
                "2026-03-08T03:00-04:00",
                "02:00 skipped by DST; runs once at the jump, with its 03:00 run (R4, R7)",
            ),
            ("2026-03-09T06:00Z", "2026-03-09T02:00-04:00", None),
            ("2026-03-09T07:00Z", "2026-03-09T03:00-04:00", None),
        ],
    ),
    (
        "spring_slots_in_gap_collapse",
        "0,30 2 * * *",
        "America/New_York",
        "2026-03-08T00:00Z",
        [
            (
                "2026-03-08T07:00Z",
                "2026-03-08T03:00-04:00",
                "02:00 and 02:30 skipped by DST; runs once at the jump (R4, R7)",
            ),
            ("2026-03-09T06:00Z", "2026-03-09T02:00-04:00", None),
        ],
    ),
    (
        "apia_2011_skipped_day",
        "0 9 * * *",
        "Pacific/Apia",
        "2011-12-29T00:00Z",
        [
            ("2011-12-29T19:00Z", "2011-12-29T09:00-10:00", None),
            (
                "2011-12-30T19:00Z",
                "2011-12-31T09:00+14:00",
                "2011-12-30 09:00 skipped by a calendar change; not made up (R6)",
            ),
            ("2011-12-31T19:00Z", "2012-01-01T09:00+14:00", None),
        ],
    ),
    (
        "lord_howe_half_hour",
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T00:00Z",
        [
            (
                "2026-10-03T15:30Z",
                "2026-10-04T02:30+11:00",
                "02:15 skipped by DST; runs at the jump (R4)",
            ),
            ("2026-10-04T15:15Z", "2026-10-05T02:15+11:00", None),
        ],
    ),
    (
        "lord_howe_half_hour_repeat",
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T00:00Z",
        [
            (
                "2026-04-04T14:45Z",
                "2026-04-05T01:45+11:00",
                "first pass of 01:45; the second pass is not run (R5)",
            ),
            ("2026-04-05T15:15Z", "2026-04-06T01:45+10:30", None),
        ],
    ),
    (
        "sao_paulo_midnight",
        "30 0 * * *",
        "America/Sao_Paulo",
        "2018-11-03T12:00Z",
        [
            (
                "2018-11-04T03:00Z",
                "2018-11-04T01:00-02:00",
                "00:30 skipped by DST; runs at the jump (R4)",
            ),
            ("2018-11-05T02:30Z", "2018-11-05T00:30-02:00", None),
        ],
    ),
    (
        "sao_paulo_back_to_previous_day",
        "30 23 * * *",
        "America/Sao_Paulo",
        "2019-02-16T12:00Z",
        [
            (
                "2019-02-17T01:30Z",
                "2019-02-16T23:30-02:00",
                "first pass of 23:30; the second pass is not run (R5)",
            ),
            ("2019-02-18T02:30Z", "2019-02-17T23:30-03:00", None),
        ],
    ),
    (
        "troll_2h_forward",
        "30 1 * * *",
        "Antarctica/Troll",
        "2026-03-28T12:00Z",
        [
            (
                "2026-03-29T01:00Z",
                "2026-03-29T03:00+02:00",
                "01:30 skipped by DST; runs at the jump (R4)",
            ),
            ("2026-03-29T23:30Z", "2026-03-30T01:30+02:00", None),
        ],
    ),
    (
        "troll_2h_back",
        "30 2 * * *",
        "Antarctica/Troll",
        "2026-10-24T12:00Z",
        [
            (
                "2026-10-25T00:30Z",
                "2026-10-25T02:30+02:00",
                "first pass of 02:30; the second pass is not run (R5)",
            ),
            ("2026-10-26T02:30Z", "2026-10-26T02:30+00:00", None),
        ],
    ),
    (
        "chatham_forward",
        "0 3 * * *",
        "Pacific/Chatham",
        "2026-09-26T00:00Z",
        [
            (
                "2026-09-26T14:00Z",
                "2026-09-27T03:45+13:45",
                "03:00 skipped by DST; runs at the jump (R4)",
            ),
            ("2026-09-27T13:15Z", "2026-09-28T03:00+13:45", None),
        ],
    ),
    (
        "dublin_negative_dst_forward",
        "30 1 * * *",
        "Europe/Dublin",
        "2026-03-28T12:00Z",
        [
            (
                "2026-03-29T01:00Z",
                "2026-03-29T02:00+01:00",
                "01:30 skipped by DST; runs at the jump (R4)",
            ),
            ("2026-03-30T00:30Z", "2026-03-30T01:30+01:00", None),
        ],
    ),
    (
        "casey_3h_back_is_calendar_change",
        "30 0 * * *",
        "Antarctica/Casey",
        "2010-03-04T12:00Z",
        [
            (
                "2010-03-04T13:30Z",
                "2010-03-05T00:30+11:00",
                "first of two passes of 00:30 (calendar change, R6)",
            ),
            (
                "2010-03-04T16:30Z",
                "2010-03-05T00:30+08:00",
                "second pass of 00:30 (calendar change, R6)",
            ),
            ("2010-03-05T16:30Z", "2010-03-06T00:30+08:00", None),
        ],
    ),
    (
        "casey_3h_forward_nothing_made_up",
        "30 3,6 * * *",
        "Antarctica/Casey",
        "2009-10-17T12:00Z",
        [
            (
                "2009-10-17T19:30Z",
                "2009-10-18T06:30+11:00",
                "03:30 skipped by a calendar change; not made up (R6)",
            ),
            ("2009-10-18T16:30Z", "2009-10-19T03:30+11:00", None),
        ],
    ),
    (
        "r2_dom_or_dow",
        "0 12 1,15 * fri",
        "UTC",
        "2026-01-01T00:00Z",
        [
            ("2026-01-01T12:00Z", "2026-01-01T12:00+00:00", None),  # Thursday the 1st
            ("2026-01-02T12:00Z", "2026-01-02T12:00+00:00", None),  # Friday
            ("2026-01-09T12:00Z", "2026-01-09T12:00+00:00", None),
            ("2026-01-15T12:00Z", "2026-01-15T12:00+00:00", None),  # Thursday the 15th
            ("2026-01-16T12:00Z", "2026-01-16T12:00+00:00", None),
        ],
    ),
    (
        "r2_star_step_means_and",
        "0 12 */2 * fri",
        "UTC",
        "2026-01-01T00:00Z",
        [
            ("2026-01-09T12:00Z", "2026-01-09T12:00+00:00", None),  # odd days that are Fridays
            ("2026-01-23T12:00Z", "2026-01-23T12:00+00:00", None),
            ("2026-02-13T12:00Z", "2026-02-13T12:00+00:00", None),
        ],
    ),
    (
        "r2_sunday_is_0_and_7",
        "0 8 * * 5-7",
        "UTC",
        "2026-01-01T00:00Z",
        [
            ("2026-01-02T08:00Z", "2026-01-02T08:00+00:00", None),  # Fri
            ("2026-01-03T08:00Z", "2026-01-03T08:00+00:00", None),  # Sat
            ("2026-01-04T08:00Z", "2026-01-04T08:00+00:00", None),  # Sun
            ("2026-01-09T08:00Z", "2026-01-09T08:00+00:00", None),
        ],
    ),
    (
        "leap_day_in_dst_zone",
        "0 2 29 2 *",
        "America/New_York",
        "2026-01-01T00:00Z",
        [
            ("2028-02-29T07:00Z", "2028-02-29T02:00-05:00", None),
            ("2032-02-29T07:00Z", "2032-02-29T02:00-05:00", None),
        ],
    ),
    (
        "monthly_on_spring_night",
        "30 2 8 * *",
        "America/New_York",
        "2026-02-09T00:00Z",
        [
            (
                "2026-03-08T07:00Z",
                "2026-03-08T03:00-04:00",
                "02:30 skipped by DST; runs at the jump (R4)",
            ),
            ("2026-04-08T06:30Z", "2026-04-08T02:30-04:00", None),
        ],
    ),
]


@pytest.mark.parametrize(
    ("text", "zone", "after", "expected"), [c[1:] for c in NAMED], ids=[c[0] for c in NAMED]
)
def test_named_cases(
    text: str, zone: str, after: str, expected: list[tuple[str, str, str | None]]
) -> None:
    timing_ = CronTiming(parse_cron(text), ZoneInfo(zone))
    fires = timing_.fires(utc(after))
    got = [next(fires) for _ in expected]
    want = [Fire(utc(at), datetime.fromisoformat(local), note) for at, local, note in expected]
    assert [(f.at, f.local.isoformat(), f.note) for f in got] == [
        (f.at, f.local.isoformat(), f.note) for f in want
    ]
    # A restart just before each fire finds it again (next_after is stateless).
    for fire in want:
        assert timing_.next_after(fire.at - timedelta(seconds=1)).at == fire.at


def test_next_after_is_strictly_after() -> None:
    timing_ = CronTiming(parse_cron("30 2 * * *"), ZoneInfo("America/New_York"))
    assert timing_.next_after(utc("2026-03-08T07:00Z")).at == utc("2026-03-09T06:30Z")
    assert timing_.next_after(utc("2026-03-08T06:59:59.999Z")).at == utc("2026-03-08T07:00Z")


def test_local_is_in_the_zone_and_every_instant_is_utc() -> None:
    fire = CronTiming(parse_cron("0 9 * * *"), ZoneInfo("Europe/Berlin")).next_after(
        utc("2026-06-01T00:00Z")
    )
    assert fire.at.tzinfo is UTC
    assert fire.local.tzinfo == ZoneInfo("Europe/Berlin")
    assert fire.local.isoformat() == "2026-06-01T09:00:00+02:00"


def test_naive_instants_are_refused() -> None:
    with pytest.raises(ValueError, match="no time zone"):
        CronTiming(parse_cron("* * * * *"), UTC).next_after(datetime(2026, 1, 1))


# --- intervals (R8) -------------------------------------------------------------------


def test_interval_slots_count_from_the_epoch() -> None:
    every = IntervalTiming(timedelta(minutes=15))
    assert every.next_after(utc("2026-01-01T00:07Z")).at == utc("2026-01-01T00:15Z")
    assert every.next_after(utc("2026-01-01T00:15Z")).at == utc("2026-01-01T00:30Z")
    assert every.next_after(utc("2026-01-01T00:15Z")).note is None


def test_interval_anchor_and_no_slot_before_it() -> None:
    every = IntervalTiming(
        timedelta(hours=1), anchor=datetime.fromisoformat("2026-01-01T00:05+01:00")
    )
    assert every.next_after(utc("2020-01-01T00:00Z")).at == utc("2025-12-31T23:05Z")
    assert every.next_after(utc("2026-01-05T10:00Z")).at == utc("2026-01-05T10:05Z")


def test_interval_ignores_dst_every_24h_drifts_in_local_time() -> None:
    ny = ZoneInfo("America/New_York")
    every = IntervalTiming(timedelta(hours=24), anchor=utc("2026-03-07T17:00Z"), zone=ny)
    fires = every.fires(utc("2026-03-07T00:00Z"))
    assert [next(fires).local.isoformat() for _ in range(2)] == [
        "2026-03-07T12:00:00-05:00",
        "2026-03-08T13:00:00-04:00",
    ]


def test_interval_has_no_float_drift() -> None:
    every = IntervalTiming(timedelta(milliseconds=7))
    fire = every.next_after(utc("2026-05-17T13:45:12.345678Z"))
    micros = (fire.at - EPOCH) // timedelta(microseconds=1)
    assert micros % 7000 == 0
    assert timedelta(0) < fire.at - utc("2026-05-17T13:45:12.345678Z") <= timedelta(milliseconds=7)


def test_interval_shorter_than_a_millisecond_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"interval 0:00:00.000999 is too short; the minimum is 1 ms"
    ):
        IntervalTiming(timedelta(microseconds=999))
    assert IntervalTiming(timedelta(milliseconds=1)).period == timedelta(milliseconds=1)


def test_interval_instants_are_utc_and_aware() -> None:
    anchor = datetime.fromisoformat("2026-01-01T00:05+01:00")
    every = IntervalTiming(timedelta(hours=1), anchor=anchor)
    assert every.anchor == utc("2025-12-31T23:05Z")
    assert every.anchor.tzinfo is UTC
    fire = every.next_after(utc("2026-01-01T00:00Z"))
    assert (fire.at.tzinfo, fire.local.tzinfo) == (UTC, UTC)
    with pytest.raises(ValueError, match=r"anchor datetime.datetime\(.*\) has no time zone"):
        IntervalTiming(timedelta(hours=1), anchor=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="has no time zone; crond compares UTC instants only"):
        every.next_after(datetime(2026, 1, 1))


# (after, the first slot strictly after it) for `every: 1h` anchored at 10:05Z, jitter 20s
INTERVAL_EDGES = [
    ("2026-01-01T10:05Z", "2026-01-01T10:05:20Z"),  # the anchor, before its jitter
    ("2026-01-01T10:05:19.999999Z", "2026-01-01T10:05:20Z"),
    ("2026-01-01T10:05:20Z", "2026-01-01T11:05:20Z"),  # exactly on a slot: the next one
    ("2026-01-01T11:05:19Z", "2026-01-01T11:05:20Z"),
    ("1970-01-01T00:00Z", "2026-01-01T10:05:20Z"),  # no slot before the anchor
]


@pytest.mark.parametrize(("after", "first"), INTERVAL_EDGES)
def test_interval_slots_around_the_anchor(after: str, first: str) -> None:
    every = IntervalTiming(
        timedelta(hours=1), anchor=utc("2026-01-01T10:05Z"), jitter=timedelta(seconds=20)
    )
    assert every.next_after(utc(after)).at == utc(first)
    fires = every.fires(utc(after))
    assert [next(fires).at for _ in range(3)] == [utc(first) + timedelta(hours=h) for h in range(3)]


# --- what a timing says of itself -----------------------------------------------------


def test_reboot_never_falls_due() -> None:
    reboot = RebootTiming()
    assert reboot.next_after(utc("2026-01-01T00:00Z")) is None
    assert list(reboot.fires(utc("2026-01-01T00:00Z"))) == []
    assert reboot.period is None
    assert repr(reboot) == "RebootTiming()"


def test_only_an_interval_has_a_period() -> None:
    assert IntervalTiming(timedelta(minutes=15)).period == timedelta(minutes=15)
    assert CronTiming(parse_cron("*/15 * * * *"), UTC).period is None


def test_timings_show_what_they_are() -> None:
    berlin = CronTiming(parse_cron("30 2 * * *"), ZoneInfo("Europe/Berlin"), timedelta(seconds=3))
    assert repr(berlin) == "CronTiming('30 2 * * *', Europe/Berlin, jitter=0:00:03)"
    every = IntervalTiming(timedelta(minutes=15))
    assert repr(every) == "IntervalTiming(0:15:00, anchor=1970-01-01T00:00:00+00:00)"


@pytest.mark.parametrize("zone", [UTC, ZoneInfo("America/New_York")], ids=["utc", "new_york"])
def test_an_expression_that_never_fires_is_an_error(zone: tzinfo) -> None:
    """parse_cron refuses such an expression; a hand-made one is searched for 400 years."""
    never = dataclasses.replace(parse_cron("0 0 30 * *"), months=frozenset({2}))
    with pytest.raises(CronError, match=r"^0 0 30 \* \* does not fire in 400 years$") as caught:
        CronTiming(never, zone).next_after(utc("2026-01-01T00:00Z"))
    assert (caught.value.field, caught.value.value) == (None, "0 0 30 * *")


# --- jitter -------------------------------------------------------------------------------

# (job, jitter, its offset): literal values, the same on every host, restart and Python
# version (docs/schedules.md gives the first two).
JITTER_OFFSETS = [
    ("cleanup", timedelta(minutes=2), timedelta(seconds=9, milliseconds=223)),
    ("nightly-backup", timedelta(minutes=10), timedelta(minutes=1, seconds=43, milliseconds=962)),
    ("sync", timedelta(minutes=2), timedelta(seconds=25, milliseconds=971)),
    ("c", timedelta(hours=1), timedelta(minutes=57, seconds=44, milliseconds=930)),
    ("job-2", timedelta(milliseconds=2), timedelta(milliseconds=1)),
    ("a", timedelta(milliseconds=2), timedelta(0)),
    ("cleanup", timedelta(milliseconds=1), timedelta(0)),
    ("cleanup", timedelta(microseconds=999), timedelta(0)),  # less than its resolution
    ("cleanup", timedelta(0), timedelta(0)),
]


@pytest.mark.parametrize(("name", "jitter", "offset"), JITTER_OFFSETS)
def test_jitter_offsets(name: str, jitter: timedelta, offset: timedelta) -> None:
    assert jitter_offset(name, jitter) == offset


def test_jitter_is_in_range() -> None:
    for name in ("a", "b", "job-1", "job-2", "x" * 64):
        assert timedelta(0) <= jitter_offset(name, timedelta(seconds=3)) < timedelta(seconds=3)


def test_jitter_moves_the_fire_and_next_after_compares_jittered_instants() -> None:
    hourly = CronTiming(parse_cron("0 * * * *"), UTC, jitter=timedelta(seconds=90))
    fire = hourly.next_after(utc("2026-01-01T00:00:30Z"))
    assert fire.at == utc("2026-01-01T00:01:30Z")
    assert hourly.next_after(fire.at).at == utc("2026-01-01T01:01:30Z")
    every = IntervalTiming(timedelta(minutes=15), jitter=timedelta(seconds=20))
    assert every.next_after(utc("2026-01-01T00:00:10Z")).at == utc("2026-01-01T00:00:20Z")


def test_first_fires_are_shared_by_jobs_with_the_same_expression_and_zone() -> None:
    ny = ZoneInfo("America/New_York")
    after = utc("2026-03-08T04:30Z")
    first = CronTiming(parse_cron("30 2 * * *"), ny).next_after(after)
    again = CronTiming(parse_cron("30 2 * * *"), ny).next_after(after)
    assert again is first  # one answer, computed once
    assert first == Fire(utc("2026-03-08T07:00Z"), first.local, first.note)
    assert first.note == "02:30 skipped by DST; runs at the jump (R4)"
    # A different zone, jitter or instant is a different question.
    assert CronTiming(parse_cron("30 2 * * *"), UTC).next_after(after).at == utc(
        "2026-03-09T02:30Z"
    )
    jittered = CronTiming(parse_cron("30 2 * * *"), ny, jitter=timedelta(seconds=7))
    assert jittered.next_after(after).at == utc("2026-03-08T07:00:07Z")
    assert CronTiming(parse_cron("30 2 * * *"), ny).next_after(first.at).at == utc(
        "2026-03-09T06:30Z"
    )


def test_first_fires_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "_first_fires", {})
    monkeypatch.setattr(timing, "_FIRST_FIRES_MAX", 10)
    hourly = CronTiming(parse_cron("0 * * * *"), UTC)
    start = utc("2026-01-01T00:00Z")
    for minutes in range(25):
        at = start + timedelta(minutes=7 * minutes)
        assert hourly.next_after(at).at == at.replace(minute=0) + timedelta(hours=1)
        assert len(timing._first_fires) <= 10


def test_jitter_keeps_local_consistent_with_at() -> None:
    ny = ZoneInfo("America/New_York")
    fire = CronTiming(parse_cron("30 2 * * *"), ny, jitter=timedelta(minutes=3)).next_after(
        utc("2026-03-08T00:00Z")
    )
    assert fire.at == utc("2026-03-08T07:03Z")
    assert fire.local.isoformat() == "2026-03-08T03:03:00-04:00"


def test_a_yearly_jobs_fires_cost_two_searches_of_a_year(monkeypatch: pytest.MonkeyPatch) -> None:
    """The day search remembers its last answer (cronexpr.DaySearch._span), so a fire's
    successor is searched for from the day after it, and once more from wherever the
    zone's timeline is cut on the way (a DST change, an edge of probed data); every other
    question on the way is answered from memory."""
    searched: list[int] = []
    find = cronexpr.DaySearch._find

    def counting(search: cronexpr.DaySearch, day: int) -> int:
        searched.append(day)
        return find(search, day)

    monkeypatch.setattr(cronexpr.DaySearch, "_find", counting)
    fires = CronTiming(parse_cron("0 12 1 7 *"), ZoneInfo("America/New_York")).fires(
        utc("2026-01-01T00:00Z")
    )
    assert [next(fires).at.year for _ in range(10)] == list(range(2026, 2036))
    assert len(searched) <= 2 * 10


def test_a_one_second_gap_is_dst_too() -> None:
    """R4 for the smallest forward jump: 02:00:00 never happens, so the fixed-time job runs
    at the jump, 02:00:01, and the wildcard job, every minute, is not made up."""
    day = 19000 * 86400  # 2022-01-08
    zone = _tzif(0, [(day + 2 * 3600, 1)])
    after = EPOCH + timedelta(seconds=day)
    fixed = CronTiming(parse_cron("0 2 * * *"), zone).next_after(after)
    assert (fixed.at, fixed.local.isoformat(), fixed.note) == (
        utc("2022-01-08T02:00Z"),
        "2022-01-08T02:00:01+00:00:01",
        "02:00 skipped by DST; runs at the jump (R4)",
    )
    wildcard = CronTiming(parse_cron("* 2 * * *"), zone).next_after(after)
    assert (wildcard.local.isoformat(), wildcard.note) == (
        "2022-01-08T02:01:00+00:00:01",
        "02:00 skipped by DST; not made up (wildcard job, R4)",
    )


def test_an_interval_does_not_drift_in_ten_thousand_years() -> None:
    """Slots are counted in whole microseconds: past 2**53 µs from the anchor (the year
    2255), float arithmetic would no longer land on them."""
    every = IntervalTiming(timedelta(milliseconds=7), jitter=timedelta(microseconds=3))
    after = datetime(9000, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    fire = every.next_after(after)
    assert ((fire.at - EPOCH) - timedelta(microseconds=3)) % timedelta(milliseconds=7) == timedelta(
        0
    )
    assert timedelta(0) < fire.at - after <= timedelta(milliseconds=7)


def test_two_rules_on_one_fire_give_two_notes() -> None:
    """A wildcard job's first fire after a gap that day, on a wall time about to repeat:
    both notes, in the order of the rules. (A zone of its own: +1 h at 02:00, back at
    midnight, 21 h later.)"""
    day = 19000 * 86400  # 2022-01-08
    zone = _tzif(0, [(day + 2 * 3600, 3600), (day + 23 * 3600, 0)])
    fires = CronTiming(parse_cron("* 2,23 * * *"), zone).fires(EPOCH + timedelta(seconds=day))
    assert [(f.local.isoformat(), f.note) for f in itertools.islice(fires, 2)] == [
        (
            "2022-01-08T23:00:00+01:00",
            "02:00 to 02:59 (60 times) skipped by DST; not made up (wildcard job, R4); "
            "first of two passes of 23:00 (wildcard job, R5)",
        ),
        ("2022-01-08T23:01:00+01:00", "first of two passes of 23:01 (wildcard job, R5)"),
    ]


def test_a_one_second_repeat_is_dst_too() -> None:
    """R5 for the smallest backward jump: 02:00:00 happens twice, a second apart; the
    fixed-time job runs on the first pass only, the wildcard job on both."""
    day = 19000 * 86400  # 2022-01-08
    zone = _tzif(1, [(day + 2 * 3600, 0)])
    after = EPOCH + timedelta(seconds=day)
    fixed = CronTiming(parse_cron("0 2 * * *"), zone).fires(after)
    assert [(f.local.isoformat(), f.note) for f in itertools.islice(fixed, 2)] == [
        ("2022-01-08T02:00:00+00:00:01", "first pass of 02:00; the second pass is not run (R5)"),
        ("2022-01-09T02:00:00+00:00", None),
    ]
    wildcard = CronTiming(parse_cron("* 2 * * *"), zone).fires(after)
    assert [(f.local.isoformat(), f.note) for f in itertools.islice(wildcard, 3)] == [
        ("2022-01-08T02:00:00+00:00:01", "first of two passes of 02:00 (wildcard job, R5)"),
        ("2022-01-08T02:00:00+00:00", "second pass of 02:00 (wildcard job, R5)"),
        ("2022-01-08T02:01:00+00:00", None),
    ]


@pytest.mark.parametrize(
    "zone", [UTC, ZoneInfo("Etc/GMT-14"), timezone(timedelta(hours=5, minutes=45))], ids=str
)
def test_a_zone_without_transitions_needs_no_timeline(
    monkeypatch: pytest.MonkeyPatch, zone: tzinfo
) -> None:
    """Its fires are calendar arithmetic alone: no stretch of its timeline is looked up."""

    def stretch_at(zone: tzinfo, u: int) -> object:
        raise AssertionError("a stretch looked up")

    monkeypatch.setattr(timing, "stretch_at", stretch_at)
    fires = CronTiming(parse_cron("30 2 * * *"), zone).fires(utc("2026-03-01T00:00Z"))
    assert all(f.local.hour == 2 and f.note is None for f in itertools.islice(fires, 400))
