"""`max_runs` across replicas, with the whole daemon in this process as replica r1 of a
real PostgreSQL database (tests/pg/) on a FakeClock, beside a replica r2 the test plays
with a store of its own: the count is the cluster's, kept in the database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from crond.clock import FakeClock
from crond.store import base
from crond.store.postgres import PostgresStore
from tests.daemon.test_daemon_fake_clock import Captured, Serving, serving

SECOND = timedelta(seconds=1)


def replica(tmp_path: Path, pg_url: str, clock: FakeClock) -> Serving:
    """The whole daemon in this process as replica r1 (`serving`)."""
    return serving(
        tmp_path,
        (
            f"daemon: {{database: {pg_url!r}, heartbeat: 5s}}\n"
            # overlap: allow: the runs r2 claims stay open here, which `skip` would wait for
            "jobs:\n  m: {every: 10s, max_runs: 3, overlap: allow, command: 'true'}\n"
        ),
        clock,
        replica="r1",
    )


def _claim(store: PostgresStore, slots: list[datetime]) -> list[base.Claim]:
    starts = [base.Start("m", f"r2-{s:%S}", s) for s in slots]
    return store.claim(starts, (), slots[0], limits={"m": 3}).starts


async def _step(clock: FakeClock, log: Captured, seconds: int) -> None:
    for _ in range(seconds):
        clock.advance(SECOND)
        await asyncio.sleep(0.02)


async def test_a_replica_starts_only_what_the_cluster_has_left(tmp_path: Path, pg_url: str) -> None:
    t0 = datetime.now(UTC).replace(microsecond=0)
    t0 -= timedelta(seconds=t0.second % 10) - 5 * SECOND  # 5 s before a slot of every 10s
    other = PostgresStore.open(pg_url, cluster="default", replica="r2")
    try:
        # r2 ran two of the three before r1 starts
        assert all(isinstance(c, int) for c in _claim(other, [t0 - 25 * SECOND, t0 - 15 * SECOND]))
        other.close()
        clock = FakeClock(t0)
        async with replica(tmp_path, pg_url, clock) as (daemon, log):
            await _step(clock, log, 40)
            await log.until(lambda: len(log.named("job.finished")) == 1)
            assert len(log.named("job.started")) == 1  # the third, then nothing more
            assert daemon.loop.core.schedule.entries["m"].next_fire is None
    finally:
        other.close()
    check = PostgresStore.open(pg_url, cluster="default", replica="r3")
    try:
        assert check.run_counts() == {"m": 3}
    finally:
        check.close()


async def test_a_claim_past_the_clusters_count_is_refused_and_ends_the_job(
    tmp_path: Path, pg_url: str
) -> None:
    t0 = datetime.now(UTC).replace(microsecond=0)
    t0 -= timedelta(seconds=t0.second % 10) - 5 * SECOND
    clock = FakeClock(t0)
    async with replica(tmp_path, pg_url, clock) as (daemon, log):
        other = PostgresStore.open(pg_url, cluster="default", replica="r2")
        try:  # meanwhile r2 runs all three (r1 loaded a count of 0)
            slots = [t0 - 100 * SECOND, t0 - 90 * SECOND, t0 - 80 * SECOND]
            assert all(isinstance(c, int) for c in _claim(other, slots))
        finally:
            other.close()
        await _step(clock, log, 30)
        for _ in range(100):  # the claim's answer comes from the store's thread
            if daemon.loop.core.schedule.entries["m"].next_fire is None:
                break
            await asyncio.sleep(0.05)
        assert daemon.loop.core.schedule.entries["m"].next_fire is None, log.events
        assert log.named("job.started") == []
