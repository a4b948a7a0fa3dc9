"""Backfills in the whole daemon on a FakeClock (tests/daemon/test_daemon_fake_clock.py's
harness), with real child processes: a scheduled slot that comes while a backfill's run
goes obeys the job's overlap, and the backfill goes on after it; a reload that removes
the job cancels its backfill; without a state store a backfill runs all the same; the
refusals."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

from crond.clock import FakeClock
from crond.daemon.backfilling import Backfilling
from crond.schedule.backfills import Backfill
from crond.store import sqlite
from tests.daemon.test_daemon_fake_clock import T0, serving

BY = {"uid": 0, "user": "root", "pid": 1}
HOUR_AGO = T0 - timedelta(hours=1)


def gated(out: Path, go: Path) -> str:
    """A job that stamps its slot, then waits (in real time) for the file `go`."""
    return (
        "jobs:\n"
        "  stamp:\n"
        "    cron: '* * * * *'\n"
        f"    command: 'echo $CROND_SLOT >> {out}; while [ ! -e {go} ]; do sleep 0.02; done'\n"
        "  other: {every: 1h, command: 'true'}\n"
    )


def slots(minutes: int) -> tuple[datetime, datetime]:
    return HOUR_AGO, HOUR_AGO + timedelta(minutes=minutes)


async def begin(filling: Backfilling, job: str, minutes: int) -> Backfill:
    got = await filling.begin(filling.loop.core.schedule.entries[job].job, *slots(minutes), BY)
    assert isinstance(got, Backfill), got
    return got


async def test_a_scheduled_slot_beside_a_backfill_run_is_skipped_and_it_goes_on(
    tmp_path: Path,
) -> None:
    out, go = tmp_path / "stamps", tmp_path / "go"
    clock = FakeClock(T0 + timedelta(seconds=10))
    async with serving(tmp_path, gated(out, go), clock) as (daemon, log):
        await begin(daemon.steering.backfilling, "stamp", 2)
        await log.until(lambda: bool(log.named("job.started")))
        clock.advance(timedelta(minutes=1))  # 12:01: stamp's own slot, its backfill run going
        await log.until(lambda: bool([e for e in log.named("job.skipped") if e["job"] == "stamp"]))
        skipped = [e for e in log.named("job.skipped") if e["job"] == "stamp"]
        assert (skipped[0]["slot"], skipped[0]["reason"]) == ("2026-03-01T12:01:00Z", "overlap")
        go.touch()
        await log.until(lambda: bool(log.named("backfill.finished")))
        (done,) = log.named("backfill.finished")
        assert (done["succeeded"], done["failed"], done["slots"]) == (2, 0, 2)
    assert out.read_text().split() == ["2026-03-01T11:00:00Z", "2026-03-01T11:01:00Z"]


async def test_a_reload_that_removes_the_job_cancels_its_backfill(tmp_path: Path) -> None:
    out, go = tmp_path / "stamps", tmp_path / "go"
    clock = FakeClock(T0 + timedelta(seconds=10))
    async with serving(tmp_path, gated(out, go), clock) as (daemon, log):
        backfill = await begin(daemon.steering.backfilling, "stamp", 5)
        await log.until(lambda: bool(log.named("job.started")))
        (tmp_path / "schedules.yaml").write_text("jobs:\n  other: {every: 1h, command: 'true'}\n")
        daemon.signals.hup()
        await log.until(lambda: bool(log.named("config.reloaded")))
        assert not log.named("job.finished")  # a reload never stops a run
        go.touch()
        await log.until(lambda: bool(log.named("backfill.cancelled")))
        (cancelled,) = log.named("backfill.cancelled")
        assert (cancelled["backfill_id"], cancelled["reason"]) == (backfill.id, "removed")
        await log.until(lambda: bool(log.named("job.finished")))
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(log.named("job.started")) == 1  # no next slot
    assert out.read_text().split() == ["2026-03-01T11:00:00Z"]
    store = sqlite.SqliteStore(tmp_path / "state")
    try:
        assert [(r.state, r.started) for r in store.backfills(going=False)] == [("cancelled", 1)]
    finally:
        store.close()


async def test_without_a_state_store_a_backfill_runs_all_the_same(tmp_path: Path) -> None:
    out, go = tmp_path / "stamps", tmp_path / "go"
    go.touch()
    text = "daemon: {state_dir: none}\n" + gated(out, go)
    clock = FakeClock(T0 + timedelta(seconds=10))
    async with serving(tmp_path, text, clock) as (daemon, log):
        await begin(daemon.steering.backfilling, "stamp", 3)
        await log.until(lambda: bool(log.named("backfill.finished")))
    assert out.read_text().split() == [f"2026-03-01T11:0{m}:00Z" for m in range(3)]


async def test_refusals_say_why(tmp_path: Path) -> None:
    clock = FakeClock(T0 + timedelta(seconds=10))
    async with serving(tmp_path, gated(tmp_path / "out", tmp_path / "go"), clock) as (daemon, _):
        filling = daemon.steering.backfilling
        job = daemon.cfg.jobs["stamp"]
        late = HOUR_AGO + timedelta(seconds=10)
        for start, end, said in [
            (HOUR_AGO, HOUR_AGO, "--to (2026-03-01T11:00:00Z) must be after --from"),
            (late, late + timedelta(seconds=40), "stamp has no slot in [2026-03-01T11:00:10Z"),
            (T0 - timedelta(days=8), T0, "more than 10,000 slots in"),
            (HOUR_AGO, T0 + timedelta(minutes=1), "is in the future"),
        ]:
            got = await filling.begin(job, start, end, BY)
            assert isinstance(got, str)
            assert said in got
        await begin(filling, "stamp", 2)
        again = await filling.begin(job, *slots(2), BY)
        assert isinstance(again, str)
        assert again.startswith("a backfill of stamp is already going (")
