"""Each replica's clock skew, kept with its heartbeat (schema 6's crond_replicas
.clock_skew_s) for the dashboard's cluster page: measured by the daemon as it measures it
for `cluster.clock_skew`, kept by the store, upgraded into an older database. The real
PostgreSQL (tests/pg/), the whole daemon in this process on a FakeClock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from crond.clock import FakeClock
from crond.store import schema_pg
from crond.store.postgres import PostgresStore
from tests.daemon.test_replica_fake_clock import beats, replica
from tests.store.test_pg_cluster import _old_schema

T0 = datetime(2026, 1, 5, 2, 0, tzinfo=UTC)


def test_a_replicas_measured_skew_is_kept_with_its_heartbeat(tmp_path: Path, pg_url: str) -> None:
    import asyncio  # noqa: PLC0415

    ahead = timedelta(seconds=7)  # r1's clock, 7 s ahead of the database's

    async def run() -> None:
        clock = FakeClock(datetime.now(UTC) + ahead)
        async with replica(tmp_path, pg_url, clock) as (daemon, log):
            await beats(daemon, clock, clock.now() + timedelta(seconds=10))
            assert daemon.cluster is not None
            measured = daemon.cluster.skew  # the FakeClock's lead: 7 s and the time moved
            assert measured is not None
            assert 6.0 < measured < 7 + 10 + 1
            warned = log.named("cluster.clock_skew")[0]["skew_s"]
            assert 6.0 < warned <= measured + 0.5
            # The next beat keeps what the last one measured.
            await beats(daemon, clock, clock.now() + timedelta(seconds=5))
            reader = PostgresStore.open(pg_url, cluster="default", replica="reader")
            try:
                (r1,) = [r for r in reader.replicas() if r.name == "r1"]
            finally:
                reader.close()
            assert r1.clock_skew_s == measured

    asyncio.run(run())


def test_the_store_keeps_a_skew_until_a_beat_measures_another(pg_url: str) -> None:
    store = PostgresStore.open(pg_url, cluster="c", replica="r1")
    try:
        assert [r.clock_skew_s for r in store.replicas()] == [None]  # not measured yet
        store.beat(T0, -1.25)
        assert [r.clock_skew_s for r in store.replicas()] == [-1.25]
        store.beat(T0 + timedelta(seconds=1))  # a claim's beat: measures nothing
        assert [r.clock_skew_s for r in store.replicas()] == [-1.25]
        store.beat(T0 + timedelta(seconds=2), 0.004)
        assert [r.clock_skew_s for r in store.replicas()] == [0.004]
    finally:
        store.close()


def test_a_schema_5_database_gains_the_column_and_the_follows(pg_url: str) -> None:
    _old_schema(pg_url, 5)
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            "INSERT INTO crond_replicas (cluster, name, pid, host, started, last_beat, version)"
            " VALUES ('c', 'old', 1, 'h', now(), now(), '0')"
        )
    store = PostgresStore.open(pg_url, cluster="c", replica="r1")
    try:
        store.beat(T0, 0.5)
        assert {r.name: r.clock_skew_s for r in store.replicas()} == {"old": None, "r1": 0.5}
        assert store.poll(0).watched == frozenset()  # crond_follows made too
    finally:
        store.close()
    with psycopg.connect(pg_url) as conn:
        version = conn.execute("SELECT version FROM crond_schema").fetchall()
        assert version == [(schema_pg.SCHEMA_VERSION,)]
