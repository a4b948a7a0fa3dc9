"""What replicas say in their logs, with the real binary and a real PostgreSQL: who paused
and who resumed a job, on every replica and at the same level as the replica that was
asked; which replica of which cluster each one is.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import run_cli
from tests.e2e.replicas import Replica, schedules, start_replica
from tests.pg import server as pg

START = 20.0


def _start(group: list[Replica], file: Path, names: list[str], base: Path) -> list[Replica]:
    started = [start_replica(group, file, name, base) for name in names]
    for replica in started:
        replica.daemon.wait_for("daemon.started", timeout=START)
    return started


def test_a_pause_and_its_resume_are_logged_with_who_asked_on_every_replica(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    f = schedules(tmp_path / "s.yaml", pg_url, 'tick: {every: 1s, command: "true"}')
    r1, r2 = _start(group, f, ["r1", "r2"], tmp_path)

    paused = run_cli("pause", str(f), "tick", "--for", "10m", "--socket", str(r1.socket))
    assert paused.returncode == 0, paused.stderr
    asked = r1.daemon.wait_for("job.paused", timeout=5)
    told = r2.daemon.wait_for("job.paused", lambda e: e.get("via") == "cluster", timeout=5)
    assert (asked["level"], told["level"]) == ("warning", "warning")
    assert told["by"] == asked["by"]
    pauser = asked["by"]

    resumed = run_cli("resume", str(f), "tick", "--socket", str(r2.socket))
    assert resumed.returncode == 0, resumed.stderr
    asked = r2.daemon.wait_for("job.resumed", timeout=5)
    told = r1.daemon.wait_for("job.resumed", lambda e: e.get("via") == "cluster", timeout=5)
    assert "via" not in asked
    assert isinstance(asked["by"], dict), asked
    assert asked["by"]["pid"] != pauser["pid"]  # the resume's caller, not the pause's
    assert told["by"] == asked["by"]
    assert (asked["level"], told["level"]) == ("info", "info")


def test_a_replica_names_itself_and_its_cluster_when_it_starts_and_when_the_database_goes(
    tmp_path: Path, group: list[Replica], own_pg: pg.Server
) -> None:
    tick = 'tick: {every: 1s, command: "true"}'
    f = schedules(tmp_path / "s.yaml", own_pg.url(), tick, cluster="billing")
    (web,) = _start(group, f, ["web-1"], tmp_path)
    named = {"replica": "web-1", "cluster": "billing"}
    (started,) = web.daemon.named("daemon.started")
    opened = web.daemon.wait_for("state.opened")
    assert own_pg.halt() == 0
    down = web.daemon.wait_for("database.unavailable", timeout=10)
    own_pg.restart()
    up = web.daemon.wait_for("database.available", timeout=15)
    for event in (started, opened, down, up):
        assert {key: event.get(key) for key in named} == named, event
