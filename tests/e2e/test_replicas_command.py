"""`crond replicas FILE` against real replicas of the real binary on a real PostgreSQL:
each replica with its host, pid, heartbeat, version and whether it runs this file, alive
or silent; and a file without a database (docs/replicas.md)."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

from crond import __version__
from tests.e2e.harness import eventually, run_cli
from tests.e2e.replicas import Replica, schedules
from tests.e2e.test_replicas import start_all

JOBS = "tick: {every: 1h, command: 'true'}\n"


def _rows(file: Path) -> dict[str, dict[str, object]]:
    done = run_cli("replicas", str(file), "--json")
    assert done.returncode == 0, done.stderr
    return {row["name"]: row for row in map(json.loads, done.stdout.splitlines())}


def test_replicas_lists_each_with_its_heartbeat_and_says_who_went_silent(
    tmp_path: Path, pg_url: str, group: list[Replica]
) -> None:
    file = schedules(tmp_path / "s.yaml", pg_url, JOBS, cluster="view")
    start_all(group, file, ["r1", "r2"], tmp_path)
    eventually(
        lambda: [r.get("same_file") for r in _rows(file).values()] == [True, True],
        what="both replicas report the file they run",
    )
    rows = _rows(file)
    r1 = rows["r1"]
    assert (r1["host"], r1["pid"], r1["version"], r1["alive"]) == (
        socket.gethostname(), group[0].daemon.proc.pid, __version__, True
    )  # fmt: skip
    assert isinstance(r1["heartbeat_age_s"], float)
    assert r1["heartbeat_age_s"] < 3
    table = run_cli("replicas", str(file))
    header, *lines = table.stdout.splitlines()
    assert header.split() == [
        "NAME",
        "HOST",
        "PID",
        "STATE",
        "HEARTBEAT",
        "VERSION",
        "FILE",
        "STARTED",
    ]
    assert [line.split()[0] for line in lines] == ["r1", "r2"]
    assert all(" alive " in line and " same " in line for line in lines)
    os.kill(group[1].daemon.proc.pid, signal.SIGKILL)  # r2 stops beating
    eventually(lambda: _rows(file)["r2"]["alive"] is False, timeout=10, what="r2 silent")
    assert " silent " in run_cli("replicas", str(file)).stdout.splitlines()[2]
    file.write_text(file.read_text() + "  # an edit not reloaded\n")
    assert _rows(file)["r1"]["same_file"] is False


def test_replicas_without_a_database_says_so(tmp_path: Path) -> None:
    file = tmp_path / "s.yaml"
    file.write_text("jobs:\n  " + JOBS)
    done = run_cli("replicas", str(file), env={"CROND_DATABASE_URL": ""})
    assert done.returncode == 1
    assert done.stderr == (
        f"crond: {file} has no daemon.database (and CROND_DATABASE_URL is not set): "
        "replicas share a PostgreSQL database (docs/replicas.md)\n"
    )


def test_replicas_of_a_cluster_no_replica_used_says_so(tmp_path: Path, pg_url: str) -> None:
    file = schedules(tmp_path / "s.yaml", pg_url, JOBS, cluster="nobody-here")
    done = run_cli("replicas", str(file))
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        "crond: <url> (cluster nobody-here): no crond has used this database yet\n"
    )  # the URL's secrets never shown
