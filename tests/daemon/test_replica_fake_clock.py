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


async def test_a_replica_frozen_between_its_claim_and_the_spawn_does_not_start_the_run(
    tmp_path: Path, pg_url: str
) -> None:
    # The run is claimed, then r1 stands still past its fencing threshold (replica_timeout
    # 30 s less a heartbeat) before the spawn, as SIGSTOP does: the others may have closed
    # the run as lost and run the next slot meanwhile. Thawed, r1 starts nothing of it.
    marker = tmp_path / "ran"
    text = (
        "daemon:\n"
        f"  database: {pg_url!r}\n"
        "  heartbeat: 5s\n"
        "  replica_timeout: 30s\n"
        "jobs:\n"
        f"  each: {{every: 1m, command: 'echo $CROND_SLOT >> {marker}'}}\n"
    )
    t0 = datetime.now(UTC).replace(second=30, microsecond=0)
    clock = FakeClock(t0)
    async with serving(tmp_path, text, clock, replica="r1") as (daemon, log):
        claim = daemon.spawner.claim
        frozen: list[datetime] = []

        async def claim_then_freeze(starts, told, at, *, counted=False):  # type: ignore[no-untyped-def]
            claims = await claim(starts, told, at, counted=counted)
            if starts and not frozen:
                frozen.append(at)
                clock.advance(40 * SECOND)  # nothing of r1 ran meanwhile
            return claims

        daemon.spawner.claim = claim_then_freeze  # type: ignore[method-assign]
        await beats(daemon, clock, t0 + 35 * SECOND)
        await log.until(lambda: bool(log.named("job.finished")))
        started, ended = log.named("job.started")[0], log.named("job.finished")[0]
        assert started["slot"] == frozen[0].isoformat().replace("+00:00", "Z")
        assert started["pid"] is None
        assert (ended["run_id"], ended["outcome"], ended["exit_code"]) == (
            started["run_id"],
            "killed",
            None,
        )
        said = [e["line"] for e in log.named("job.output")]
        assert said[0].startswith("crond: not started: this replica went 40.0s without")
        assert not marker.exists()
        # Proved alive again (its next beat), r1 starts its next slots as before.
        await beats(daemon, clock, t0 + 3 * 60 * SECOND)
        await log.until(lambda: marker.exists() and len(log.named("job.finished")) >= 2)
        assert all(e["outcome"] == "success" for e in log.named("job.finished")[1:])
    store = PostgresStore.open(pg_url, cluster="default", replica="check")
    try:
        rows = store.recent("each", 10)
    finally:
        store.close()
    outcome = {r.slot: r.outcome for r in rows}
    assert outcome[frozen[0]] == "killed"
