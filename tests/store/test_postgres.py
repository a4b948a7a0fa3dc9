"""The PostgreSQL store (crond/store/postgres.py) against a real server (tests/pg/).

First the behaviours tests/store/test_sqlite.py checks of SQLite, as one table of cases run
against both stores (the `opener` fixture is parametrized); then what only replicas
sharing a database have: claims raced from two threads (exactly one winner a slot, or one
a copy for `replicas: all`), clusters kept apart, a dead replica's runs closed `lost` once
when two survivors race, the schema made and upgraded under concurrent opens, and a
database that is unreachable, stuck or replaced giving a StateError quickly, its
message without the URL's password.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

import psycopg
import pytest

from crond.store import base, schema_pg
from crond.store import sqlite as state
from crond.store.pg_conn import scrub
from crond.store.postgres import PostgresStore
from tests.store.test_sqlite import _Log, _recorder, _run

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
ALICE = '{"uid": 1000, "user": "alice", "pid": 4242}'

Opener = Callable[..., base.Store]


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the test's store (again: the next daemon), of either kind; all closed after."""
    opened: list[base.Store] = []
    if request.param == "sqlite":

        def make(history: int = 100) -> base.Store:
            return state.SqliteStore(tmp_path, history=history)

    else:
        url = request.getfixturevalue("pg_url")

        def make(history: int = 100) -> base.Store:
            return PostgresStore.open(url, cluster="c", replica="r1", history=history)

    def open_(history: int = 100) -> base.Store:
        store = make(history)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        with contextlib.suppress(OSError):  # SQLite's, closed by the test already
            store.close()


def _finish(store: base.Store, row: int, job: str, outcome: str, **kw: Any) -> None:
    code = 0 if outcome == "success" else 1
    store.finish(row, job=job, finished=T0, outcome=outcome, exit_code=code, duration_s=0.5,
                 output=[], **kw)  # fmt: skip


# --- the cases of tests/store/test_sqlite.py and tests/daemon/test_pauses.py, both stores ---


def test_start_and_finish_record_an_attempt(opener: Opener) -> None:
    store = opener()
    started = T0 + timedelta(microseconds=1_234_567)
    row = store.start("a", run_id="r1", slot=T0, attempt=1, started=started, cursor=T0)
    assert store.cursors() == {"a": T0}
    open_row = store.last("a")
    assert open_row is not None
    assert (open_row.outcome, open_row.finished, open_row.started) == (None, None, started)
    store.finish(row, job="a", finished=T0 + timedelta(seconds=1), outcome="success",
                 exit_code=0, duration_s=0.998, output=["hi", "there"])  # fmt: skip
    done = store.last("a")
    assert done is not None
    assert (done.run_id, done.slot, done.outcome, done.exit_code) == ("r1", T0, "success", 0)
    assert (done.output, done.duration_s) == (["hi", "there"], 0.998)
    assert store.last("a", outcome="failed") is None
    a = store.summaries()["a"]
    assert (a.slot, a.started, a.finished, a.success_started) == (
        "2026-03-01T12:00:00Z", "2026-03-01T12:00:01.234567Z", "2026-03-01T12:00:01Z",
        "2026-03-01T12:00:01.234567Z",
    )  # fmt: skip


def test_end_is_finish_and_says_an_end_in_time_is_not_late(opener: Opener) -> None:
    store = opener()
    row = store.start("a", run_id="r1", slot=T0, attempt=1, started=T0, cursor=T0)
    ended = store.end(row, job="a", run_id="r1", finished=T0, outcome="failed", exit_code=2,
                      duration_s=1.0, output=["x"])  # fmt: skip
    assert ended is None
    last = store.last("a")
    assert last is not None
    assert (last.outcome, last.exit_code, last.output, last.late_finished) == (
        "failed", 2, ["x"], None,
    )  # fmt: skip


def test_the_outbox_keeps_notifications_across_a_restart_until_done(opener: Opener) -> None:
    store = opener()
    notes = [base.OutboxRow(0, "notify", "ops", j, "failed", f'{{"job": "{j}"}}', c)
             for j, c in (("a", 1.0), ("b", 2.0), ("c", 3.0))]  # fmt: skip
    ids = store.outbox_add(notes)
    assert len(set(ids)) == 3
    store.outbox_done(ids[:1])
    store.close()
    store = opener()
    pending = store.outbox_pending(10)
    assert [(r.id, r.job, r.body, r.created) for r in pending] == [
        (ids[1], "b", '{"job": "b"}', 2.0),
        (ids[2], "c", '{"job": "c"}', 3.0),
    ]
    assert [r.job for r in store.outbox_pending(1)] == ["b"]
    store.outbox_done([r.id for r in pending] + [999])
    assert store.outbox_pending(10) == []


def test_cursors_never_go_back_and_move_several_in_one_commit(opener: Opener) -> None:
    store = opener()
    store.update_view([], [("a", T0 + timedelta(hours=1)), ("b", T0)])
    store.update_view([], [("a", T0), ("b", T0 + timedelta(seconds=1))])
    assert store.cursors() == {"a": T0 + timedelta(hours=1), "b": T0 + timedelta(seconds=1)}


def test_history_is_pruned_per_job_and_the_last_success_kept(opener: Opener) -> None:
    store = opener(history=5)
    ok = store.start("a", run_id="ok", slot=T0, attempt=1, started=T0, cursor=T0)
    _finish(store, ok, "a", "success")
    for i in range(12):
        for job in ("a", "b"):
            row = store.start(job, run_id=f"{job}{i}", slot=T0, attempt=1, started=T0, cursor=T0)
            _finish(store, row, job, "failed", **({"keep": 3} if job == "b" else {}))
    assert [r.run_id for r in store.recent("a", 100)] == [f"a{i}" for i in range(7, 12)]
    assert [r.run_id for r in store.recent("b", 100)] == ["b9", "b10", "b11"]
    assert [r.run_id for r in store.recent(None, 2)] == ["a11", "b11"]
    a = store.summaries()["a"]
    assert (a.run_id, a.outcome, a.exit_code) == ("a11", "failed", 1)
    assert (a.success_run_id, a.success_duration_s) == ("ok", 0.5)


def test_open_attempts_are_closed_as_lost_by_the_next_daemon(opener: Opener) -> None:
    store = opener()
    store.start("a", run_id="r1", slot=T0, attempt=1, started=T0, cursor=T0)
    store.close()
    again = opener()
    lost = again.close_lost(T0 + timedelta(minutes=1))
    assert [(r.job, r.run_id, r.slot, r.finished) for r in lost] == [("a", "r1", T0, None)]
    last = again.last("a")
    assert last is not None
    assert last.outcome == "lost"
    a = again.summaries()["a"]
    assert (a.outcome, a.finished) == ("lost", "2026-03-01T12:01:00Z")
    assert again.close_lost(T0 + timedelta(minutes=2)) == []


def test_finish_of_a_row_that_is_not_there_does_nothing(opener: Opener) -> None:
    store = opener()
    row = store.start("b", run_id="r2", slot=T0, attempt=1, started=T0, cursor=T0)
    store.finish(row, job="a", run_id="r1", finished=T0, outcome="success", exit_code=0,
                 duration_s=0.1, output=[])  # fmt: skip
    store.finish(row + 1000, job="b", finished=T0, outcome="success", exit_code=0,
                 duration_s=0.1, output=[])  # fmt: skip
    b = store.last("b")
    assert b is not None
    assert b.finished is None


def test_start_many_and_claim_record_a_wakes_runs(opener: Opener) -> None:
    """One daemon on its store wins every claim; the cursors move with the starts."""
    store = opener()
    slot = T0 + timedelta(minutes=1)
    ids = store.start_many([base.Start("a", "ra", slot), base.Start("b", "rb", slot)], slot)
    later = slot + timedelta(minutes=1)
    claims = [base.Start("b", "rb2", later), base.Start("a", "ra2", later)]
    won = store.claim(claims, [], later, copies=["", ""]).starts
    assert None not in won
    assert len({*ids, *won}) == 4
    assert store.cursors() == {"a": later, "b": later}
    summaries = store.summaries()
    assert (summaries["a"].run_id, summaries["b"].run_id) == ("ra2", "rb2")
    assert [r.run_id for r in store.recent("b", 10)] == ["rb", "rb2"]
    with pytest.raises(ValueError, match="one copy a start"):
        store.claim(claims, [], later, copies=[""])


def test_a_retry_of_a_backfills_run_is_marked_backfill_too(opener: Opener) -> None:
    """Attempt 2 takes its run's kind from attempt 1 (`crond history` shows it)."""
    store = opener()
    assert isinstance(store, base.BackfillRecords)
    slot = T0 - timedelta(days=1)
    assert store.backfill_add(base.BackfillRow(
        "bf1", "a", slot, slot + timedelta(hours=1), 60, 0, None, slot, 0, 0, "running", T0,
        None, ALICE,
    ))  # fmt: skip
    (first,) = store.claim_backfill([base.Start("a", "bf-run", slot)], {"bf-run": "bf1"}, T0)
    assert isinstance(first, int)
    _finish(store, first, "a", "failed")
    store.start("a", run_id="sched", slot=T0, attempt=1, started=T0, cursor=T0)
    store.start("a", run_id="bf-run", slot=slot, attempt=2, started=T0, cursor=slot)
    store.start("a", run_id="sched", slot=T0, attempt=2, started=T0, cursor=T0)
    kinds = [(a.run_id, a.attempt, a.kind) for a in store.recent("a", 10)]
    assert kinds == [
        ("bf-run", 1, "backfill"), ("sched", 1, None), ("bf-run", 2, "backfill"),
        ("sched", 2, None),
    ]  # fmt: skip


def test_status_follows_the_summaries_and_the_view(opener: Opener) -> None:
    store = opener()

    def view(names: str, digest: str) -> None:
        store.publish_view([base.view_row(n, n != "c", "every 1m", None) for n in names], digest)

    def shown() -> list[tuple[object, ...]]:
        return [(r.job, r.enabled, r.outcome, r.open, r.success_run_id)
                for r in store.status_rows()]  # fmt: skip

    view("abc", "x")
    assert store.get_meta("view_sha256") == "x"
    assert shown() == [("a", 1, None, False, None), ("b", 1, None, False, None),
                       ("c", 0, None, False, None)]  # fmt: skip
    first = store.start("a", run_id="r1", slot=T0, attempt=1, started=T0, cursor=T0)
    assert shown()[0] == ("a", 1, None, True, None)
    _finish(store, first, "a", "success")
    store.start("b", run_id="r3", slot=T0, attempt=1, started=T0, cursor=T0)
    assert store.close_lost(T0)[0].run_id == "r3"
    view("ba", "y")  # a reload: the new order, the summaries kept
    assert shown() == [("b", 1, "lost", False, None), ("a", 1, "success", False, "r1")]
    moved = base.ViewRow("a", True, "every 1m", T0.timestamp(), "at", "local", None)
    store.update_view([moved], [("a", T0 + timedelta(hours=1))])
    assert store.view_is_behind(T0.timestamp() + 1)
    assert not store.view_is_behind(T0.timestamp())
    assert store.cursors()["a"] == T0 + timedelta(hours=1)
    store.set_meta("k", "v1")
    store.set_meta("k", "v2")
    assert (store.get_meta("k"), store.get_meta("nothing")) == ("v2", None)


def test_a_pause_is_kept_as_given_and_replaced_and_cleared(opener: Opener) -> None:
    store = opener()
    assert store.pauses() == {}
    until = T0 + timedelta(hours=2, microseconds=7)
    a = base.PauseRow("a", T0, until, "db migration", ALICE)
    b = base.PauseRow("b", T0, None, None, ALICE)
    store.set_pause(a)
    store.set_pause(b)
    assert store.pauses() == {"a": a, "b": b}
    replaced = base.PauseRow("a", T0 + timedelta(minutes=5), None, None, ALICE)
    store.set_pause(replaced)
    store.close()
    store = opener()  # outlives the daemon that set it
    assert store.pauses() == {"a": replaced, "b": b}
    store.clear_pause("a")
    store.clear_pause("a")
    store.clear_pause("nobody")
    assert list(store.pauses()) == ["b"]


def test_the_recorder_keeps_each_attempt_with_its_output(opener: Opener) -> None:
    """The daemon's recorder over either store: a real job, its row and its cursor."""
    store = opener()
    recorder = _recorder(store, _Log())
    _run(recorder, "echo one; echo two; exit 3")
    row = store.last("j")
    assert row is not None
    assert (row.slot, row.attempt, row.outcome, row.exit_code) == (T0, 1, "failed", 3)
    assert row.output == ["one", "two"]
    assert store.cursors() == {"j": T0}
    assert not recorder.degraded


def test_a_closed_store_fails_every_call_with_a_state_error(opener: Opener) -> None:
    store = opener()
    store.close()
    with pytest.raises(base.StateError):
        store.update_view([], [("a", T0)])


# --- replicas: claims -----------------------------------------------------------------


def _replica(url: str, name: str, cluster: str = "c", **kw: Any) -> PostgresStore:
    return PostgresStore.open(url, cluster=cluster, replica=name, **kw)


def _race(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once, one thread each; their results, in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait(10)
        try:
            results[i] = calls[i]()
        except Exception as exc:  # noqa: BLE001  (the test asserts on it)
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    return results


def _open_runs(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT cluster, job, slot, replica, run_id FROM crond_attempts ORDER BY id"
        ).fetchall()


def _lock_timeout(result: object) -> bool:
    return isinstance(result, base.StateError) and "55P03" in str(result)


def test_two_replicas_racing_for_the_same_slots_start_each_once(pg_url: str) -> None:
    """Each claims the same 30 slots (in opposite orders: no deadlock either) from its own
    thread: every slot is won by exactly one, and both move every cursor."""
    one, two = _replica(pg_url, "r1"), _replica(pg_url, "r2")
    slots = [T0 + timedelta(minutes=m) for m in range(6)]
    starts = [base.Start(job, f"{job}-{s:%M}", s) for job in "abcde" for s in slots]

    def race(batch: list[base.Start]) -> list[Any]:
        won = _race(lambda: one.claim_many(batch, T0), lambda: two.claim_many(batch[::-1], T0))
        # On a loaded machine the loser may wait past lock_timeout (0.5 s) for the winner's
        # rows: its claim then fails whole (as the daemon's does, which tries it again).
        if _lock_timeout(won[0]):
            won[0] = one.claim_many(batch, T0)
        if _lock_timeout(won[1]):
            won[1] = two.claim_many(batch[::-1], T0)
        return won

    for _ in range(2):  # a second round: slots already claimed are lost by both
        won_one, won_two = race(starts)
        assert isinstance(won_one, list), won_one
        assert isinstance(won_two, list), won_two
        won_two = won_two[::-1]
        pairs = list(zip(won_one, won_two, strict=True))
        assert all((a is None) != (b is None) for a, b in pairs) or all(
            a is None and b is None for a, b in pairs
        )
        starts = [s._replace(run_id=s.run_id + "'") for s in starts]
    rows = _open_runs(pg_url)
    assert len(rows) == len(starts)
    assert len({(job, slot) for _, job, slot, _, _ in rows}) == len(starts)
    assert not [r for r in rows if r[4].endswith("'")]  # the second round won nothing
    winners = {(job, slot): replica for _, job, slot, replica, _ in rows}
    for store in (one, two):
        assert store.cursors() == dict.fromkeys("abcde", slots[-1])
        mine = [r for r in store.recent(None, 100) if r.replica == store.replica]
        assert {(r.job, r.slot) for r in mine} == {
            key for key, replica in winners.items() if replica == store.replica
        }
    one.close()
    two.close()


def test_replicas_all_each_run_their_own_copy(pg_url: str) -> None:
    one, two = _replica(pg_url, "r1"), _replica(pg_url, "r2")
    starts = [base.Start("all", "x", T0), base.Start("one", "y", T0)]
    won = _race(
        lambda: one.claim_many(starts, T0, copies=["r1", ""]),
        lambda: two.claim_many(starts, T0, copies=["r2", ""]),
    )
    assert won[0][0] is not None
    assert won[1][0] is not None  # each replica's copy of `all`
    assert [won[0][1], won[1][1]].count(None) == 1  # one replica's run of `one`
    assert sorted(r[3] for r in _open_runs(pg_url) if r[1] == "all") == ["r1", "r2"]
    again = one.claim_many([base.Start("all", "x2", T0)], T0, copies=["r1"])
    assert again == [None]  # its own copy, once
    one.close()
    two.close()


def test_two_clusters_in_one_database_do_not_see_each_other(pg_url: str) -> None:
    blue, green = _replica(pg_url, "r1", "blue"), _replica(pg_url, "r1", "green")
    for store in (blue, green):
        (row,) = store.claim_many([base.Start("a", f"run-{store.cluster}", T0)], T0)
        assert row is not None  # the same job, slot and replica name: both win
        store.update_view([], [("only-" + store.cluster, T0)])
        store.set_pause(base.PauseRow("p-" + store.cluster, T0, None, None, ALICE))
        store.outbox_add([base.OutboxRow(0, "ping", "", "a", "ok", "{}", 1.0)])
        store.set_meta("k", store.cluster)
        store.publish_view([base.view_row("v-" + store.cluster, True, "every 1m", None)], "d")
    for store in (blue, green):
        me = store.cluster
        assert [r.run_id for r in store.recent(None, 10)] == [f"run-{me}"]
        assert set(store.cursors()) == {"a", f"only-{me}"}
        assert list(store.pauses()) == [f"p-{me}"]
        assert len(store.outbox_pending(10)) == 1
        assert store.get_meta("k") == me
        assert [r.job for r in store.status_rows()] == [f"v-{me}"]
        assert list(store.summaries()) == ["a"]
    blue.close()
    # A new blue replica of the same name closes blue's open run, not green's.
    blue = _replica(pg_url, "r1", "blue")
    assert [r.run_id for r in blue.close_lost(T0)] == ["run-blue"]
    blue.close()
    green_run = green.last("a")
    assert green_run is not None
    assert green_run.outcome is None
    green.close()


def test_close_lost_closes_only_this_replica_names_runs(pg_url: str) -> None:
    one, two = _replica(pg_url, "r1"), _replica(pg_url, "r2")
    one.claim_many([base.Start("a", "ra", T0)], T0)
    two.claim_many([base.Start("b", "rb", T0)], T0)
    one.close()
    again = _replica(pg_url, "r1")  # r1 restarted
    assert [(r.run_id, r.replica) for r in again.close_lost(T0)] == [("ra", "r1")]
    b = two.last("b")
    assert b is not None
    assert b.outcome is None  # r2 still runs it
    again.close()
    two.close()


def test_a_dead_replicas_runs_are_closed_lost_once_by_racing_survivors(pg_url: str) -> None:
    now = datetime.now(UTC)
    dead = _replica(pg_url, "dead")
    ids = dead.claim_many([base.Start(j, f"run-{j}", T0) for j in "abc"], T0)
    dead.outbox_add([base.OutboxRow(0, "notify", "ops", "a", "failed", "{}", 1.0)])
    dead.beat(now - timedelta(minutes=5))  # its last beat
    dead.close()
    alive = _replica(pg_url, "alive")  # beat at its open: not stale
    (kept,) = alive.claim_many([base.Start("d", "run-d", T0)], T0)
    s1, s2 = _replica(pg_url, "s1"), _replica(pg_url, "s2")
    for _ in range(3):  # races are won by either: a few rounds, each checked
        results = _race(
            lambda: s1.close_dead(now, timedelta(minutes=1)),
            lambda: s2.close_dead(now, timedelta(minutes=1)),
        )
        assert all(isinstance(r, list) for r in results), results
        closed = [row.id for result in results for row in result]
        assert sorted(closed) in ([], sorted(i for i in ids if i is not None))
    rows = {r.job: r for r in s1.recent(None, 10)}
    assert [rows[j].outcome for j in "abcd"] == ["lost", "lost", "lost", None]
    assert rows["d"].id == kept
    assert s1.summaries()["a"].outcome == "lost"
    # The dead one's notification is now one survivor's to send, not both's.
    assert len(s1.outbox_pending(10)) + len(s2.outbox_pending(10)) == 1
    # A replica that beats again is not dead: its runs stay open.
    alive.beat(now)
    assert s1.close_dead(now + timedelta(seconds=30), timedelta(minutes=1)) == []
    for store in (alive, s1, s2):
        store.close()


def test_the_heartbeat_says_who_the_replica_is(pg_url: str) -> None:
    store = _replica(pg_url, "r1")
    store.publish_view([], "digest-1")
    store.beat(T0)
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT name, pid, host, last_beat, version, config_digest FROM crond_replicas"
        ).fetchone()
    assert row is not None
    assert (row[0], row[3], row[5]) == ("r1", T0, "digest-1")
    assert row[1] > 0
    assert row[2]
    assert row[4]
    store.close()


def test_old_claims_are_pruned_at_the_checkpoint(pg_url: str) -> None:
    store = _replica(pg_url, "r1", claim_keep=timedelta(days=1))
    now = datetime.now(UTC)
    old, new = now - timedelta(days=2), now - timedelta(hours=1)
    store.claim_many([base.Start("a", "1", old), base.Start("a", "2", new)], now)
    store.checkpoint()
    again = store.claim_many([base.Start("a", "3", old), base.Start("a", "4", new)], now)
    assert [i is None for i in again] == [False, True]
    store.close()


# --- the schema -----------------------------------------------------------------------


def _version(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT version FROM crond_schema").fetchall()


def test_the_tables_are_made_once_under_concurrent_opens(pg_url: str) -> None:
    stores = _race(*[lambda i=i: _replica(pg_url, f"r{i}") for i in range(6)])
    assert all(isinstance(s, PostgresStore) for s in stores), stores
    assert _version(pg_url) == [(schema_pg.SCHEMA_VERSION,)]
    for store in stores:
        store.close()
    again = _race(*[lambda i=i: _replica(pg_url, f"r{i}") for i in range(4)])  # already made
    assert all(isinstance(s, PostgresStore) for s in again), again
    for store in again:
        store.close()


def test_an_older_schema_is_upgraded_once_and_a_newer_refused(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _replica(pg_url, "r1").close()
    now = schema_pg.SCHEMA_VERSION
    monkeypatch.setattr(schema_pg, "SCHEMA_VERSION", now + 1)
    upgrade = ("ALTER TABLE crond_meta ADD COLUMN since timestamptz",)
    monkeypatch.setattr(schema_pg, "UPGRADES", {**schema_pg.UPGRADES, now: upgrade})
    stores = _race(*[lambda i=i: _replica(pg_url, f"r{i}") for i in range(4)])
    assert all(isinstance(s, PostgresStore) for s in stores), stores
    assert _version(pg_url) == [(now + 1,)]
    with psycopg.connect(pg_url) as conn:
        conn.execute("SELECT since FROM crond_meta")  # the upgrade ran (once: no error)
    monkeypatch.setattr(schema_pg, "SCHEMA_VERSION", now)
    newer = rf"newer crond \(schema {now + 1}, this one reads {now}\)"
    with pytest.raises(base.StateError, match=newer):
        _replica(pg_url, "r9")
    for store in stores:
        with pytest.raises(base.StateError) as gone:
            store.check_in_place()  # written by a newer crond since
        assert gone.value.corrupt
        store.close()


def test_tables_dropped_under_the_daemon_are_made_again_at_the_reopen(pg_url: str) -> None:
    store = _replica(pg_url, "r1")
    with psycopg.connect(pg_url) as conn:
        conn.execute("DROP TABLE crond_schema, crond_cursors")
    with pytest.raises(base.StateError) as gone:
        store.check_in_place()
    assert gone.value.corrupt
    with pytest.raises(base.StateError) as failed:
        store.update_view([], [("a", T0)])
    assert failed.value.corrupt
    store.close()
    fresh = _replica(pg_url, "r1")
    fresh.update_view([], [("a", T0)])
    assert fresh.cursors() == {"a": T0}
    fresh.close()


# --- a database that fails ------------------------------------------------------------


def _with(url: str, *, password: str | None = None, dbname: str | None = None) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if password is not None:
        netloc = f"postgres:{quote(password)}@" + netloc.split("@", 1)[-1]
    path = parts.path if dbname is None else f"/{dbname}"
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))


def test_an_unreachable_database_fails_quickly_without_its_password() -> None:
    began = time.monotonic()
    with pytest.raises(base.StateError) as failed:
        PostgresStore.open(
            "postgresql://crond:s3cret-pw@127.0.0.1:1/jobs", cluster="c", replica="r", timeout=2
        )
    assert time.monotonic() - began < 5
    message = str(failed.value)
    assert "postgresql://127.0.0.1/…" in message
    assert "cannot connect" in message
    for secret in ("s3cret-pw", "crond", "jobs"):
        assert secret not in message.replace("(cluster c)", "")
    with pytest.raises(base.StateError) as bad:
        PostgresStore.open("host=x password=s3cret-pw =oops", cluster="c", replica="r")
    assert "s3cret-pw" not in str(bad.value)


def test_a_refused_login_names_neither_password_nor_database(pg_url: str) -> None:
    url = _with(pg_url, password="s3cret-pw", dbname="no_such_db_here")
    with pytest.raises(base.StateError) as failed:
        _replica(url, "r1")
    message = str(failed.value)
    assert "s3cret-pw" not in message
    assert "no_such_db_here" not in message
    assert "does not exist" in message


def test_the_role_is_cut_where_named_not_out_of_the_socket_directory(pg_url: str) -> None:
    # The helper's socket directory is crond-pg-XXXX, and the docs' role is crond.
    parts = urlsplit(pg_url)
    socket_dir = parse_qs(parts.query)["host"][0]
    assert Path(socket_dir).name.startswith("crond-pg-")
    url = urlunsplit((parts.scheme, "crond:s3cret-pw@", parts.path, parts.query, ""))
    with pytest.raises(base.StateError) as failed:
        _replica(url, "r1")
    message = str(failed.value)
    assert message.startswith(f"postgresql://(socket {socket_dir})/… (cluster c): ")
    assert f'on socket "{socket_dir}/.s.PGSQL.5432" failed' in message
    assert 'role "…" does not exist' in message
    assert "s3cret-pw" not in message


def test_a_host_named_like_the_role_is_shown_whole() -> None:
    url = "postgresql://crond:s3cret-pw@crond-db.invalid/crond"
    with pytest.raises(base.StateError) as failed:
        PostgresStore.open(url, cluster="c", replica="r", timeout=2)
    message = str(failed.value)
    assert message.startswith("postgresql://crond-db.invalid/… (cluster c): cannot connect")
    assert "host 'crond-db.invalid'" in message
    assert "s3cret-pw" not in message


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ('role "crond" does not exist', 'role "…" does not exist'),
        ('database "jobs" does not exist', 'database "…" does not exist'),
        ("permission denied for database jobs", "permission denied for database …"),
        ('on socket "/run/crond-pg-1/.s.PGSQL.5432"', 'on socket "/run/crond-pg-1/.s.PGSQL.5432"'),
        ("database jobs.x, jobs_2, jobs-3", "database jobs.x, jobs_2, jobs-3"),
        ("the password s3cret-pw, anywhere: /x/s3cret-pw.d", "the password …, anywhere: /x/….d"),
    ],
)  # fmt: skip
def test_scrub_cuts_names_where_named_and_the_password_everywhere(said: str, shown: str) -> None:
    assert scrub(said, "postgresql://crond:s3cret-pw@db.internal/jobs") == shown


def test_a_stuck_database_fails_the_write_within_the_timeout(pg_url: str) -> None:
    store = _replica(pg_url, "r1", timeout=1.0)
    with psycopg.connect(pg_url) as locker:
        locker.execute("LOCK TABLE crond_cursors IN ACCESS EXCLUSIVE MODE")  # held, open
        began = time.monotonic()
        # A lock wait: ended by the server's lock timeout, before the statement timeout.
        with pytest.raises(base.StateError, match="LockNotAvailable"):
            store.update_view([], [("a", T0)])
        assert time.monotonic() - began < 3
    store.update_view([], [("a", T0)])  # the lock gone, it works again
    assert store.cursors() == {"a": T0}
    store.close()


def test_a_dropped_connection_fails_one_call_then_is_made_again(pg_url: str) -> None:
    """A failover or a restarted server: the call that meets it fails (the recorder logs
    it, degraded), the next connects afresh."""
    store = _replica(pg_url, "r1")
    store.update_view([], [("a", T0)])
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'crond r1'"
        )
    with pytest.raises(base.StateError):
        store.cursors()
    assert store.cursors() == {"a": T0}
    store.close()


def test_the_postgres_store_is_a_replicated_store() -> None:
    """Checked by mypy (`make test`): PostgresStore implements base.Replicated."""
    opened: Callable[..., base.Replicated] = PostgresStore.open
    assert opened is not None


def test_a_wakes_starts_and_told_slots_are_claimed_in_one_call(pg_url: str) -> None:
    """`claim`: the starts and the told (skipped, missed) slots of one wake in one
    transaction; the replica that got a told slot is the one to tell of it."""
    one = PostgresStore.open(pg_url, cluster="one-call", replica="r1")
    two = PostgresStore.open(pg_url, cluster="one-call", replica="r2")
    try:
        told = [("skipped", T0), ("missed", T0 - timedelta(minutes=1))]
        first = one.claim([base.Start("a", "ra", T0)], told, T0)
        second = two.claim([base.Start("a", "ra-2", T0)], told[::-1], T0)
        assert isinstance(first.starts[0], int)
        assert first.told == [True, True]
        assert second.starts == [None]  # r1 holds the start's claim
        assert second.told == [False, False]
    finally:
        one.close()
        two.close()
