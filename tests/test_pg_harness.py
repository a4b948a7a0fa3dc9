"""The PostgreSQL harness (tests/pg/), tried against the real server it starts: a fresh
database per test, separate from the others; the uniqueness guarantee that slot claims
will rest on (one insert of a key wins, the others get UniqueViolation, even when they
race); and a server that stops cleanly and leaves nothing behind, when asked or when its
run is interrupted. Without PostgreSQL on the machine these tests skip (under CI=true
they fail): tests/pg/plugin.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import psycopg
import pytest
from psycopg import errors

from tests.e2e.harness import eventually
from tests.pg import server as pg
from tests.pg.plugin import Databases, refuse

REPO = Path(__file__).resolve().parent.parent
CLAIMS = "CREATE TABLE claims (job text, slot text, owner text, PRIMARY KEY (job, slot))"


def test_a_fresh_database_takes_a_table(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        conn.execute(CLAIMS)
        conn.execute("INSERT INTO claims VALUES ('a', '2026-01-01T00:00Z', 'r1')")
        conn.commit()
        assert conn.execute("SELECT owner FROM claims").fetchall() == [("r1",)]
        assert conn.execute("SELECT current_database()").fetchone() == (
            urlsplit(pg_url).path.lstrip("/"),
        )


def test_two_fresh_databases_are_separate_and_dropped_after(pg_databases: Databases) -> None:
    first, second = pg_databases.new(), pg_databases.new()
    assert first != second
    with psycopg.connect(first) as conn:
        conn.execute(CLAIMS)
    with psycopg.connect(second) as conn:
        seen = conn.execute("SELECT to_regclass('claims') IS NULL").fetchone()
        assert seen == (True,)
    lingering = psycopg.connect(first)  # a client a failed test left behind
    names = list(pg_databases.names)
    pg_databases.drop_all()
    lingering.close()
    with psycopg.connect(pg_databases.server.url()) as admin:
        left = admin.execute(
            "SELECT count(*) FROM pg_database WHERE datname = ANY(%s)", (names,)
        ).fetchone()
    assert left == (0,)


def test_a_second_claim_of_a_key_raises_unique_violation(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(CLAIMS)
        conn.execute("INSERT INTO claims VALUES ('a', 's1', 'r1')")
        conn.execute("INSERT INTO claims VALUES ('a', 's2', 'r1')")  # another slot: fine
        with pytest.raises(errors.UniqueViolation) as raised:
            conn.execute("INSERT INTO claims VALUES ('a', 's1', 'r2')")
        assert raised.value.sqlstate == "23505"
        assert conn.execute("SELECT owner FROM claims WHERE slot = 's1'").fetchall() == [("r1",)]


@pytest.mark.parametrize("first_ends", ["commit", "rollback"])
def test_a_claim_waits_for_the_open_one_then_loses_or_wins(pg_url: str, first_ends: str) -> None:
    """The second insert of a key blocks on the first's open transaction: it fails if
    that one commits and succeeds if it rolls back. Exactly one claim is ever kept."""
    with psycopg.connect(pg_url, autocommit=True) as setup:
        setup.execute(CLAIMS)
    first, second = psycopg.connect(pg_url), psycopg.connect(pg_url)
    outcome: list[BaseException | None] = []
    try:
        first.execute("INSERT INTO claims VALUES ('a', 's1', 'first')")

        def claim() -> None:
            try:
                second.execute("INSERT INTO claims VALUES ('a', 's1', 'second')")
                second.commit()
                outcome.append(None)
            except errors.UniqueViolation as exc:
                second.rollback()
                outcome.append(exc)

        racer = threading.Thread(target=claim)
        racer.start()
        waiting = "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s"
        with psycopg.connect(pg_url, autocommit=True) as watch:
            pid = second.info.backend_pid
            eventually(
                lambda: watch.execute(waiting, (pid,)).fetchone() == ("Lock",),
                what="the second claim waits on the first's lock",
            )
        assert outcome == []
        getattr(first, first_ends)()
        racer.join(10)
        assert not racer.is_alive()
    finally:
        first.close()
        second.close()
    with psycopg.connect(pg_url) as conn:
        owners = conn.execute("SELECT owner FROM claims").fetchall()
    if first_ends == "commit":
        assert isinstance(outcome[0], errors.UniqueViolation)
        assert owners == [("first",)]
    else:
        assert outcome == [None]
        assert owners == [("second",)]


def test_of_many_racing_claims_exactly_one_commits(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as setup:
        setup.execute(CLAIMS)
    racers = 8
    conns = [psycopg.connect(pg_url) for _ in range(racers)]
    start = threading.Barrier(racers)
    won: list[str] = []
    lost: list[str] = []

    def claim(conn: psycopg.Connection[tuple[object, ...]], name: str) -> None:
        start.wait(10)
        try:
            conn.execute("INSERT INTO claims VALUES ('a', 's1', %s)", (name,))
            conn.commit()
            won.append(name)
        except errors.UniqueViolation:
            conn.rollback()
            lost.append(name)

    threads = [threading.Thread(target=claim, args=(conn, f"r{i}")) for i, conn in enumerate(conns)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    for conn in conns:
        conn.close()
    assert len(won) == 1
    assert len(lost) == racers - 1
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT owner FROM claims").fetchall() == [(won[0],)]


def _gone(server_dir: Path, pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return not server_dir.exists()
    return False


def test_a_server_stops_cleanly_and_leaves_nothing(pg_server: pg.Server) -> None:
    # pg_server first: this test runs only where the session's server could start.
    with pg.start() as server:
        with psycopg.connect(server.url()) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert server.socket.exists()
        kept = psycopg.connect(server.url())  # fast shutdown must not wait for it
        status = server.stop()
    assert status == 0
    assert not server.directory.exists()
    assert _fails(kept)
    kept.close()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(server.url(), connect_timeout=2)
    assert server.stop() == 0  # again: harmless


def _fails(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False


def test_a_halted_server_refuses_then_restarts_with_its_data(pg_server: pg.Server) -> None:
    with pg.start() as server:
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n integer)")
            conn.execute("INSERT INTO kept VALUES (7)")
        assert server.halt() == 0
        assert server.directory.exists()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(server.url(), connect_timeout=2)
        server.restart()
        with psycopg.connect(server.url()) as conn:
            assert conn.execute("SELECT n FROM kept").fetchall() == [(7,)]
    assert not server.directory.exists()


def test_an_interrupted_run_stops_its_server_and_removes_it(pg_server: pg.Server) -> None:
    """`python -m tests.pg.server`, interrupted as by Ctrl-C, still cleans up."""
    script = subprocess.Popen(
        [sys.executable, "-m", "tests.pg.server"],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert script.stdout is not None
    url = script.stdout.readline().decode().strip()
    assert url.startswith("postgresql://postgres@/postgres?host="), script.stderr
    directory = Path(unquote(urlsplit(url).query.split("&")[0].removeprefix("host=")))
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    postmaster = int((directory / "data" / "postmaster.pid").read_text().split()[0])
    script.send_signal(signal.SIGINT)
    assert script.wait(20) == 130
    script.stdout.close()
    assert script.stderr is not None
    script.stderr.close()
    eventually(lambda: _gone(directory, postmaster), what="the server and its directory gone")


def test_missing_binaries_are_named(tmp_path: Path) -> None:
    with pytest.raises(pg.UnavailableError, match=r"initdb, postgres.*install Debian's postgresql"):
        pg.find_bindir(search_path=str(tmp_path), patterns=[str(tmp_path / "*/bin")])


def test_the_newest_version_is_chosen(tmp_path: Path) -> None:
    for version in ("9.6", "15", "13"):
        bindir = tmp_path / version / "bin"
        bindir.mkdir(parents=True)
        (bindir / "initdb").touch()
        (bindir / "postgres").touch()
    found = pg.find_bindir(search_path=str(tmp_path), patterns=[str(tmp_path / "*/bin")])
    assert found == tmp_path / "15" / "bin"


def test_without_postgres_a_test_skips_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no PostgreSQL: no initdb"):
        refuse("no initdb")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required under CI=true: no initdb"):
        refuse("no initdb")
