"""The whole daemon in this process on a FakeClock: the real `Daemon` (its loop, store,
heartbeat, steering, notifications) and real child processes, with time moved by the test
instead of slept through. Hours of schedule take well under a second; what these check
was before only seen with the real binary and real waits (tests/e2e/).
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from structlog.typing import FilteringBoundLogger

from crond.clock import FakeClock
from crond.config import loader
from crond.daemon import lifecycle
from crond.store import sqlite

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


class Captured:
    """A logger that keeps every event with its level and bound keys."""

    def __init__(self, events: list[dict[str, Any]] | None = None, **bound: Any) -> None:
        self.events: list[dict[str, Any]] = [] if events is None else events
        self.bound = bound
        self.changed = asyncio.Event()

    def bind(self, **kw: Any) -> Captured:
        child = Captured(self.events, **self.bound, **kw)
        child.changed = self.changed
        return child

    def _add(self, level: str, event: str, **kw: Any) -> None:
        self.events.append({"event": event, "level": level, **self.bound, **kw})
        self.changed.set()

    def info(self, event: str, **kw: Any) -> None:
        self._add("info", event, **kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._add("warning", event, **kw)

    def error(self, event: str, **kw: Any) -> None:
        self._add("error", event, **kw)

    def debug(self, event: str, **kw: Any) -> None:
        self._add("debug", event, **kw)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == name]

    async def until(self, test: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait (in real time: real processes run) until `test()` holds."""
        async with asyncio.timeout(timeout):
            while not test():
                self.changed.clear()
                await self.changed.wait()


Serving = AbstractAsyncContextManager[tuple[lifecycle.Service, Captured]]


@asynccontextmanager
async def serving(
    tmp_path: Path, text: str, clock: FakeClock, *, replica: str | None = None
) -> AsyncIterator[tuple[lifecycle.Service, Captured]]:
    path = tmp_path / "schedules.yaml"
    path.write_text(text)
    cfg, digest = loader.load_file(path, strict=True)
    log = Captured()
    options = lifecycle.Options(replica=replica, state_dir=str(tmp_path / "state"))
    daemon = lifecycle.Service(
        path, cfg, options, cast(FilteringBoundLogger, log), clock, digest=digest
    )
    task = asyncio.create_task(daemon.serve())
    try:
        await log.until(lambda: bool(log.named("daemon.started")))
        yield daemon, log
    finally:
        daemon.signals.stop(signal.SIGTERM)  # as the signal would
        clock.advance(timedelta(minutes=1))  # the drain's timers, if any
        await asyncio.wait_for(task, 20)


async def settle(
    daemon: lifecycle.Service, clock: FakeClock, until: datetime, step: timedelta
) -> None:
    """Move time to `until` in steps, letting the daemon's loop run between them and the
    runs each step started end (real processes, in real time) before the next."""
    while clock.now() < until:
        clock.advance(min(step, until - clock.now()))
        for _ in range(20):
            await asyncio.sleep(0)
        await asyncio.wait_for(daemon.loop.idle.wait(), 10)


async def test_a_pause_for_ends_by_itself_at_its_end_on_the_clock(tmp_path: Path) -> None:
    """`crond pause --for 10m`: the slots of the ten minutes are passed over, the pause
    ends by itself at its end (job.resumed, by null), and the next slot runs."""
    clock = FakeClock(T0)
    text = "jobs:\n  m: {every: 1m, command: 'true'}\n"
    async with serving(tmp_path, text, clock) as (daemon, log):
        daemon.loop.pause("m", T0 + timedelta(minutes=10, seconds=30))
        await settle(daemon, clock, T0 + timedelta(minutes=10, seconds=31), timedelta(seconds=20))
        await log.until(lambda: bool(log.named("job.resumed")))
        assert log.named("job.started") == []
        assert [(e["job"], e["by"], e["skipped"]) for e in log.named("job.resumed")] == [
            ("m", None, 10)
        ]
        await settle(daemon, clock, T0 + timedelta(minutes=11), timedelta(seconds=20))
        await log.until(lambda: bool(log.named("job.finished")))
        started = log.named("job.started")
        assert [e["slot"] for e in started] == ["2026-03-01T12:11:00Z"]


async def test_after_three_hours_down_a_catch_up_job_runs_its_latest_slot_once(
    tmp_path: Path,
) -> None:
    """The store says the job's last slot was three hours ago: the daemon, started now,
    runs the latest missed slot at once as a catch-up (job.caught_up, skipped 2), then
    goes on with the schedule — without a single real sleep."""
    store = sqlite.SqliteStore(tmp_path / "state")
    store.update_view([], [("h", T0 - timedelta(hours=3))])
    store.close()
    clock = FakeClock(T0 + timedelta(minutes=5))
    text = "jobs:\n  h: {every: 1h, grace: 1m, catchup: latest, command: 'true'}\n"
    async with serving(tmp_path, text, clock) as (daemon, log):
        await log.until(lambda: bool(log.named("job.finished")))
        assert [(e["slot"], e["skipped"]) for e in log.named("job.caught_up")] == [
            ("2026-03-01T12:00:00Z", 2)
        ]
        await settle(daemon, clock, T0 + timedelta(hours=2, seconds=1), timedelta(minutes=10))
        await log.until(lambda: len(log.named("job.finished")) == 3)
        assert [e["slot"] for e in log.named("job.started")] == [
            "2026-03-01T12:00:00Z",
            "2026-03-01T13:00:00Z",
            "2026-03-01T14:00:00Z",
        ]


async def test_the_liveness_goes_stale_while_the_loop_does_not_beat(tmp_path: Path) -> None:
    """/healthz and `crond health` judge by the last beat: with the loop held (time moved
    on and the loop not let run), it is stale after three heartbeats and a second; at the
    loop's next turn it beats, and it is fresh again — on the clock, no real waiting."""
    clock = FakeClock(T0)
    liveness = tmp_path / "live.json"
    text = (
        f"daemon: {{heartbeat: 2s, liveness_file: {liveness}}}\n"
        "jobs:\n  h: {every: 1h, command: 'true'}\n"
    )
    async with serving(tmp_path, text, clock) as (daemon, _):
        await settle(daemon, clock, T0 + timedelta(seconds=4), timedelta(seconds=1))
        assert daemon.heartbeat.fresh()
        clock.advance(timedelta(seconds=6))  # three heartbeats: still within the second
        assert daemon.heartbeat.fresh()
        clock.advance(timedelta(seconds=2))  # the loop held past 3 x 2 s + 1 s: stale
        assert not daemon.heartbeat.fresh()
        written = json.loads(liveness.read_text())["updated_at"]
        for _ in range(20):  # the loop's turn: it wakes, beats, writes the file
            await asyncio.sleep(0)
        assert daemon.heartbeat.fresh()
        assert json.loads(liveness.read_text())["updated_at"] > written


async def test_a_calendar_job_fires_on_the_days_next_shows_and_no_others(
    tmp_path: Path,
) -> None:
    """The payroll of docs/schedules.md (the last business day of the month in Bavaria,
    never between Christmas and New Year) over ten weeks of the daemon's own time: it
    starts the job exactly at the fires its timing gives `crond next` (the same rules,
    checked against a day-by-day oracle in tests/when/test_calendar_oracle.py)."""
    start = datetime(2026, 12, 20, tzinfo=UTC)
    end = datetime(2027, 3, 1, tzinfo=UTC)
    text = (
        "calendars:\n"
        "  bavaria: {holidays: DE, subdiv: BY}\n"
        "  year-end: {dates: [12-24..12-31]}\n"
        "  business-days: {weekdays: mon-fri, except: [bavaria, year-end]}\n"
        "jobs:\n"
        "  payroll: {cron: '0 9 * * *', days: business-days, nth_day: -1, command: 'true'}\n"
    )
    clock = FakeClock(start)
    async with serving(tmp_path, text, clock) as (daemon, log):
        shown = []
        timing = daemon.cfg.jobs["payroll"].make_timing()
        fire = timing.next_after(start)
        while fire is not None and fire.at < end:
            shown.append(fire.at.strftime("%Y-%m-%dT%H:%M:%SZ"))
            fire = timing.next_after(fire.at)
        while clock.now() < end:  # to each wake the core asks for (a slot: on time)
            wake = daemon.loop.core.wake_at(clock.lead) or end
            await settle(daemon, clock, min(max(wake, clock.now()), end), timedelta(hours=6))
            await settle(daemon, clock, min(clock.now() + timedelta(seconds=1), end), SECOND)
        started = [e["slot"] for e in log.named("job.started")]
        assert log.named("job.missed") == []
    assert shown == ["2026-12-23T09:00:00Z", "2027-01-29T09:00:00Z", "2027-02-26T09:00:00Z"]
    assert started == shown
