"""crond/store/pg_follow.py on the real PostgreSQL: a dashboard's request is what a
replica's poll sees (only while fresh), the tail it writes is bounded and read back in
order, a request gone is not made again by a write, and expired rows are pruned."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

from crond.store.pg_follow import FollowReads
from crond.store.postgres import PostgresStore
from crond.store.rows import LINE_CHARS, TAIL_LINES

T0 = datetime(2026, 1, 5, 2, 0, tzinfo=UTC)


def test_a_request_its_tail_and_its_end(pg_url: str) -> None:
    replica = PostgresStore.open(pg_url, cluster="c", replica="r2")
    web = FollowReads(pg_url, cluster="c", replica="web", timeout=5.0)
    try:
        assert replica.poll(0).watched == frozenset()  # nobody watches
        replica.start("j", run_id="run-1", slot=T0, attempt=1, started=T0, cursor=T0)
        first = web.ask_tail("run-1")
        assert (first.lines, first.seen, first.ended) == ([], 0, False)
        assert first.attempt is not None
        assert (first.attempt["replica"], first.attempt["finished"]) == ("r2", None)
        assert replica.poll(0).watched == frozenset({"run-1"})
        many = [("stdout", f"line {i}") for i in range(TAIL_LINES + 50)]
        many[-1] = ("stderr", "x" * (LINE_CHARS + 10))
        replica.write_tails([("run-1", many, 500, False)])
        tail = web.ask_tail("run-1")
        assert tail.seen == 500
        assert len(tail.lines) == TAIL_LINES  # the last ones, each cut
        assert tail.lines[0] == ("stdout", "line 50")
        assert tail.lines[-1] == ("stderr", "x" * LINE_CHARS)
        replica.write_tails([("run-1", [("stdout", "bye")], 501, True)])
        assert web.ask_tail("run-1").ended
        # No such run in the cluster: said by its newest attempt, None.
        assert web.ask_tail("nope").attempt is None
    finally:
        web.close()
        replica.close()


def test_an_expired_request_is_not_watched_then_pruned(pg_url: str) -> None:
    replica = PostgresStore.open(pg_url, cluster="c", replica="r2")
    web = FollowReads(pg_url, cluster="c", replica="web", timeout=5.0)
    try:
        web.ask_tail("old")
        with psycopg.connect(pg_url) as conn:
            conn.execute("UPDATE crond_follows SET until = clock_timestamp() - interval '5s'")
        assert replica.poll(0).watched == frozenset()  # expired: nobody looks any more
        replica.write_tails([("gone", [("stdout", "x")], 1, False)])  # no request: no row
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT run_id FROM crond_follows").fetchall() == [("old",)]
            conn.execute("UPDATE crond_follows SET until = clock_timestamp() - interval '2m'")
        web.ask_tail("new")  # a dashboard's ask prunes what expired a minute ago
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT run_id FROM crond_follows").fetchall() == [("new",)]
    finally:
        web.close()
        replica.close()
