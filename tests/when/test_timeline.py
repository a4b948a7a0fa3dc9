"""crond.when.timeline: a zone's stretches of constant offset and its transitions, found
by probing the offset; what the probe assumes of tzdata is checked for the installed data.
Whether fires come out right across transitions is test_timing_oracle.py's."""

from __future__ import annotations

import importlib
import itertools
import zoneinfo
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from crond.when import notes, timeline
from crond.when.timeline import EPOCH, Jump, Stretch
from crond.when.timing import CronTiming, parse_cron
from tests.when.test_timing_oracle import _tzif


def test_tzdata_transitions_are_far_enough_apart_for_the_probe() -> None:
    """timeline.py finds offset changes by probing every 12 h: two changes of one zone must be
    further apart than that. True of tzdata today (>= 95 h); checked for the installed data."""
    pure: Any = importlib.import_module("zoneinfo._zoneinfo")  # its loader exposes transitions
    closest = None
    for key in sorted(zoneinfo.available_timezones()):
        zone = pure.ZoneInfo.no_cache(key)
        pairs = zip(zone._trans_utc[1:], zone._ttinfos, zone._ttinfos[1:], strict=False)
        changes = [at for at, a, b in pairs if a.utcoff != b.utcoff]
        for a, b in itertools.pairwise(changes):
            closest = b - a if closest is None else min(closest, b - a)
    assert closest is not None
    assert closest > timeline.PROBE


def test_only_zones_with_a_single_offset_are_steady() -> None:
    """CronTiming skips the DST rules in a zone whose utcoffset(None) is an offset (see
    _steady_offset). zoneinfo gives one only for a zone of one offset and no DST rule:
    checked for the installed data, with zones that once had transitions among them."""
    assert timeline.steady_offset(timezone(timedelta(hours=-3, minutes=-30))) == -12600
    assert timeline.steady_offset(ZoneInfo("Etc/GMT+5")) == -18000
    for key in ("Europe/Berlin", "Asia/Kolkata", "America/Phoenix", "Asia/Tokyo"):
        assert timeline.steady_offset(ZoneInfo(key)) is None, key
    pure: Any = importlib.import_module("zoneinfo._zoneinfo")  # its loader exposes transitions
    steady = []
    for key in sorted(zoneinfo.available_timezones()):
        offset = timeline.steady_offset(ZoneInfo(key))
        if offset is not None:
            zone = pure.ZoneInfo.no_cache(key)
            offsets = {t.utcoff for t in zone._ttinfos} | {zone._tz_after.utcoff}
            assert offsets == {timedelta(seconds=offset)}, key
            steady.append(key)
    assert "UTC" in steady


# A zone of its own around an edge of the probed data: +30 min 20 days before the edge, +1 h
# a minute before it, back 5 days and 17 s after it, and +30 min at a second no 12-hour
# probe lands on.
EDGE = 50 * timeline.CHUNK  # 2022-07-27T00:00Z
EARLIER, FORWARD = EDGE - 20 * 86400, EDGE - 60
BACK, LATER = EDGE + 5 * 86400 + 17, EDGE + 20 * 86400 + 12345
ZONE = _tzif(0, [(EARLIER, 1800), (FORWARD, 3600), (BACK, 0), (LATER, 1800)])
E, F = Jump(EARLIER, 0, 1800), Jump(FORWARD, 1800, 3600)
B, L = Jump(BACK, 3600, 0), Jump(LATER, 0, 1800)
NEAR = timeline.NEAR

STRETCHES = [
    (EARLIER - 1, Stretch(49 * timeline.CHUNK, EARLIER, 0, None)),
    (FORWARD - 1, Stretch(EARLIER, FORWARD, 1800, E)),
    (FORWARD, Stretch(FORWARD, EDGE, 3600, F)),
    (EDGE - 1, Stretch(FORWARD, EDGE, 3600, F)),
    (EDGE, Stretch(EDGE, BACK, 3600, None)),  # a chunk's edge carries no rule
    (BACK - 1, Stretch(EDGE, BACK, 3600, None)),
    (BACK, Stretch(BACK, LATER, 0, B)),
    (LATER, Stretch(LATER, 51 * timeline.CHUNK, 1800, L)),
    (51 * timeline.CHUNK + 5, Stretch(51 * timeline.CHUNK, 52 * timeline.CHUNK, 1800, None)),
]


@pytest.mark.parametrize(("u", "stretch"), STRETCHES)
def test_the_stretch_holding_an_instant(u: int, stretch: Stretch) -> None:
    assert timeline.stretch_at(ZONE, u) == stretch
    assert timeline.stretch_at(ZONE, u) == stretch  # again, from the last one found


# (u, the transition at or before u less than NEAR before it, the first one after u at
# most NEAR after it)
NEIGHBOURS = [
    (FORWARD - NEAR - 1, None, None),
    (FORWARD - NEAR, None, F),
    (FORWARD - 1, None, F),
    (FORWARD, F, None),
    (EDGE + 10, F, None),  # across the chunk's edge, the last of that chunk's two
    (FORWARD + NEAR - 1, F, None),
    (FORWARD + NEAR, None, None),
    (BACK - NEAR, None, B),
    (BACK - NEAR - 1, None, None),
    (BACK + NEAR - 1, B, None),
    (BACK + NEAR, None, None),
]


@pytest.mark.parametrize(("u", "back", "ahead"), NEIGHBOURS)
def test_the_transitions_near_an_instant(u: int, back: Jump | None, ahead: Jump | None) -> None:
    stretch = timeline.stretch_at(ZONE, u)
    assert timeline.jump_back(ZONE, stretch, u) == back
    assert timeline.jump_ahead(ZONE, stretch, u) == ahead


def test_transitions_between_two_instants() -> None:
    assert list(timeline.jumps_between(ZONE, FORWARD, BACK)) == [F]
    assert list(timeline.jumps_between(ZONE, FORWARD + 1, BACK + 1)) == [B]
    assert list(timeline.jumps_between(ZONE, 0, 60 * timeline.CHUNK)) == [E, F, B, L]
    assert list(timeline.jumps_between(ZONE, LATER + 1, 60 * timeline.CHUNK)) == []


@pytest.mark.parametrize(
    ("instant", "second"),
    [
        (EPOCH, 0),
        (EPOCH + timedelta(seconds=90, microseconds=999_999), 90),
        (EPOCH - timedelta(microseconds=1), -1),
        (datetime(2026, 3, 8, 3, 0, tzinfo=ZoneInfo("America/New_York")), 1772953200),
    ],
)
def test_instants_as_epoch_seconds(instant: datetime, second: int) -> None:
    assert timeline.seconds(instant) == second
    assert timeline.seconds(instant) == second  # again: the same object, remembered


def test_naive_instants_are_refused() -> None:
    with pytest.raises(ValueError, match="has no time zone; crond compares UTC instants"):
        timeline.seconds(datetime(2026, 1, 1))


def test_each_chunk_of_a_zone_is_probed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two years of fires probe the zone's data once per chunk (docs/schedules.md: found
    once per zone), however many fires and transitions they cross."""
    monkeypatch.setattr(timeline, "_chunks", {})
    monkeypatch.setattr(timeline, "_last_stretch", {})
    probed: list[int] = []
    probe = timeline._probe

    def counting(zone: tzinfo, index: int) -> timeline._Chunk:
        probed.append(index)
        return probe(zone, index)

    monkeypatch.setattr(timeline, "_probe", counting)
    fires = CronTiming(parse_cron("30 1,2 * * *"), ZoneInfo("America/New_York")).fires(
        datetime(2026, 1, 1, tzinfo=UTC)
    )
    for _ in range(2 * 730):
        next(fires)
    assert sorted(probed) == sorted(set(probed))
    assert len(probed) <= 4


def test_the_stretch_of_consecutive_instants_is_found_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timeline, "_last_stretch", {})
    found: list[int] = []
    find = timeline._find_stretch

    def counting(zone: tzinfo, u: int) -> Stretch:
        found.append(u)
        return find(zone, u)

    monkeypatch.setattr(timeline, "_find_stretch", counting)
    for u in [EDGE + 1, *range(EDGE, BACK, 3600), BACK - 1]:
        assert timeline.stretch_at(ZONE, u) == Stretch(EDGE, BACK, 3600, None)
    assert found == [EDGE + 1]


def test_a_stretch_tells_when_no_transition_is_near(monkeypatch: pytest.MonkeyPatch) -> None:
    def lookup(zone: tzinfo, u: int) -> Jump | None:
        raise AssertionError("looked up")

    monkeypatch.setattr(timeline, "_jump_at_or_before", lookup)
    monkeypatch.setattr(timeline, "_jump_after", lookup)
    far = EDGE + NEAR  # its stretch starts at a chunk's edge NEAR before, and ends after BACK
    assert timeline.jump_back(ZONE, timeline.stretch_at(ZONE, far), far) is None
    assert timeline.jump_ahead(ZONE, timeline.stretch_at(ZONE, far), far) is None
    after = FORWARD + 10  # its stretch starts at a transition
    assert timeline.jump_back(ZONE, timeline.stretch_at(ZONE, after), after) == F


@pytest.mark.parametrize("at", [EDGE - 1, EDGE, EDGE + 1])
def test_a_transition_at_a_chunks_edge_is_found_once_to_the_second(at: int) -> None:
    zone = _tzif(0, [(at, 3600)])
    jump = Jump(at, 0, 3600)
    assert list(timeline.jumps_between(zone, EDGE - 86400, EDGE + 86400)) == [jump]
    stretch = timeline.stretch_at(zone, EDGE + 5)
    if at < EDGE:
        assert stretch == Stretch(EDGE, 51 * timeline.CHUNK, 3600, None)
    else:
        assert stretch == Stretch(at, 51 * timeline.CHUNK, 3600, jump)
    assert timeline.stretch_at(zone, at - 1).offset == 0


def test_validate_probes_the_chunks_of_its_year_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timeline, "_chunks", {})
    notes._jumps_in.cache_clear()
    probed: list[int] = []
    probe = timeline._probe

    def counting(zone: tzinfo, index: int) -> timeline._Chunk:
        probed.append(index)
        return probe(zone, index)

    monkeypatch.setattr(timeline, "_probe", counting)
    start = EPOCH + timedelta(seconds=EDGE + 10 * 86400)  # a year and 3 days: chunk 50 alone
    notes.dst_warnings(parse_cron("30 2 * * *"), ZONE, start)
    assert probed == [50]
