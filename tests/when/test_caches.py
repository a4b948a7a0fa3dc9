"""tests/fresh_caches.py, the plugin `make mutate` runs every test under, empties every
cache of crond.when: a cache it missed would let a mutant hide behind an answer cached
by the unmutated code."""

from __future__ import annotations

import functools
import types
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from crond.schedule import rules
from crond.when import cronexpr, cronparse, notes, preview, timeline, timing, zones
from tests import fresh_caches

MODULES = (cronexpr, cronparse, notes, rules, preview, timeline, timing, zones)


def _containers(module: types.ModuleType) -> dict[str, object]:
    """A module's module-level dicts, lists and sets named in lower case: its caches
    (constants are named in capitals, and tuples and frozensets cannot fill up)."""
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, dict | list | set)
        and not name.lstrip("_").isupper()
        and not name.startswith("__")
    }


def test_every_module_level_cache_is_known() -> None:
    found = {(m.__name__, n) for m in MODULES for n in _containers(m)}
    known = {(module.__name__, name) for module, name in fresh_caches.CONTAINERS}
    assert found == known | {("crond.when.timeline", "_last_seconds")}


def test_clear_empties_every_cache() -> None:
    ny = ZoneInfo("America/New_York")
    expr = cronparse.parse_cron("30 2 * * *")
    after = datetime(2026, 3, 1, tzinfo=UTC)
    timing.CronTiming(expr, ny).next_after(after)
    notes.dst_warnings(expr, ny, after)
    zones.get_zone("Europe/Berlin")
    caches = [
        value
        for module in MODULES
        for value in vars(module).values()
        if isinstance(value, functools._lru_cache_wrapper)
    ]
    assert len(caches) >= 10
    assert any(cache.cache_info().currsize for cache in caches)
    fresh_caches.clear()
    assert [cache.cache_info().currsize for cache in caches] == [0] * len(caches)
    for module, name in fresh_caches.CONTAINERS:
        assert not getattr(module, name), name
    assert timeline._last_seconds == [(None, 0)]
