"""The PostgreSQL store's cluster side against a real server (tests/pg/): one live process
a replica name (raced by two real processes), the reader that writes nothing, the
database's clock, the replicas and their open runs, kill requests and their poll, who
resumed a pause, and the upgrades of schema 1 and 2 databases.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crond.store import base, files, schema_pg
from crond.store.postgres import PostgresStore

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
ALICE = '{"uid": 1000, "user": "alice", "pid": 4242}'
BOB = '{"uid": 1001, "user": "bob", "pid": 4343}'

# A replica in a process of its own: it says `ready`, waits for `go`, opens the store as
# web-1 of billing, says `ok` or `taken <message>`, and (when it won) holds the name until
# its standard input closes.
_CHILD = textwrap.dedent(
    """
    import sys
    from crond.store.base import ReplicaTaken
    from crond.store.postgres import PostgresStore
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        store = PostgresStore.open(sys.argv[1], cluster="billing", replica="web-1")
    except ReplicaTaken as exc:
        print("taken", exc, flush=True)
        sys.exit(0)
    print("ok", flush=True)
    sys.stdin.read()
    store.close()
    """
)


def _sql(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def _child(url: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def _race_two(url: str) -> None:
    """Two processes of one name open together: one holds it, the other is refused and
    says by whom; this process too, while the winner runs; then the winner exits."""
    children = [_child(url), _child(url)]
    try:
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        said = [child.stdout.readline().strip() for child in children if child.stdout]
        assert sorted(s.split()[0] for s in said) == ["ok", "taken"], said
        winner = children[[s.split()[0] for s in said].index("ok")]
        (taken,) = [s for s in said if s.startswith("taken")]
        assert (
            f"replica web-1 of cluster billing is already running (pid {winner.pid} on host "
            f"{socket.gethostname()}, last heartbeat"
        ) in taken
        assert "give this one another name (--replica or CROND_REPLICA)" in taken
        with pytest.raises(base.ReplicaTaken):
            PostgresStore.open(url, cluster="billing", replica="web-1")
        PostgresStore.open(url, cluster="other", replica="web-1").close()  # another cluster
    finally:
        for child in children:
            child.communicate(timeout=10)  # closes stdin: the winner lets go and exits


def test_two_processes_of_one_name_starting_together_one_wins(pg_url: str) -> None:
    PostgresStore.open(pg_url, cluster="billing", replica="other").close()  # tables made
    _race_two(pg_url)  # for a name never used: the insert is the guard
    _race_two(pg_url)  # for a name a dead process held: the row's lock is
    # A restart after a crash is never held back: the winner's pid is gone.
    store = PostgresStore.open(pg_url, cluster="billing", replica="web-1")
    (row,) = [r for r in store.replicas() if r.name == "web-1"]
    assert row.pid == os.getpid()
    store.close()


def test_the_holder_on_this_host_is_alive_while_its_pid_runs(pg_url: str) -> None:
    PostgresStore.open(pg_url, cluster="c", replica="r1").close()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _sql(pg_url, "UPDATE crond_replicas SET pid = %s, last_beat = %s", (sleeper.pid, T0))
        with pytest.raises(base.ReplicaTaken, match=f"pid {sleeper.pid} on host"):
            PostgresStore.open(pg_url, cluster="c", replica="r1")  # however old its beat
    finally:
        sleeper.kill()
        sleeper.wait()
    PostgresStore.open(pg_url, cluster="c", replica="r1").close()  # its pid is gone


def test_the_holder_on_another_host_is_alive_while_its_beat_is_fresh(pg_url: str) -> None:
    PostgresStore.open(pg_url, cluster="c", replica="r1").close()
    _sql(
        pg_url,
        "UPDATE crond_replicas SET host = 'web-9', pid = 1, last_beat = clock_timestamp() "
        "- interval '3 seconds'",
    )
    with pytest.raises(base.ReplicaTaken, match=r"pid 1 on host web-9, last heartbeat [34]s ago"):
        PostgresStore.open(pg_url, cluster="c", replica="r1")
    # Fresher than 30s refuses; a shorter timeout makes the same beat stale.
    store = PostgresStore.open(
        pg_url, cluster="c", replica="r1", replica_timeout=timedelta(seconds=2)
    )
    (row,) = store.replicas()
    assert (row.host, row.pid) == (socket.gethostname(), os.getpid())
    store.close()
    # Another boot of this host is another host: its pid means nothing here.
    _sql(pg_url, "UPDATE crond_replicas SET boot_id = 'another-boot', pid = %s", (os.getppid(),))
    PostgresStore.open(
        pg_url, cluster="c", replica="r1", replica_timeout=timedelta(seconds=0)
    ).close()


def test_beat_returns_the_databases_clock_and_replicas_list_them(pg_url: str) -> None:
    a = PostgresStore.open(pg_url, cluster="c", replica="b-second")
    b = PostgresStore.open(pg_url, cluster="c", replica="a-first")
    before = datetime.now(UTC)
    clock = a.beat(T0)  # the replica's own idea of now is not the database's
    assert abs(clock - before) < timedelta(seconds=1)
    assert abs(a.clock() - datetime.now(UTC)) < timedelta(seconds=1)
    a.publish_view([], "d" * 64)
    a.beat(T0 + timedelta(seconds=1))
    rows = a.replicas()
    assert [r.name for r in rows] == ["a-first", "b-second"]
    second = rows[1]
    assert (second.last_beat, second.config_digest, second.pid) == (
        T0 + timedelta(seconds=1), "d" * 64, os.getpid(),
    )  # fmt: skip
    assert (second.host, second.boot_id) == (socket.gethostname(), files.boot_id())
    assert rows[0].config_digest is None
    for store in (a, b):
        store.close()


def test_open_runs_are_every_replicas_and_only_the_clusters(pg_url: str) -> None:
    r1 = PostgresStore.open(pg_url, cluster="c", replica="r1")
    r2 = PostgresStore.open(pg_url, cluster="c", replica="r2")
    far = PostgresStore.open(pg_url, cluster="far", replica="r1")
    one = r1.start("a", run_id="run-1", slot=T0, attempt=1, started=T0, cursor=T0)
    (two,) = r2.claim_many([base.Start("b", "run-2", T0)], T0)
    done = r2.start("c", run_id="run-3", slot=T0, attempt=1, started=T0, cursor=T0)
    r2.finish(done, job="c", finished=T0, outcome="success", exit_code=0, duration_s=1,
              output=[])  # fmt: skip
    far.start("a", run_id="run-far", slot=T0, attempt=1, started=T0, cursor=T0)
    assert [(r.id, r.run_id, r.replica) for r in r1.open_runs()] == [
        (one, "run-1", "r1"), (two, "run-2", "r2"),
    ]  # fmt: skip
    assert r1.newest_replicas() == {"a": "r1", "b": "r2", "c": "r2"}
    for store in (r1, r2, far):
        store.close()


def test_kill_requests_reach_every_replica_of_the_cluster_only(pg_url: str) -> None:
    r1 = PostgresStore.open(pg_url, cluster="c", replica="r1")
    r2 = PostgresStore.open(pg_url, cluster="c", replica="r2")
    far = PostgresStore.open(pg_url, cluster="far", replica="r1")
    assert r2.poll(0) == base.Poll({}, [], 0)
    r1.set_pause(base.PauseRow("a", T0, None, "note", ALICE))
    first = r1.request_kill("backup", ALICE, T0)
    far_id = far.request_kill("backup", ALICE, T0)
    second = r1.request_kill("run-42", ALICE, T0 + timedelta(seconds=1))
    seen = r2.poll(0)
    assert list(seen.pauses) == ["a"]
    assert seen.pauses["a"].note == "note"
    assert seen.kills == [
        base.KillRow(first, "backup", ALICE, "r1", T0),
        base.KillRow(second, "run-42", ALICE, "r1", T0 + timedelta(seconds=1)),
    ]
    assert seen.last_kill == second
    assert r2.poll(first).kills == seen.kills[1:]
    assert r2.poll(second) == base.Poll(seen.pauses, [], second)
    assert [k.id for k in far.poll(0).kills] == [far_id]
    for store in (r1, r2, far):
        store.close()


def test_a_poll_returns_at_most_a_thousand_and_old_requests_are_pruned(pg_url: str) -> None:
    store = PostgresStore.open(pg_url, cluster="c", replica="r1")
    _sql(
        pg_url,
        "INSERT INTO crond_kills (cluster, target, who, replica, requested) "
        "SELECT 'c', 'job-' || n, '{}', 'r1', now() - interval '2 hours' "
        "FROM generate_series(1, 1005) AS n",
    )
    fresh = store.request_kill("now", ALICE, datetime.now(UTC))
    page = store.poll(0)
    assert len(page.kills) == 1000
    assert [k.target for k in page.kills[:2]] == ["job-1", "job-2"]
    assert page.last_kill == fresh
    rest = store.poll(page.kills[-1].id)
    assert [k.target for k in rest.kills] == [f"job-{n}" for n in range(1001, 1006)] + ["now"]
    store.checkpoint()
    assert [k.id for k in store.poll(0).kills] == [fresh]
    store.close()


# --- the reader -------------------------------------------------------------------------


def _tables(url: str) -> list[str]:
    rows = _sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    return sorted(r[0] for r in rows)


def test_a_reader_of_a_database_crond_never_used_makes_nothing(pg_url: str) -> None:
    with pytest.raises(base.StateError, match=r"\(cluster billing\): no crond has used this"):
        PostgresStore.reader(pg_url, cluster="billing")
    assert _tables(pg_url) == []


def test_a_reader_refuses_another_schema_and_a_cluster_never_seen(pg_url: str) -> None:
    PostgresStore.open(pg_url, cluster="c", replica="r1").close()
    with pytest.raises(base.StateError, match=r"cluster typo\): no replica of this cluster"):
        PostgresStore.reader(pg_url, cluster="typo")
    _sql(pg_url, "UPDATE crond_schema SET version = 99")
    newer = rf"a newer crond \(schema 99, this one reads {schema_pg.SCHEMA_VERSION}\)"
    with pytest.raises(base.StateError, match=newer):
        PostgresStore.reader(pg_url, cluster="c")
    _sql(pg_url, "UPDATE crond_schema SET version = 1")
    with pytest.raises(base.StateError, match=r"an older crond \(schema 1"):
        PostgresStore.reader(pg_url, cluster="c")


def test_a_reader_reads_and_writes_nothing(pg_url: str) -> None:
    store = PostgresStore.open(pg_url, cluster="c", replica="r1")
    store.start("a", run_id="run-1", slot=T0, attempt=1, started=T0, cursor=T0)
    reader = PostgresStore.reader(pg_url, cluster="c")
    assert isinstance(reader, base.ClusterReader)
    assert [r.run_id for r in reader.recent(None, 10)] == ["run-1"]
    assert [r.name for r in reader.replicas()] == ["r1"]
    with pytest.raises(base.StateError, match="ReadOnlySqlTransaction"):
        reader.set_meta("k", "v")  # the server refuses it
    with pytest.raises(base.StateError, match="ReadOnlySqlTransaction"):
        reader.beat(T0)
    assert [r.name for r in reader.replicas()] == ["r1"]
    assert _sql(pg_url, "SELECT application_name FROM pg_stat_activity WHERE "
                "application_name LIKE 'crond%%' ORDER BY 1") == [
        ("crond (reading)",), ("crond r1",),
    ]  # fmt: skip
    reader.close()
    store.close()


# --- the schema's upgrade ------------------------------------------------------------------


def _old_schema(url: str, version: int) -> None:
    """The tables as a crond of schema `version` made them."""
    later = {s for v in range(version, schema_pg.SCHEMA_VERSION) for s in schema_pg.UPGRADES[v]}
    with psycopg.connect(url) as conn:
        for statement in schema_pg.TABLES:
            if statement not in later:
                conn.execute(statement)
        conn.execute("INSERT INTO crond_schema (version) VALUES (%s)", (version,))
        conn.execute("INSERT INTO crond_meta (cluster, key, value) VALUES ('c', 'kept', 'yes')")


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_database_is_upgraded_to_keep_kills_and_resumes(pg_url: str, version: int) -> None:
    _old_schema(pg_url, version)
    assert "crond_resumes" not in _tables(pg_url)
    assert ("crond_kills" in _tables(pg_url)) == (version == 2)
    store = PostgresStore.open(pg_url, cluster="c", replica="r1")
    assert _sql(pg_url, "SELECT version FROM crond_schema") == [(schema_pg.SCHEMA_VERSION,)]
    assert store.get_meta("kept") == "yes"
    kill = store.request_kill("a", ALICE, T0)
    assert [k.id for k in store.poll(0).kills] == [kill]
    store.set_pause(base.PauseRow("a", T0, None, None, ALICE))
    store.resume("a", BOB, T0 + timedelta(minutes=1))
    assert store.resumed_by("a", T0) == BOB
    store.check_in_place()
    store.close()


# --- who resumed --------------------------------------------------------------------------


def test_a_resume_ends_the_pause_and_says_who_to_the_others(pg_url: str) -> None:
    r1 = PostgresStore.open(pg_url, cluster="c", replica="r1")
    r2 = PostgresStore.open(pg_url, cluster="c", replica="r2")
    r1.set_pause(base.PauseRow("a", T0, None, None, ALICE))
    r2.resume("a", BOB, T0 + timedelta(minutes=1))
    assert r1.poll(0).pauses == {}
    assert r1.resumed_by("a", T0) == BOB
    assert r1.resumed_by("a", T0 + timedelta(seconds=1)) is None  # a later pause's: not it
    r2.resume("b", BOB, T0)  # not paused: nothing kept
    assert r1.resumed_by("b", T0 - timedelta(days=1)) is None
    # Paused again and resumed by another between two polls: the last resume says.
    r1.set_pause(base.PauseRow("a", T0 + timedelta(minutes=2), None, None, ALICE))
    r1.resume("a", ALICE, T0 + timedelta(minutes=3))
    assert r2.resumed_by("a", T0) == ALICE
    far = PostgresStore.open(pg_url, cluster="far", replica="r1")
    assert far.resumed_by("a", T0) is None  # another cluster's
    _sql(pg_url, "UPDATE crond_resumes SET resumed = now() - interval '2 hours'")
    r1.checkpoint()  # an hour old: pruned
    assert r2.resumed_by("a", T0) is None
    for store in (r1, r2, far):
        store.close()
