"""Replicas that survive grey failures, the store's side (docs/replicas.md), against a real
server (tests/pg/): the claims of a slot exclusive whatever each replica's file says of
`replicas` (a rolling change), in every order and raced; a replica frozen inside its claim
transaction holding the others for a lock timeout only, its transaction ended by the
server; and the late end of a run already closed `lost` kept beside it, never over it.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crond.clock import iso_utc
from crond.status_text import format_history, format_history_json
from crond.store import base, pg_conn, schema_pg
from crond.store.postgres import PostgresStore
from tests.store.test_postgres import _race

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
SLOTS = [T0 + timedelta(minutes=m) for m in range(25)]


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


# --- claims during a rolling change of `replicas` -------------------------------------------


@pytest.mark.parametrize(
    ("first_each", "then_each"), list(itertools.product([False, True], repeat=2))
)
def test_a_slot_claimed_one_way_is_refused_the_other_way(
    pg_url: str, stores: list[PostgresStore], first_each: bool, then_each: bool
) -> None:
    one, two, _ = stores
    assert all(isinstance(c, int) for c in _claim(one, first_each))
    second = _claim(two, then_each)
    if first_each and then_each:
        assert all(isinstance(c, int) for c in second)  # each replica its own copy
    else:
        assert second == [None] * len(SLOTS)  # once as `one`, or once a replica: not both
    assert _claim(one, first_each) == [None] * len(SLOTS)  # its own claim, once
    _check_once_or_once_each(pg_url, {"r1", "r2"} if then_each else {"r1"})


@pytest.mark.parametrize(
    "says_all", [(True, False, False), (False, True, True), (True, False, True)]
)
def test_replicas_that_disagree_racing_run_each_slot_once_or_once_each(
    pg_url: str, stores: list[PostgresStore], says_all: tuple[bool, bool, bool]
) -> None:
    """Three replicas claim the same 25 slots at once, in their own orders, some as `one`
    and some as `all` (the 22 double runs of 25 this was seen to give)."""
    orders = [SLOTS, SLOTS[::-1], SLOTS[12:] + SLOTS[:12]]
    claims = zip(stores, says_all, orders, strict=True)
    won = _race(*[lambda s=s, e=e, o=o: _claim(s, e, o) for s, e, o in claims])
    assert all(isinstance(w, list) for w in won), won  # no deadlock, nothing failed
    every = {s.replica for s, e in zip(stores, says_all, strict=True) if e}
    _check_once_or_once_each(pg_url, every)
    assert set(_runs_by_slot(pg_url)) == set(SLOTS)  # and every slot ran


@pytest.mark.parametrize(("held_each", "then_each", "commit"), [
    (True, False, True), (False, True, True), (True, True, True), (True, False, False),
    (False, True, False),
])  # fmt: skip
def test_a_claim_waits_for_the_peer_claiming_the_slot_and_follows_its_outcome(
    pg_url: str, stores: list[PostgresStore], held_each: bool, then_each: bool, commit: bool
) -> None:
    """A peer's claim not yet committed (its row of copy "" inserted, as its statement
    does) is waited for: once it commits, the other way is refused; rolled back, it wins."""
    _, two, _ = stores
    peer = psycopg.connect(pg_url)
    peer.execute(
        "INSERT INTO crond_claims (cluster, job, slot, copy, replica, run_id, claimed, each) "
        "VALUES ('c', 'j', %s, '', 'r1', %s, %s, %s)",
        (T0, "" if held_each else "r1-00", T0, held_each),
    )
    result: list[Any] = []
    claiming = threading.Thread(target=lambda: result.append(_claim(two, then_each, [T0])))
    claiming.start()
    time.sleep(0.2)
    assert claiming.is_alive()  # waiting for the peer's row
    (peer.commit if commit else peer.rollback)()
    claiming.join(5)
    peer.close()
    wins = not commit or (held_each and then_each)
    assert isinstance(result[0][0], int) if wins else result == [[None]]


def test_overlap_skip_and_replace_still_hold_across_the_two_ways(
    stores: list[PostgresStore],
) -> None:
    one, two, _ = stores
    (copy,) = one.claim_many([base.Start("j", "a", T0)], T0, copies=["r1"])
    assert isinstance(copy, int)  # r1 runs its copy (`all`) of T0, still going
    later = [base.Start("j", "b", SLOTS[1])]
    assert two.claim_many(later, T0, exclusive={"j"}) == [base.BUSY]  # `one` + skip: busy
    assert two.claim_many(later, T0, exclusive={"j"}) == [None]  # dealt with, once
    (replacing,) = two.claim_many([base.Start("j", "c", SLOTS[2])], T0, replacing={"j"})
    assert isinstance(replacing, int)
    assert [k.target for k in one.poll(0).kills] == ["a"]  # r1's run asked to stop


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


# --- a late end ---------------------------------------------------------------------------------


def _lost(pg_url: str, stores: list[PostgresStore]) -> tuple[int, datetime]:
    """r1's run of T0, closed `lost` by r2 (r1's heartbeats stopped: cut off, not dead)."""
    one, two, _ = stores
    (row,) = one.claim_many([base.Start("j", "run-1", T0)], T0)
    assert isinstance(row, int)
    _sql(
        pg_url, "UPDATE crond_replicas SET last_beat = now() - interval '1 hour' WHERE name = 'r1'"
    )
    lost_at = datetime.now(UTC).replace(microsecond=0)
    assert [r.run_id for r in two.close_dead(lost_at, timedelta(seconds=30))] == ["run-1"]
    return row, lost_at


def _end(store: PostgresStore, row: int, outcome: str, at: datetime) -> datetime | None:
    code = 0 if outcome == "success" else 3
    return store.end(row, job="j", run_id="run-1", finished=at, outcome=outcome,
                     exit_code=code, duration_s=60.0, output=["done"])  # fmt: skip


def test_a_late_end_is_kept_beside_lost_never_over_it(
    pg_url: str, stores: list[PostgresStore]
) -> None:
    row, lost_at = _lost(pg_url, stores)
    one, two, _ = stores
    ended = lost_at + timedelta(minutes=5)
    assert _end(one, row, "success", ended) == lost_at  # late: the daemon tells of it
    for store in (one, two):
        (a,) = store.recent("j", 10)
        assert (a.outcome, a.finished, a.exit_code) == ("lost", lost_at, None)
        assert (a.late_outcome, a.late_finished, a.late_exit_code) == ("success", ended, 0)
        assert a.output == ["done"]
    assert one.summaries()["j"].outcome == "lost"
    reader = PostgresStore.reader(pg_url, cluster="c")  # `crond history`
    (a,) = reader.recent("j", 10)
    reader.close()
    assert "  lost  exit -  " in format_history([a])
    assert f"(ended late: success exit 0 at {iso_utc(ended)[:19]}Z)" in format_history([a])
    assert json.loads(format_history_json([a]))["late_end"] == {
        "finished": iso_utc(ended), "outcome": "success", "exit_code": 0,
    }  # fmt: skip
    assert _end(one, row, "failed", ended + timedelta(minutes=1)) == lost_at  # said again
    (a,) = two.recent("j", 10)
    assert (a.late_outcome, a.late_finished) == ("success", ended)  # the first end kept
    one.finish(row, job="j", run_id="run-1", finished=ended, outcome="success", exit_code=0,
               duration_s=1.0, output=[])  # fmt: skip
    assert two.recent("j", 10)[0].outcome == "lost"


def test_an_end_in_time_is_not_late(stores: list[PostgresStore]) -> None:
    one = stores[0]
    (row,) = one.claim_many([base.Start("j", "run-1", T0)], T0)
    assert isinstance(row, int)
    assert _end(one, row, "success", T0) is None
    (a,) = one.recent("j", 10)
    assert (a.outcome, a.late_finished, a.late_outcome) == ("success", None, None)
    assert _end(one, 424242, "success", T0) is None  # not there: nothing


# --- schema 3 upgraded -----------------------------------------------------------------------


def test_a_schema_3_database_gets_the_late_columns_and_its_all_claims_anchored(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        for statement in schema_pg.TABLES:
            if statement not in schema_pg.UPGRADES[3]:
                conn.execute(statement)
        conn.execute("INSERT INTO crond_schema (version) VALUES (3)")
        conn.execute(
            "INSERT INTO crond_claims (cluster, job, slot, copy, replica, run_id, claimed) "
            "VALUES ('c', 'j', %s, 'r1', 'r1', 'x', %s), ('c', 'j', %s, 'r2', 'r2', 'y', %s), "
            "('c', 'k', %s, '', 'r1', 'z', %s)",
            (T0, T0, T0, T0, T0, T0),
        )
    store = PostgresStore.open(pg_url, cluster="c", replica="r3")
    assert _sql(pg_url, "SELECT version FROM crond_schema") == [(schema_pg.SCHEMA_VERSION,)]
    assert _sql(pg_url, "SELECT job, replica, each FROM crond_claims WHERE copy = '' "
                "ORDER BY job") == [("j", "r1", True), ("k", "r1", False)]  # fmt: skip
    assert _claim(store, False, [T0]) == [None]  # run as `all` before: not as `one` now
    assert isinstance(_claim(store, True, [T0])[0], int)  # r3's own copy
    (k,) = store.claim_many([base.Start("k", "k-3", T0)], T0, copies=["r3"])
    assert k is None  # run as `one` before: not as `all` now
    store.close()


# --- a claim in doubt given up ---------------------------------------------------------------


def test_a_claimed_run_given_up_is_removed_and_holds_its_job_busy_no_more(
    stores: list[PostgresStore], pg_url: str
) -> None:
    """A claim that committed without an answer, its start then missed: the run it
    recorded never started. Abandoned, it is removed (its claim kept: the slot is not run
    again), the summary shows the run before, and the job's next slot is claimed, not
    refused `busy`; another replica cannot remove it."""
    one, two, _ = stores
    (before,) = one.claim_many([base.Start("j", "before", T0)], T0, exclusive={"j"})
    assert isinstance(before, int)
    one.finish(before, job="j", finished=SLOTS[0], outcome="success", exit_code=0,
               duration_s=0.5, output=[])  # fmt: skip
    (row,) = one.claim_many([base.Start("j", "doubted", SLOTS[1])], T0, exclusive={"j"})
    assert isinstance(row, int)
    nxt = [base.Start("j", "next", SLOTS[2])]
    assert two.claim_many(nxt, T0, exclusive={"j"}) == [base.BUSY]  # held by a phantom
    assert two.abandon(["doubted"]) == 0  # not its run to remove
    assert one.abandon(["doubted"]) == 1
    assert one.abandon(["doubted"]) == 0  # once
    assert _sql(pg_url, "SELECT 1 FROM crond_attempts WHERE run_id = 'doubted'") == []
    assert _sql(pg_url, "SELECT 1 FROM crond_claims WHERE run_id = 'doubted'") == [(1,)]
    summary = one.summaries()["j"]
    assert (summary.run_id, summary.outcome) == ("before", "success")
    assert one.claim_many([base.Start("j", "again", SLOTS[1])], T0) == [None]  # still taken
    later = [base.Start("j", "later", SLOTS[3])]
    assert isinstance(two.claim_many(later, T0, exclusive={"j"})[0], int)
