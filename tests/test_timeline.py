"""crond.when.timeline: a zone's stretches of constant offset and its transitions, found
by probing the offset; what the probe assumes of tzdata is checked for the installed data.
Whether fires come out right across transitions is test_timing_oracle.py's."""

from __future__ import annotations

import importlib
import itertools
import zoneinfo
from datetime import timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from crond.when import timeline


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
