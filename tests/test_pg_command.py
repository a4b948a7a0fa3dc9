"""`python -m tests.pg.server` by hand (tests/pg/command.py), as docs/replicas.md "Try
replicas on one machine" uses it: `--halt DIR` and `--restart DIR` stop and start the
server of the script serving DIR on the same data and socket, while it waits or while it
runs a command; a directory nobody serves is said to be so. Real processes, a real server.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import unquote, urlsplit

import psycopg

from tests.pg import server as pg

REPO = Path(__file__).resolve().parent.parent
SCRIPT = [sys.executable, "-m", "tests.pg.server"]


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SCRIPT, *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )


def _accepts(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return False
    return True


def test_the_waiting_script_halts_and_restarts_its_server_when_asked(
    pg_server: pg.Server,
) -> None:
    helper = subprocess.Popen(
        SCRIPT, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert helper.stdout is not None
        assert helper.stderr is not None
        url = helper.stdout.readline().strip()
        said = helper.stderr.readline()
        directory = Path(unquote(urlsplit(url).query.split("&")[0].removeprefix("host=")))
        assert f"--halt {directory}, then --restart {directory}" in said, said
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n integer); INSERT INTO kept VALUES (7)")

        halted = _script("--halt", str(directory))
        assert (halted.returncode, halted.stderr) == (0, "halted\n")
        assert not _accepts(url)
        restarted = _script("--restart", str(directory))
        assert restarted.returncode == 0, restarted.stderr
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT n FROM kept").fetchall() == [(7,)]
    finally:
        helper.send_signal(signal.SIGTERM)
        status = helper.wait(20)
        for pipe in (helper.stdout, helper.stderr):
            if pipe is not None:
                pipe.close()
    assert status == 130
    assert not directory.exists()


def test_a_script_running_a_command_halts_and_restarts_for_it(pg_server: pg.Server) -> None:
    outage = textwrap.dedent(
        f"""
        import os, subprocess, sys
        import psycopg
        script = {SCRIPT!r}
        def accepts():
            try:
                psycopg.connect(os.environ["DATABASE_URL"], connect_timeout=2).close()
            except psycopg.OperationalError:
                return False
            return True
        assert accepts()
        subprocess.run([*script, "--halt", os.environ["PGHOST"]], check=True)
        assert not accepts()
        subprocess.run([*script, "--restart", os.environ["PGHOST"]], check=True)
        assert accepts()
        sys.exit(7)
        """
    )
    ran = _script("--", sys.executable, "-c", outage)
    assert ran.returncode == 7, ran.stderr
    assert "halted" in ran.stderr
    assert "restarted" in ran.stderr


def test_asking_a_directory_nobody_serves_says_so(tmp_path: Path) -> None:
    asked = _script("--halt", str(tmp_path))
    assert asked.returncode == 2
    assert asked.stderr == f"tests.pg.server: no python -m tests.pg.server serves {tmp_path}\n"
