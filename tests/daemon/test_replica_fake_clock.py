"""A replica's timeout on a FakeClock: the whole daemon in this process as replica r1 of a
real PostgreSQL database (tests/pg/), beside a replica r2 that the test plays with a store
of its own and then leaves silent. Half a minute of cluster time takes a fraction of a
second; tests/e2e/test_replicas*.py see the same with the real binary and real waits.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from crond.clock import FakeClock
from crond.daemon import lifecycle
from crond.store.postgres import PostgresStore
from tests.daemon.test_daemon_fake_clock import Serving, serving

SECOND = timedelta(seconds=1)


async def beats(daemon: lifecycle.Service, clock: FakeClock, until: datetime) -> None:
    """Move time to `until` a heartbeat (5 s) at a time, letting each beat's queries (on
    the store's own thread, in real time) come back before the next: a beat is skipped
    while the one before is still asking the database."""
    while clock.now() < until:
        clock.advance(min(5 * SECOND, until - clock.now()))
        await asyncio.sleep(0.05)
        beating = daemon.cluster._beating if daemon.cluster is not None else None
        if beating is not None:
            await asyncio.wait_for(asyncio.shield(beating), 5)


def replica(tmp_path: Path, pg_url: str, clock: FakeClock) -> Serving:
    """The whole daemon in this process as replica r1 (`serving`)."""
    return serving(
        tmp_path,
        (
            "daemon:\n"
            f"  database: {pg_url!r}\n"
            "  heartbeat: 5s\n"
            "  replica_timeout: 30s\n"
            "jobs:\n"
            "  nightly: {cron: '0 3 * * *', command: 'true'}\n"
        ),
        clock,
        replica="r1",
    )


async def test_a_replica_silent_past_replica_timeout_has_its_run_marked_lost_once(
    tmp_path: Path, pg_url: str
) -> None:
    # The cluster's time is the replicas' clocks': r1's is the FakeClock, started at the
    # database's own now so that r2's registration (the database's time) is comparable.
    t0 = datetime.now(UTC).replace(microsecond=0)
    clock = FakeClock(t0)
    other = PostgresStore.open(pg_url, cluster="default", replica="r2")
    try:
        other.beat(t0)
        other.start("nightly", run_id="r2-run", slot=t0 - SECOND, attempt=1, started=t0, cursor=t0)
        async with replica(tmp_path, pg_url, clock) as (daemon, log):
            # Within the timeout (30 s) of r2's last beat: its run is going, not lost.
            await beats(daemon, clock, t0 + 25 * SECOND)
            assert log.named("job.lost") == []
            # Past it: r1's next beat marks the run lost, once.
            await beats(daemon, clock, t0 + 45 * SECOND)
            await log.until(lambda: bool(log.named("job.lost")))
            await beats(daemon, clock, t0 + 70 * SECOND)
            lost = log.named("job.lost")
            assert [(e["job"], e["run_id"], e["replica"]) for e in lost] == [
                ("nightly", "r2-run", "r2")
            ]
        rows = [r for r in other.open_runs() if r.run_id == "r2-run"]
        assert rows == []  # closed in the store too
    finally:
        other.close()
