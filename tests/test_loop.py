"""The scheduling loop on a fake clock: days of schedule in milliseconds, no sleeping.

Runs here are stand-ins the test finishes by hand: this tests *when* the loop starts
runs, not how they run (test_runner.py and tests/e2e do that with real processes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from structlog.typing import FilteringBoundLogger

from crond import config
from crond.clock import FakeClock
from crond.config import Job
from crond.loop import Loop

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


class Events:
    """A logger that keeps (event, fields) pairs."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []

    def _add(self, event: str, **kw: Any) -> None:
        self.items.append((event, kw))

    info = warning = error = debug = _add

    def named(self, event: str) -> list[dict[str, Any]]:
        return [kw for name, kw in self.items if name == event]


@dataclass(eq=False)
class FakeRun:
    job: str
    slot: datetime
    run_id: str
    done: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: bool = False

    async def wait(self) -> object:
        await self.done.wait()
        return None

    def stop(self) -> None:
        self.stopped = True
        self.done.set()

    def kill(self) -> None:
        self.stop()


@dataclass
class Harness:
    clock: FakeClock
    loop: Loop
    events: Events
    runs: list[FakeRun]
    finish_at_once: bool = True

    async def settle(self) -> None:
        """Let the loop and the tasks it started run until the loop sleeps again."""
        for i in range(200):
            await asyncio.sleep(0)
            wake = self.clock.next_wake()
            if i >= 10 and wake is not None and wake > self.clock.now():
                return
        raise AssertionError("the loop did not go back to sleep")

    async def run_until(self, when: datetime) -> None:
        """Move time forward wake by wake, as a real clock would, up to `when`."""
        await self.settle()
        while True:
            wake = self.clock.next_wake()
            assert wake is not None
            if wake > when:
                self.clock.set(when)
                await self.settle()
                return
            self.clock.set(wake)
            await self.settle()

    def starts(self, job: str | None = None) -> list[datetime]:
        return [r.slot for r in self.runs if job is None or r.job == job]


def jobs(text: str) -> dict[str, Job]:
    return dict(config.loads(text).jobs)


@asynccontextmanager
async def harness(
    text: str, *, start: datetime = T0, heartbeat: float = 10.0, finish_at_once: bool = True
) -> AsyncIterator[Harness]:
    clock = FakeClock(start)
    events = Events()
    runs: list[FakeRun] = []
    h: Harness

    def launch(job: Job, slot: datetime) -> FakeRun:
        run = FakeRun(job.name, slot, f"r{len(runs)}")
        runs.append(run)
        if h.finish_at_once:
            run.done.set()
        return run

    beats: list[datetime] = []
    loop = Loop(
        clock=clock,
        log=cast(FilteringBoundLogger, events),
        launch=launch,
        heartbeat=timedelta(seconds=heartbeat),
        beat=beats.append,
    )
    h = Harness(clock, loop, events, runs, finish_at_once)
    loop.load(jobs(text))
    task = asyncio.create_task(loop.run())
    try:
        yield h
    finally:
        loop.stop()
        for run in runs:
            run.done.set()
        clock.advance(timedelta(days=1))
        await asyncio.wait_for(task, 5)


async def test_three_days_of_hourly_and_minutely_jobs() -> None:
    text = "jobs:\n  h: {cron: '0 * * * *', command: x}\n  m: {every: 1m, command: x}\n"
    async with harness(text, heartbeat=3600) as h:
        await h.run_until(T0 + timedelta(days=3))
        hourly = h.starts("h")
        assert hourly == [T0 + timedelta(hours=i) for i in range(1, 73)]
        assert h.starts("m") == [T0 + timedelta(minutes=i) for i in range(1, 3 * 24 * 60 + 1)]
        assert h.events.named("job.missed") == []


async def test_nothing_fires_for_slots_before_start() -> None:
    start = T0 + timedelta(seconds=30)
    async with harness("jobs:\n  m: {every: 1m, command: x}\n", start=start) as h:
        await h.run_until(T0 + timedelta(minutes=2, seconds=1))
        assert h.starts() == [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]


async def test_clock_step_back_never_runs_a_slot_twice() -> None:
    async with harness("jobs:\n  m: {every: 1m, command: x}\n") as h:
        await h.run_until(T0 + timedelta(minutes=10, seconds=1))
        h.clock.set(T0 + timedelta(minutes=2))  # an NTP step back of eight minutes
        await h.settle()
        await h.run_until(T0 + timedelta(minutes=13, seconds=1))
        assert h.starts() == [T0 + timedelta(minutes=i) for i in range(1, 14)]


async def test_suspend_runs_one_slot_and_logs_one_missed_event() -> None:
    text = "jobs:\n  s: {every: 1s, grace: 5s, command: x}\n"
    async with harness(text, heartbeat=1) as h:
        await h.run_until(T0 + timedelta(seconds=3))
        h.clock.set(T0 + timedelta(hours=1, seconds=3, milliseconds=200))  # resume
        await h.settle()
        assert h.starts()[-1] == T0 + timedelta(hours=1, seconds=3)
        missed = h.events.named("job.missed")
        assert len(missed) == 1
        assert missed[0]["count"] == 3599
        assert missed[0]["first_slot"] == "2026-03-01T12:00:04Z"
        assert missed[0]["last_slot"] == "2026-03-01T13:00:02Z"


async def test_overlap_skip_logs_skipped_while_running() -> None:
    text = "jobs:\n  o: {every: 1m, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        await h.run_until(T0 + timedelta(minutes=3, seconds=1))
        assert h.starts() == [T0 + timedelta(minutes=1)]
        skipped = h.events.named("job.skipped")
        assert [s["slot"] for s in skipped] == ["2026-03-01T12:02:00Z", "2026-03-01T12:03:00Z"]
        assert {s["reason"] for s in skipped} == {"overlap"}
        h.runs[0].done.set()
        await h.run_until(T0 + timedelta(minutes=4, seconds=1))
        assert h.starts()[-1] == T0 + timedelta(minutes=4)


async def test_overlap_replace_stops_the_old_run_first() -> None:
    text = "jobs:\n  r: {every: 1m, overlap: replace, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        await h.run_until(T0 + timedelta(minutes=2, seconds=1))
        assert h.runs[0].stopped
        assert h.starts() == [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]


async def test_overlap_allow_runs_side_by_side() -> None:
    text = "jobs:\n  a: {every: 1m, overlap: allow, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        await h.run_until(T0 + timedelta(minutes=3, seconds=1))
        assert len(h.starts()) == 3
        assert h.loop.running_count() == 3


async def test_disabled_job_never_fires() -> None:
    async with harness("jobs:\n  d: {every: 1m, enabled: false, command: x}\n") as h:
        await h.run_until(T0 + timedelta(hours=1))
        assert h.starts() == []


async def test_reload_keeps_unchanged_state_and_adds_without_backfill() -> None:
    text = "jobs:\n  keep: {every: 1m, command: x}\n  change: {every: 1m, command: x}\n"
    async with harness(text) as h:
        await h.run_until(T0 + timedelta(minutes=2, seconds=30))
        keep_entry = h.loop.schedule.entries["keep"]
        diff = h.loop.load(
            jobs(
                "jobs:\n  keep: {every: 1m, command: x}\n  change: {every: 2m, command: y}\n"
                "  new: {every: 1m, command: z}\n"
            )
        )
        assert (diff.added, diff.removed, diff.changed) == (["new"], [], ["change"])
        assert h.loop.schedule.entries["keep"] is keep_entry
        await h.run_until(T0 + timedelta(minutes=4, seconds=1))
        assert h.starts("new") == [T0 + timedelta(minutes=3), T0 + timedelta(minutes=4)]
        assert h.starts("change")[-1] == T0 + timedelta(minutes=4)
        diff = h.loop.load(jobs("jobs:\n  keep: {every: 1m, command: x}\n"))
        assert sorted(diff.removed) == ["change", "new"]


async def test_heartbeat_called_each_heartbeat_even_with_nothing_due() -> None:
    beats: list[datetime] = []
    async with harness("jobs:\n  y: {cron: '0 0 1 1 *', command: x}\n", heartbeat=10) as h:
        h.loop.beat = beats.append
        await h.run_until(T0 + timedelta(minutes=1))
        assert 5 <= len(beats) <= 7


@pytest.mark.parametrize("zone", ["America/New_York", "Europe/London"])
async def test_dst_night_fixed_time_job_fires_once(zone: str) -> None:
    start = datetime(2026, 10, 31, 12, tzinfo=UTC)
    text = f"jobs:\n  f: {{cron: '30 1 * * *', timezone: {zone}, command: x}}\n"
    async with harness(text, start=start, heartbeat=3600) as h:
        await h.run_until(start + timedelta(days=8))
        days = [s.date() for s in h.starts()]
        assert len(days) == len(set(days)) == 8
