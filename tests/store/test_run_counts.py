"""`max_runs` in the state store (docs/schedules.md): a job's scheduled runs counted in
the commit that records them; with replicas (PostgreSQL), a claim past the limit refused
as DONE with nothing of it recorded, whichever replica asks and however they race."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from crond.store import base
from crond.store import sqlite as state
from crond.store.postgres import PostgresStore
from tests.store.test_pg_safety import _sql
from tests.store.test_postgres import _race

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_sqlite_counts_the_starts_of_limited_jobs_and_a_reader_sees_them(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    for m in range(3):
        slot = T0 + timedelta(minutes=m)
        store.start_many([("a", f"a{m}", slot), ("b", f"b{m}", slot)], slot, {"a": 5})
    store.close()
    assert state.Reader(tmp_path).run_counts() == {"a": 3}
    assert state.SqliteStore(tmp_path).run_counts() == {"a": 3}  # across a restart


def test_a_store_without_the_table_reads_as_no_counts(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    store.close()
    with sqlite3.connect(tmp_path / state.DB_NAME) as db:
        db.execute("DROP TABLE run_counts")
    assert state.Reader(tmp_path).run_counts() == {}


def _claims(store: PostgresStore, minutes: range, limit: int) -> list[base.Claim]:
    starts = [base.Start("j", f"{store.replica}-{m}", T0 + timedelta(minutes=m)) for m in minutes]
    return store.claim(starts, (), T0, limits={"j": limit}).starts


def test_replicas_stop_at_max_runs_together(pg_url: str) -> None:
    one, two = (PostgresStore.open(pg_url, cluster="c", replica=r) for r in ("r1", "r2"))
    try:
        assert all(isinstance(c, int) for c in _claims(one, range(2), 3))
        got = _claims(two, range(2, 5), 3)  # the 3rd counts; the 4th and 5th are past it
        assert isinstance(got[0], int)
        assert got[1:] == [base.DONE, base.DONE]
        assert _claims(one, range(5, 6), 3) == [base.DONE]
        assert one.run_counts() == {"j": 3}
        rows = _sql(pg_url, "SELECT count(*) FROM crond_attempts WHERE job = 'j'")
        assert rows == [(3,)]  # nothing recorded of the refused ones
        claims = _sql(pg_url, "SELECT count(*) FROM crond_claims WHERE job = 'j'")
        assert claims == [(3,)]
    finally:
        one.close()
        two.close()


def test_replicas_racing_for_the_last_runs_get_exactly_the_limit(pg_url: str) -> None:
    stores = [PostgresStore.open(pg_url, cluster="c", replica=f"r{i}") for i in range(3)]
    try:
        # each replica claims its own ten slots at once: 30 different slots, limit 7
        results = _race(*(
            (lambda s=s, i=i: _claims(s, range(10 * i, 10 * i + 10), 7))
            for i, s in enumerate(stores)
        ))  # fmt: skip
        won = [c for got in results for c in got if isinstance(c, int)]
        assert len(won) == 7
        assert stores[0].run_counts() == {"j": 7}
        rows = _sql(pg_url, "SELECT count(*) FROM crond_attempts WHERE job = 'j'")
        assert rows == [(7,)]
    finally:
        for store in stores:
            store.close()


def test_a_run_given_up_gives_its_count_back(pg_url: str) -> None:
    """A run claimed and counted whose start was given up (a claim in doubt, then missed)
    never ran: removed, it no longer counts toward `max_runs`."""
    one = PostgresStore.open(pg_url, cluster="c", replica="r1")
    try:
        assert all(isinstance(c, int) for c in _claims(one, range(2), 3))
        assert one.run_counts() == {"j": 2}
        (doubted,) = _sql(pg_url, "SELECT run_id FROM crond_attempts WHERE job = 'j' LIMIT 1")
        assert one.abandon([doubted[0]]) == 1
        assert one.run_counts() == {"j": 1}
        assert all(isinstance(c, int) for c in _claims(one, range(2, 4), 3))
        assert _claims(one, range(4, 5), 3) == [base.DONE]
    finally:
        one.close()
