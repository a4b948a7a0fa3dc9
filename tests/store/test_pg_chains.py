"""Chained runs kept in PostgreSQL (docs/workflows.md, "With replicas"), the store's side,
against a real server (tests/pg/): recorded in the commit of the parent's end, taken
away in the commit that claims the child's run by its parent's run id (once, whichever
replica claims it), dropped when not started, never recorded again by an end written
after its child was claimed, and taken back by a restarted replica or taken over from a
silent one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from crond.store import base
from crond.store.postgres import PostgresStore
from crond.store.rows import AFTER, Chained
from tests.store.test_pg_safety import _sql
from tests.store.test_postgres import _race

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _extract_ended(store: PostgresStore, run_id: str = "run-x", slot: datetime = T0) -> Chained:
    """extract's run `run_id` ran on `store`'s replica and succeeded: its end starts load."""
    row = store.claim_many([base.Start("extract", run_id, slot)], T0)[0]
    assert isinstance(row, int)
    child = Chained("load", "extract", run_id, "success", 0, slot)
    store.end(row, job="extract", run_id=run_id, finished=T0, outcome="success", exit_code=0,
              duration_s=1.0, output=[], release=True, chained=[child])  # fmt: skip
    return child


def _claim_child(store: PostgresStore, parent: str, run_id: str, slot: datetime = T0) -> base.Claim:
    start = base.Start("load", run_id, slot)  # (a child's slot is its parent's)
    return store.claim_many([start], T0, copies=[AFTER + parent])[0]


def test_a_child_recorded_with_its_parents_end_runs_once_whichever_replica_claims_it(
    pg_url: str, stores: list[PostgresStore]
) -> None:
    r1, r2, r3 = stores
    child = _extract_ended(r1)
    assert r1.pending_chained() == [child]
    assert r2.pending_chained() == []  # (r1's to start)
    # Three replicas race for the child's run: one claim commits, the record goes with it.
    got = _race(*[lambda s=s: _claim_child(s, "run-x", f"load-{s.replica}") for s in stores])
    assert sum(isinstance(g, int) for g in got) == 1, got
    assert got.count(None) == 2, got
    assert r1.pending_chained() == []
    # A trigger of the parent in the same instant: its end starts its own child run
    # (claimed by the parent's run id, not by the slot).
    _extract_ended(r3, "run-y", T0 + timedelta(seconds=1))
    assert isinstance(_claim_child(r3, "run-y", "load-y", T0), int)
    assert _sql(pg_url, "SELECT count(*) FROM crond_attempts WHERE job = 'load'") == [(2,)]
    # The child's own schedule keeps its slot: a chained claim holds only its own copy.
    assert isinstance(r2.claim_many([base.Start("load", "load-sched", T0)], T0)[0], int)


def test_an_end_written_after_its_child_was_claimed_records_nothing(
    stores: list[PostgresStore],
) -> None:
    """The database was away when the parent ended: its end is written when it is back,
    maybe after the child's run was claimed. It must not leave a record that would start
    the child again at the next restart."""
    r1 = stores[0]
    assert isinstance(_claim_child(r1, "run-x", "load-1"), int)
    _extract_ended(r1)
    assert r1.pending_chained() == []


def test_a_child_not_started_is_dropped(stores: list[PostgresStore]) -> None:
    r1 = stores[0]
    _extract_ended(r1)
    r1.drop_chained([("load", "run-x")])
    assert r1.pending_chained() == []


def test_a_restarted_replica_takes_back_its_records_and_a_silent_ones_are_taken_over(
    pg_url: str, stores: list[PostgresStore]
) -> None:
    r1, r2, r3 = stores
    child = _extract_ended(r1)
    # r2 and r3 look before r1 is silent: nothing to take; nor without a timeout.
    now = datetime.now(UTC)
    assert r2.adopt_chained(now, timedelta(seconds=30), mine=False) == []
    assert r2.adopt_chained(now, None, mine=True) == []  # (r2's own: none)
    # r1 falls silent: one survivor takes its records over (raced: one gets them).
    _sql(pg_url, "UPDATE crond_replicas SET last_beat = %s WHERE name = 'r1'", (T0,))
    got = _race(
        lambda: r2.adopt_chained(now, timedelta(seconds=30), mine=False),
        lambda: r3.adopt_chained(now, timedelta(seconds=30), mine=False),
    )
    assert sorted(map(len, got)) == [0, 1], got
    taker = r2 if got[0] else r3
    assert taker.pending_chained() == [child]
    # The taker dies and starts again under its name: its records are its own again.
    assert taker.adopt_chained(now, None, mine=True) == [child]
    assert taker.adopt_chained(now, None, mine=False) == []


def test_a_child_claim_refused_busy_or_taken_takes_its_record_away(
    pg_url: str, stores: list[PostgresStore]
) -> None:
    """The child's claim dealt with its record, whatever came of it: run, skipped (its
    job runs one at a time and runs elsewhere: busy) or run by another replica (taken). A
    record left would start the child again at a restart, once its claim was pruned."""
    r1, r2, r3 = stores
    going = r2.claim_many([base.Start("load", "load-going", T0 - timedelta(hours=1))], T0)[0]
    assert isinstance(going, int)  # a run of load goes on r2
    _extract_ended(r1)
    start = base.Start("load", "load-1", T0)
    got = r1.claim_many([start], T0, copies=[AFTER + "run-x"], exclusive={"load"})
    assert got == [base.BUSY]
    assert r1.pending_chained() == []
    # The record comes back (a replica took over records an earlier crond left): the
    # claim is taken now, and the record goes again.
    _sql(pg_url, "INSERT INTO crond_chained VALUES ('c', 'load', 'run-x', 'extract', "
                 "'success', 0, %s, 'r3')", (T0,))  # fmt: skip
    assert _claim_child(r3, "run-x", "load-3") is None
    assert r3.pending_chained() == []
