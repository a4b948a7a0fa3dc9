"""SystemClock.sleep_until on the real clock: never early, and about on time.

The bounds on lateness are loose (a shared machine can stall any process for a while);
the benchmarks measure the real figure (bench/bench_lag.py).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from crond.clock import SystemClock


async def test_sleep_until_never_returns_before_the_instant() -> None:
    clock = SystemClock()
    for seconds in (0.0005, 0.003, 0.05, 0.2):
        when = clock.now() + timedelta(seconds=seconds)
        await clock.sleep_until(when)
        assert clock.now() >= when


async def test_sleep_until_returns_about_on_time() -> None:
    clock = SystemClock()
    lates = []
    for _ in range(5):
        when = clock.now() + timedelta(seconds=0.05)
        await clock.sleep_until(when)
        lates.append((clock.now() - when).total_seconds())
    # The event loop's own timers alone are up to 1 ms late; the median is well below.
    assert sorted(lates)[2] < 0.02


async def test_sleep_until_never_blocks_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """However little is left, sleep_until awaits it: the blocking wait at a slot is the
    loop's own (`block_until`, through its gate), never hidden in a sleep."""
    clock = SystemClock()

    def blocking(seconds: float) -> None:
        raise AssertionError(f"time.sleep({seconds}) blocked the event loop")

    monkeypatch.setattr(time, "sleep", blocking)
    for seconds in (0.0002, 0.0015, 0.0025, 0.02):
        when = clock.now() + timedelta(seconds=seconds)
        await clock.sleep_until(when)
        assert clock.now() >= when


async def test_other_tasks_run_while_sleep_until_waits() -> None:
    clock = SystemClock()
    ticks = 0

    async def count() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    counter = asyncio.create_task(count())
    await clock.sleep_until(clock.now() + timedelta(seconds=0.2))
    counter.cancel()
    assert ticks > 20  # the loop ran all along (about one tick a millisecond)


async def test_a_past_instant_returns_at_once() -> None:
    clock = SystemClock()
    began = time.monotonic()
    await clock.sleep_until(clock.now() - timedelta(seconds=5))
    assert time.monotonic() - began < 0.05


def test_block_until_returns_at_the_instant_never_before() -> None:
    clock = SystemClock()
    for seconds in (0.0, 0.0003, 0.001, 0.0019):
        when = clock.now() + timedelta(seconds=seconds)
        clock.block_until(when)
        assert clock.now() >= when


def test_block_until_blocks_no_longer_than_the_lead() -> None:
    """A target far off (a wall clock stepped back under the caller) must not hold the
    loop: the wait is bounded by `lead` on the monotonic clock."""
    clock = SystemClock()
    began = time.monotonic()
    clock.block_until(clock.now() + timedelta(hours=1))
    assert time.monotonic() - began < clock.lead.total_seconds() + 0.05
