"""Replicas that survive grey failures, the store's side (docs/replicas.md), against a real
server (tests/pg/): a replica frozen inside its claim transaction holding the others for a
lock timeout only, its transaction ended by the server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crond.store import base, pg_conn
from crond.store.postgres import PostgresStore

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
SLOTS = [T0 + timedelta(minutes=m) for m in range(25)]


@pytest.fixture
def stores(pg_url: str) -> Iterator[list[PostgresStore]]:
    """Three replicas of cluster c: r1, r2, r3."""
    opened = [PostgresStore.open(pg_url, cluster="c", replica=f"r{i}") for i in (1, 2, 3)]
    yield opened
    for store in opened:
        store.close()


def _sql(url: str, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def _claim(store: PostgresStore, each: bool, slots: list[datetime] = SLOTS) -> list[Any]:
    """`store`'s claims of job j's slots, as a replica whose file says `replicas: all`
    (`each`) or `one` would make them."""
    starts = [base.Start("j", f"{store.replica}-{s:%M}", s) for s in slots]
    copies = [store.replica if each else ""] * len(starts)
    return store.claim_many(starts, T0, copies=copies)


def _runs_by_slot(url: str) -> dict[datetime, list[str]]:
    """Of each slot of job j, the replicas that run it."""
    runs: dict[datetime, list[str]] = {}
    for slot, replica in _sql(url, "SELECT slot, replica FROM crond_attempts WHERE job = 'j'"):
        runs.setdefault(slot.astimezone(UTC), []).append(replica)
    return runs


def _check_once_or_once_each(url: str, all_replicas: set[str]) -> None:
    """Each slot ran once (as `one`), or at most once a replica of `all_replicas` (as
    `all`): never both."""
    claims = _sql(url, "SELECT slot, copy, each FROM crond_claims WHERE job = 'j'")
    for slot, replicas in _runs_by_slot(url).items():
        mine = [(copy, each) for s, copy, each in claims if s == slot]
        anchor = [each for copy, each in mine if copy == ""]
        assert anchor, (slot, mine)
        if anchor == [False]:  # a `one` claim: one run, and no copy claimed
            assert len(replicas) == 1, (slot, replicas)
            assert [copy for copy, _ in mine] == [""], (slot, mine)
        else:  # `all`: once a replica, each of them one whose file says `all`
            assert len(replicas) == len(set(replicas)), (slot, replicas)
            assert set(replicas) <= all_replicas, (slot, replicas)


# --- a replica frozen inside its transaction ---------------------------------------------------


def test_a_frozen_peer_costs_a_lock_timeout_and_its_transaction_is_ended(
    pg_url: str, stores: list[PostgresStore]
) -> None:
    """r1 stops inside its claim transaction (a GC pause, SIGSTOP), holding the slot's row:
    r2's claim of it fails fast (the daemon refuses the slot: `database`, and retries);
    the server ends r1's transaction after its idle timeout, and r2's next claim wins."""
    frozen, two, _ = stores
    thawed = pytest.raises(base.StateError, match="idle-in-transaction timeout")
    with thawed, frozen._transaction() as cur:
        cur.execute(
            "INSERT INTO crond_claims (cluster, job, slot, copy, replica, run_id, claimed) "
            "VALUES ('c', 'j', %s, '', 'r1', 'r1-00', %s)",
            (T0, T0),
        )
        began = time.monotonic()
        with pytest.raises(base.StateError, match="LockNotAvailable"):
            _claim(two, False, [T0])
        assert time.monotonic() - began < pg_conn.LOCK_TIMEOUT + 0.5
        time.sleep(pg_conn.IDLE_TIMEOUT + 0.5)  # frozen
        assert isinstance(_claim(two, False, [T0])[0], int)  # r1's locks are gone
        cur.execute("SELECT 1")  # r1 thaws: its transaction was ended, its claim not made
    assert _runs_by_slot(pg_url) == {T0: ["r2"]}
    assert isinstance(_claim(frozen, False, [SLOTS[1]])[0], int)  # r1 connects again


def test_the_bounds_are_each_transactions_own(stores: list[PostgresStore]) -> None:
    """Set for each transaction (SET LOCAL): a pooled server's session keeps none."""
    store = stores[0]
    settings = (
        "SELECT current_setting('lock_timeout'), "
        "current_setting('idle_in_transaction_session_timeout')"
    )
    with store._transaction() as cur:
        cur.execute(settings)
        assert cur.fetchone() == ("500ms", "2s")
    conn = store._connection()
    assert conn.execute(settings).fetchone() == ("0", "0")  # after it: the session's own
    conn.rollback()
