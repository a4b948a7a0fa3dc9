"""`catchup: all` and `overlap: queue` in the whole daemon on a FakeClock (the real
`Daemon`, its SQLite store and real child processes; time moved by the test): hours of
downtime caught up oldest first, one at a time, and once across a restart in the middle
of the catch-up; a queued run started when the long one ends."""

from __future__ import annotations

import asyncio
import signal
from datetime import timedelta
from pathlib import Path

from crond.clock import FakeClock
from crond.store import sqlite
from tests.daemon.test_daemon_fake_clock import T0, serving


def _kept_cursor(tmp_path: Path, job: str, at: timedelta) -> None:
    store = sqlite.SqliteStore(tmp_path / "state")
    store.update_view([], [(job, T0 + at)])
    store.close()


def _held(job: str, release: Path) -> str:
    """A file of one job (`job`: its mapping's start) whose runs each go on until the
    test makes `release`, and take it away as they end: one release, one run's end."""
    command = f"while [ ! -e {release} ]; do sleep 0.01; done; rm -f {release}"
    return f"jobs:\n  {job}, command: '{command}'}}\n"


HOURLY = "jobs:\n  h: {every: 1h, grace: 1m, catchup: all, command: 'true'}\n"


async def test_after_three_hours_down_catchup_all_runs_each_hour_oldest_first(
    tmp_path: Path,
) -> None:
    _kept_cursor(tmp_path, "h", -timedelta(hours=3))  # its last slot was 09:00
    clock = FakeClock(T0 + timedelta(minutes=5))  # started at 12:05: 10, 11, 12 missed
    async with serving(tmp_path, HOURLY, clock) as (_, log):
        await log.until(lambda: len(log.named("job.finished")) == 3)
        caught = log.named("job.caught_up")
        assert [(e["slot"], e["slots"], e["last_slot"]) for e in caught] == [
            ("2026-03-01T10:00:00Z", 3, "2026-03-01T12:00:00Z")
        ]
        order = [
            (e["event"], e.get("slot"))
            for e in log.events
            if e["event"] in {"job.started", "job.finished"}
        ]
        slots = ["2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z", "2026-03-01T12:00:00Z"]
        assert [s for name, s in order if name == "job.started"] == slots
        names = [name for name, _ in order]  # one at a time: each ends before the next
        assert names == ["job.started", "job.finished"] * 3
        assert log.named("job.missed") == []


async def test_a_restart_in_the_middle_of_a_catch_up_runs_each_slot_once(
    tmp_path: Path,
) -> None:
    _kept_cursor(tmp_path, "h", -timedelta(hours=3))
    release = tmp_path / "release"
    text = _held("h: {every: 1h, grace: 1m, catchup: all", release)
    clock = FakeClock(T0 + timedelta(minutes=5))
    async with serving(tmp_path, text, clock) as (daemon, log):
        await log.until(lambda: len(log.named("job.started")) == 1)
        release.touch()
        await log.until(lambda: len(log.named("job.started")) == 2)
        first = [e["slot"] for e in log.named("job.started")]
        # the daemon stops now, with 11:00 running and 12:00 waiting: 11:00 is stopped
        daemon.signals.stop(signal.SIGTERM)
        await log.until(lambda: bool(log.named("daemon.stopping")))
        daemon.loop.kill("h")
        await log.until(lambda: len(log.named("job.finished")) == 2)
    assert [e["outcome"] for e in log.named("job.finished")] == ["success", "killed"]
    assert len(log.named("job.started")) == 2  # a stopping daemon starts nothing more
    assert first == ["2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z"]
    release.touch()
    clock = FakeClock(T0 + timedelta(minutes=7))
    async with serving(tmp_path, text, clock) as (_, log):
        await log.until(lambda: len(log.named("job.finished")) == 1)
        await asyncio.sleep(0.05)  # (a second start would have come with the first)
        assert [e["slot"] for e in log.named("job.started")] == ["2026-03-01T12:00:00Z"]
        assert [e["slots"] for e in log.named("job.caught_up")] == [1]


async def test_overlap_queue_buffers_one_run_of_a_job_running_two_and_a_half_intervals(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"
    text = _held("q: {every: 1m, grace: 2m, overlap: queue", release)
    clock = FakeClock(T0 + timedelta(seconds=30))
    async with serving(tmp_path, text, clock) as (_, log):
        clock.advance(timedelta(seconds=30))  # 12:01
        await log.until(lambda: len(log.named("job.started")) == 1)
        clock.advance(timedelta(minutes=1))  # 12:02: waits
        await log.until(lambda: len(log.named("job.queued")) == 1)
        clock.advance(timedelta(minutes=1))  # 12:03: one waits already: skipped
        await log.until(lambda: len(log.named("job.skipped")) == 1)
        clock.advance(timedelta(seconds=30))  # 12:03:30, 2.5 intervals: the run ends
        release.touch()
        await log.until(lambda: len(log.named("job.started")) == 2)
        assert [e["slot"] for e in log.named("job.started")] == [
            "2026-03-01T12:01:00Z",
            "2026-03-01T12:02:00Z",
        ]
        assert log.named("job.started")[1]["lag_ms"] == 90_000
        assert [(e["slot"], e["reason"]) for e in log.named("job.skipped")] == [
            ("2026-03-01T12:03:00Z", "overlap")
        ]
        assert [e["slot"] for e in log.named("job.queued")] == ["2026-03-01T12:02:00Z"]
        release.touch()
        await log.until(lambda: len(log.named("job.finished")) == 2)
