"""The backfills in both stores (`crond backfill`, docs/schedules.md; docs/state.md): a
slot's start marks its attempt `backfill` and moves its backfill's progress in one
commit; tallies and ends; a store older than the table and the column; and with
replicas (a real PostgreSQL, tests/pg/) each slot claimed once, not beside an unfinished
run of a one-at-a-time job, nothing claimed once the backfill ended, one running
backfill a job in a cluster, and a schema 5 database upgraded."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from crond.store import schema_pg
from crond.store.base import BUSY, DONE, BackfillRow, Start
from crond.store.postgres import PostgresStore
from crond.store.sqlite import DB_NAME, Reader, SqliteStore
from tests.store.test_pg_cluster import _old_schema, _sql

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
SLOT = T0 - timedelta(days=1)


def row(backfill_id: str = "bf1", job: str = "a") -> BackfillRow:
    return BackfillRow(
        backfill_id, job, SLOT, SLOT + timedelta(hours=1), 60, 0, None, SLOT, 0, 0,
        "running", T0, None, '{"user": "alice"}',
    )  # fmt: skip


def test_sqlite_a_slots_start_and_its_progress_are_one_commit(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    assert store.backfill_add(row())
    starts = [Start("a", "run-1", SLOT), Start("b", "run-2", T0)]
    store.start_many(starts, T0, backfills={"run-1": "bf1"})
    store.backfill_counted("bf1", True, SLOT + timedelta(minutes=1))
    (kept,) = store.backfills(going=True)
    assert (kept.started, kept.last_slot, kept.succeeded, kept.failed) == (1, SLOT, 1, 0)
    assert kept.next_slot == SLOT + timedelta(minutes=1)
    assert {a.run_id: a.kind for a in store.recent(None, 10)} == {
        "run-1": "backfill",
        "run-2": None,
    }
    store.start("a", run_id="run-1", slot=SLOT, attempt=2, started=T0, cursor=SLOT)
    assert [a.kind for a in store.recent("a", 10)] == ["backfill", "backfill"]  # a retry too
    store.backfill_end("bf1", "finished", T0)
    store.backfill_end("bf1", "cancelled", T0)  # (an ended one stays as it ended)
    assert store.backfills(going=True) == []
    assert [b.state for b in store.backfills(going=False)] == ["finished"]
    store.close()


def test_sqlite_a_store_older_than_backfills_reads_none_and_gains_them(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.start_many([Start("a", "run-1", SLOT)], T0)
    store.close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    db.execute("ALTER TABLE attempts DROP COLUMN kind")
    db.execute("DROP TABLE backfills")
    db.commit()
    db.close()
    reader = Reader(tmp_path)  # (a reader writes nothing)
    assert [a.kind for a in reader.recent(None, 10)] == [None]
    assert reader.backfills(going=True) == []
    reader.close()
    store = SqliteStore(tmp_path)  # the daemon adds them
    assert store.backfill_add(row())
    assert [a.kind for a in store.recent(None, 10)] == [None]
    store.close()


def test_pg_each_backfill_slot_is_claimed_once_across_replicas(pg_url: str) -> None:
    r0 = PostgresStore.open(pg_url, cluster="c", replica="r0")
    r1 = PostgresStore.open(pg_url, cluster="c", replica="r1")
    try:
        assert r0.backfill_add(row())
        assert not r1.backfill_add(row("bf2"))  # one running backfill a job
        # The slot's own scheduled claim (copy "") does not hold the backfill's.
        assert isinstance(r0.claim_many([Start("a", "sched", SLOT)], T0)[0], int)
        won = r0.claim_backfill([Start("a", "run-0", SLOT)], {"run-0": "bf1"}, T0)
        lost = r1.claim_backfill([Start("a", "run-1", SLOT)], {"run-1": "bf1"}, T0)
        assert isinstance(won[0], int)
        assert lost == [None]
        later = SLOT + timedelta(minutes=1)
        busy = r1.claim_backfill(
            [Start("a", "run-2", later)], {"run-2": "bf1"}, T0, exclusive={"a"}
        )
        assert busy == [BUSY]  # run-0 (and the scheduled run) unfinished: nothing recorded
        allowed = r1.claim_backfill([Start("a", "run-3", later)], {"run-3": "bf1"}, T0)
        assert isinstance(allowed[0], int)  # (overlap: allow)
        (kept,) = r1.backfills(going=True)
        assert (kept.started, kept.last_slot) == (2, later)
        r0.backfill_counted("bf1", False, later)
        r1.backfill_counted("bf1", True, None)
        assert (r0.backfills(going=True)[0].succeeded, r0.backfills(going=True)[0].failed) == (
            1,
            1,
        )
        kinds = {a.run_id: a.kind for a in r0.recent("a", 10)}
        assert kinds == {"sched": None, "run-0": "backfill", "run-3": "backfill"}
        r0.backfill_end("bf1", "cancelled", T0)
        after = SLOT + timedelta(minutes=2)
        assert r1.claim_backfill([Start("a", "run-4", after)], {"run-4": "bf1"}, T0) == [DONE]
        assert r1.backfill_add(row("bf2"))  # the job's next backfill may begin
    finally:
        r0.close()
        r1.close()


def test_pg_a_schema_6_database_is_upgraded_to_hold_backfills(pg_url: str) -> None:
    _old_schema(pg_url, 6)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('crond_backfills')").fetchone() == (None,)
    store = PostgresStore.open(pg_url, cluster="c", replica="r1")
    try:
        assert _sql(pg_url, "SELECT version FROM crond_schema") == [(schema_pg.SCHEMA_VERSION,)]
        assert store.backfill_add(row())
        assert [b.id for b in store.backfills(going=False)] == ["bf1"]
    finally:
        store.close()
