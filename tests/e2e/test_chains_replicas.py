"""Chains with replicas of the real `crond` binary (docs/workflows.md, "With replicas"):
the replica that ran a parent is killed (SIGKILL, its jobs with it, as systemd kills a
dead service's cgroup) after the parent's end and before its child's start; a survivor
takes the child's record over once the dead replica is silent for `replica_timeout`
and starts the child once, told of the parent's run; the killed replica, started again,
starts nothing more.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tests.daemon.test_chains_fake_clock import TELL
from tests.e2e.harness import eventually, run_cli
from tests.e2e.replicas import Replica, reap, schedules, start_replica
from tests.e2e.test_locks_replicas import _kill_with_its_jobs

NEVER = "0 0 1 1 *"  # (the jobs below run when triggered)


def _until_recorded(url: str) -> None:
    """Wait until extract's end, and the chained run it starts, are in the database."""
    deadline = time.monotonic() + 10
    with psycopg.connect(url, autocommit=True) as conn:
        while not conn.execute("SELECT 1 FROM crond_chained WHERE job = 'load'").fetchone():
            assert time.monotonic() < deadline, "extract's end never written"
            time.sleep(0.02)


def _beats(replica: Replica, count: int) -> None:
    """Wait until `replica`'s loop has beaten `count` times more with the database
    answering (its liveness file rewritten, `database` not unavailable)."""
    seen: set[str] = set()
    deadline = time.monotonic() + 20
    while len(seen) < count + 1:
        assert time.monotonic() < deadline, "no heartbeat"
        live = replica.liveness_json() or {}
        if live.get("updated_at") and live.get("database") != "unavailable":
            seen.add(str(live["updated_at"]))
        time.sleep(0.05)


@pytest.mark.timeout(90)
def test_a_child_whose_parents_replica_died_before_its_start_runs_once_on_another(
    tmp_path: Path, pg_url: str
) -> None:
    out = tmp_path / "told.jsonl"
    script = tmp_path / "tell.py"
    script.write_text(TELL)
    jobs = f"""\
        hold: {{cron: "{NEVER}", locks: [db], command: 'exec sleep 60'}}
        extract: {{cron: "{NEVER}", command: 'true'}}
        load: {{after: extract, locks: [db], grace: 1h, command: '{sys.executable} {script} {out}'}}
        """
    f = schedules(tmp_path / "s.yaml", pg_url, jobs)
    f.write_text("locks: {db: 1}\n" + f.read_text())
    group: list[Replica] = []
    try:
        r1 = start_replica(group, f, "r1", tmp_path)
        r2 = start_replica(group, f, "r2", tmp_path)
        for replica in (r1, r2):
            replica.daemon.wait_for("daemon.started")
        held = run_cli("trigger", str(f), "hold", "--socket", str(r1.socket))
        assert held.returncode == 0, held.stderr
        r1.daemon.wait_for("job.started", lambda e: e["job"] == "hold")  # db is hold's
        # r2's `ps` shows r1's run of hold, and the lock it holds (from the database).
        ps = run_cli("ps", str(f), "--socket", str(r2.socket), "--json")
        assert ps.returncode == 0, ps.stderr
        rows = [json.loads(line) for line in ps.stdout.splitlines()]
        assert [(r["job"], r.get("replica"), r.get("locks")) for r in rows if "job" in r] == [
            ("hold", "r1", ["db"])
        ], rows
        triggered = run_cli("trigger", str(f), "extract", "--socket", str(r1.socket))
        assert triggered.returncode == 0, triggered.stderr
        extract = triggered.stdout.strip()
        r1.daemon.wait_for("job.finished", lambda e: e["run_id"] == extract)
        waiting = r1.daemon.wait_for("job.waiting", lambda e: e["job"] == "load")
        # `status` shows who holds db and who waits, as the replicas keep them.
        eventually(
            lambda: "waiting: load@" in run_cli("status", str(f)).stdout,
            what="status shows load waiting for db (kept at the next heartbeat)",
        )
        assert "lock db: held by hold@" in run_cli("status", str(f)).stdout
        _until_recorded(pg_url)  # (extract's end is written off the loop, just after its event)
        _kill_with_its_jobs(r1)  # between extract's end and load's start
        killed_at = time.monotonic()
        lost = r2.daemon.wait_for("job.lost", lambda e: e["job"] == "hold", timeout=20)
        assert lost["replica"] == "r1"
        adopted = r2.daemon.wait_for("cluster.chains_adopted", timeout=20)
        assert [(r["job"], r["parent_run_id"]) for r in adopted["runs"]] == [("load", extract)]
        done = r2.daemon.wait_for("job.finished", lambda e: e["job"] == "load", timeout=20)
        took = time.monotonic() - killed_at
        assert done["outcome"] == "success"
        # r1 starts again under its name: its record was taken over and is gone.
        r1 = start_replica(group, f, "r1", tmp_path)
        r1.daemon.wait_for("daemon.started")
        _beats(r1, 3)  # (its first beat asked for its previous process's records)
        for replica in (r1, r2):
            assert replica.daemon.stop() == 0, replica.text()[-2000:]
    finally:
        reap(group)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 1, lines  # once, on r2; not again when r1 came back
    assert lines[0]["CROND_PARENT_RUN_ID"] == extract
    assert lines[0]["CROND_PARENT_OUTCOME"] == "success"
    assert lines[0]["CROND_SLOT"] == waiting["slot"]
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM crond_chained").fetchone() == (0,)
        runs = conn.execute("SELECT replica FROM crond_attempts WHERE job = 'load'").fetchall()
    assert runs == [("r2",)]
    assert took < 3.0 + 5.0, took  # replica_timeout, then a heartbeat or two
