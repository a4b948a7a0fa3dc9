"""Named locks in the whole daemon on a FakeClock (tests/daemon/test_daemon_fake_clock.py's
harness): real child processes that write their own start and end times, ten minutes of
schedule in a few seconds.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from pathlib import Path

from crond.clock import FakeClock
from tests.daemon.test_daemon_fake_clock import T0, serving

# Each run appends "JOB start T" and "JOB end T" (the wall clock, nanoseconds) to a file.
RUN = "echo {job} start $(date +%s%N) >> {out}; sleep 0.05; echo {job} end $(date +%s%N) >> {out}"


def intervals(out: Path) -> list[tuple[str, int, int]]:
    """(job, start, end) of each run, from the runs' own lines."""
    opened: dict[str, int] = {}
    done = []
    for line in out.read_text().splitlines():
        job, what, ns = line.split()
        if what == "start":
            assert job not in opened, f"{job} started twice at once"
            opened[job] = int(ns)
        else:
            done.append((job, opened.pop(job), int(ns)))
    assert not opened
    return sorted(done, key=lambda run: run[1])


async def test_two_jobs_sharing_a_lock_never_overlap_for_ten_minutes(tmp_path: Path) -> None:
    """backup and vacuum are due together every minute and share `db: 1`: each minute both
    run, one after the other, never at once (from their own timestamps); the one that
    waits says so, naming the holder."""
    out = tmp_path / "runs.txt"
    text = (
        "locks: {db: 1}\njobs:\n"
        f"  backup: {{every: 1m, locks: [db], command: '{RUN.format(job='backup', out=out)}'}}\n"
        f"  vacuum: {{every: 1m, locks: [db], command: '{RUN.format(job='vacuum', out=out)}'}}\n"
    )
    clock = FakeClock(T0)
    async with serving(tmp_path, text, clock) as (daemon, log):
        loop = daemon.loop
        for minute in range(1, 11):
            clock.advance(T0 + timedelta(minutes=minute) - clock.now())
            finished = 2 * minute
            await log.until(lambda n=finished: len(log.named("job.finished")) >= n)  # type: ignore[misc]
            assert not loop.core.locks
            assert not loop.core.locks.held
        runs = intervals(out)
        waits = log.named("job.waiting")
    assert len(runs) == 20
    for (_, _, end), (_, start, _) in itertools.pairwise(runs):
        assert end <= start, "two holders of db: 1 ran at once"
    assert len(waits) == 10  # one of the two waited each minute
    for wait in waits:
        assert (wait["reason"], wait["lock"]) == ("lock", "db")
        other = {"backup": "vacuum", "vacuum": "backup"}[wait["job"]]
        assert wait["held_by"] == [f"{other}@{wait['slot']}"]
    assert all(e["outcome"] == "success" for e in log.named("job.finished"))
    assert not log.named("job.missed")


async def test_a_failed_or_killed_holder_gives_its_lock_back(tmp_path: Path) -> None:
    """The holder fails (exit 3), then is killed: each time the waiting job starts."""
    text = (
        "locks: {db: 1}\njobs:\n"
        "  first: {every: 1m, locks: [db], command: 'sleep 0.1; exit 3'}\n"
        "  second: {every: 1m, locks: [db], command: 'true'}\n"
        "  slow: {every: 10m, anchor: '2026-03-01T12:01:30Z', locks: [db], command: 'sleep 30'}\n"
        "  after-slow: {every: 10m, anchor: '2026-03-01T12:01:31Z', locks: [db], command: 'true'}\n"
    )
    clock = FakeClock(T0)
    async with serving(tmp_path, text, clock) as (daemon, log):
        clock.advance(timedelta(minutes=1))
        await log.until(lambda: len(log.named("job.finished")) >= 2)
        ends = [(e["job"], e["outcome"]) for e in log.named("job.finished")]
        assert [outcome for _, outcome in ends[:2]] == ["failed", "success"]
        clock.advance(timedelta(seconds=31))  # 12:01:31: slow holds db, after-slow waits
        await log.until(
            lambda: bool(log.named("job.waiting")) and len(log.named("job.started")) >= 3
        )
        assert log.named("job.waiting")[-1]["job"] == "after-slow"
        assert daemon.loop.kill("slow")
        await log.until(lambda: any(e["job"] == "after-slow" for e in log.named("job.finished")))
        outcomes = {e["job"]: e["outcome"] for e in log.named("job.finished")}
        assert (outcomes["slow"], outcomes["after-slow"]) == ("killed", "success")
        await asyncio.wait_for(daemon.loop.idle.wait(), 10)
        assert not daemon.loop.core.locks.held


async def test_a_timed_out_holder_gives_its_lock_back_and_a_waiter_is_missed_after_grace(
    tmp_path: Path,
) -> None:
    text = (
        "locks: {db: 1}\njobs:\n"
        "  long: {every: 1m, locks: [db], timeout: 1s, kill_after: 1s, command: 'sleep 30'}\n"
        "  short: {every: 1m, grace: 10s, locks: [db], command: 'true'}\n"
    )
    clock = FakeClock(T0)
    async with serving(tmp_path, text, clock) as (daemon, log):
        clock.advance(timedelta(minutes=1))
        await log.until(lambda: bool(log.named("job.waiting")))
        clock.advance(timedelta(seconds=11))  # short's grace is out while long holds db
        await log.until(lambda: bool(log.named("job.missed")))
        missed = log.named("job.missed")[0]
        assert (missed["job"], missed["reason"], missed["count"]) == ("short", "lock", 1)
        clock.advance(timedelta(seconds=2))  # long's timeout: TERM (it ends at once)
        await log.until(lambda: bool(log.named("job.finished")))
        assert log.named("job.finished")[0]["outcome"] == "timeout"
        await asyncio.wait_for(daemon.loop.idle.wait(), 10)
        assert not daemon.loop.core.locks.held
        assert not daemon.loop.core.locks
