"""Replicas with the real binary and a real PostgreSQL, beyond tests/e2e/test_replicas.py:
a database that is down when a replica starts (it starts anyway, runs nothing, and
begins when the database answers), `@reboot` once per replica, catch-up once for the
cluster, the replica settings given outside the file checked as the file's; `overlap:
skip` held across replicas through a run's retry wait, a slot skipped or missed told by
one replica only, a pause refused while the database is away, and the jobs' environment
without crond's database settings.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

from tests.e2e.harness import eventually, run_cli
from tests.e2e.replicas import (
    Replica,
    attempts,
    doubled,
    events,
    now,
    schedules,
    start_replica,
)
from tests.e2e.test_store import wait_for_phase
from tests.pg import server as pg

SECOND = timedelta(seconds=1)
START = 20.0


def test_a_replica_started_while_the_database_is_down_waits_for_it(
    tmp_path: Path, group: list[Replica], own_pg: pg.Server
) -> None:
    """...and one that finds then that a live replica has its name stops (exit 1)."""
    url = own_pg.url()
    f = schedules(tmp_path / "s.yaml", url, 'tick: {every: 1s, command: "true"}')
    r0 = start_replica(group, f, "r0", tmp_path)
    r0.daemon.wait_for("state.opened", timeout=START)
    assert own_pg.halt() == 0
    r1 = start_replica(group, f, "r1", tmp_path)
    r1.daemon.wait_for("daemon.started", timeout=START)
    twin = start_replica(group, f, "r0", tmp_path / "twin")  # r0's name, r0 alive
    twin.daemon.wait_for("daemon.started", timeout=START)
    r1.daemon.wait_for("database.unavailable", timeout=5)
    eventually(
        lambda: (r1.liveness_json() or {}).get("database") == "unavailable", 5, "unavailable"
    )
    missed = r1.daemon.wait_for("job.missed", lambda e: e.get("reason") == "database", 5)
    assert missed["job"] == "tick"
    assert r1.daemon.named("job.started") == []  # no claim, no run
    own_pg.restart()
    r1.daemon.wait_for("database.available", timeout=10)
    r1.daemon.wait_for("state.opened", timeout=5)
    r1.daemon.wait_for("job.started", timeout=5)
    eventually(lambda: (r1.liveness_json() or {}).get("database") == "ok", 5, "ok")
    rows = attempts(url, job="tick")
    assert rows
    assert doubled(rows) == {}
    twin.daemon.wait_for("cluster.replica_taken", timeout=10)
    assert twin.daemon.exited() == 1
    assert r0.daemon.proc.poll() is None


def test_reboot_jobs_run_once_per_replica_and_catch_up_once_for_the_cluster(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    jobs = """\
        boot: {cron: "@reboot", command: "true"}
        late: {every: 4s, grace: 1s, catchup: latest, command: "true"}
    """
    f = schedules(tmp_path / "s.yaml", pg_url, jobs)
    first = [start_replica(group, f, name, tmp_path) for name in ("r1", "r2")]
    for replica in first:
        replica.daemon.wait_for("daemon.started", timeout=START)
    eventually(lambda: len(attempts(pg_url, job="late")) >= 1, 10, "a run of late")
    boots = attempts(pg_url, job="boot")
    eventually(lambda: len(attempts(pg_url, job="boot")) == 2, 5, "a boot run on each replica")
    boots = attempts(pg_url, job="boot")
    assert sorted(r.replica for r in boots) == ["r1", "r2"]

    for replica in first:  # the whole cluster down for two slots or more
        replica.daemon.signal(signal.SIGTERM)
    for replica in first:
        assert replica.daemon.exited() == 0
    down = now()
    eventually(lambda: now() - down > 9 * SECOND, 12, "downtime")  # two slots of late pass
    # Restarted 1.3 s into late's 4 s period: its latest slot is then later than its 1 s
    # grace (a catch-up, not a plain start), and the replicas have 2.7 s to start before
    # the next slot, however busy the machine (the test's own timing, not a guess).
    wait_for_phase(4.0, 1.3)
    again = [start_replica(group, f, name, tmp_path) for name in ("r1", "r2")]
    for replica in again:
        replica.daemon.wait_for("daemon.started", timeout=START)
    eventually(lambda: bool(events(again, "job.caught_up")), 10, "a catch-up run")
    eventually(lambda: now() - down > 12 * SECOND, 10, "settled")
    caught = events(again, "job.caught_up")  # every one logged so far
    assert len(caught) == 1, caught  # one replica ran it, for the cluster
    assert doubled(attempts(pg_url, job="late")) == {}
    # @reboot: the same boot of the same host: neither replica runs it again.
    assert len(attempts(pg_url, job="boot")) == 2


def test_a_skip_job_waiting_for_its_retry_holds_the_job_on_every_replica(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    """A run between its attempts is still going: no replica starts the next slot then,
    and each slot passed over is told once, by one replica."""
    job = """\
        flaky:
          every: 2s
          command: "exit 1"
          retry: {attempts: 1, delay: 3s}
    """
    f = schedules(tmp_path / "s.yaml", pg_url, job)
    for name in ("r1", "r2"):
        start_replica(group, f, name, tmp_path)
    for replica in group:
        replica.daemon.wait_for("daemon.started", timeout=START)
    eventually(lambda: len({r.run_id for r in attempts(pg_url, job="flaky")}) >= 3, 20, "3 runs")
    rows = attempts(pg_url, job="flaky")
    spans: dict[str, list[datetime]] = {}
    for r in rows:
        if r.finished is not None:
            spans.setdefault(r.run_id, []).extend([r.started, r.finished])
    done = sorted((min(v), max(v)) for v in spans.values() if len(v) == 4)  # both attempts
    assert len(done) >= 2, rows
    for (_, end), (begin, _) in itertools.pairwise(done):
        assert begin >= end, f"two runs of an overlap: skip job at once: {done}"
    skipped = [(e["job"], e["slot"]) for e in events(group, "job.skipped")]
    assert skipped, "the slots during the retry wait were not told as skipped"
    assert len(skipped) == len(set(skipped)), f"a skip told twice: {skipped}"


def test_replace_stops_the_runs_of_the_job_on_the_other_replicas(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    job = 'long: {every: 3s, overlap: replace, kill_after: 1s, command: "sleep 600"}'
    f = schedules(tmp_path / "s.yaml", pg_url, job)
    for name in ("r1", "r2"):
        start_replica(group, f, name, tmp_path)
    for replica in group:
        replica.daemon.wait_for("daemon.started", timeout=START)
    eventually(lambda: len(attempts(pg_url, job="long")) >= 4, 20, "4 runs")
    rows = sorted(attempts(pg_url, job="long"), key=lambda r: r.started)
    assert len({r.replica for r in rows}) == 2, "the runs did not go to both replicas"
    for old, new in itertools.pairwise(rows):
        if old.replica == new.replica:
            continue  # stopped by its own replica's planner, as on one daemon
        # another replica's new run asked this one to stop: within a poll and the kill
        run_id = old.run_id
        eventually(functools.partial(_finished, pg_url, run_id), 5, f"{run_id} ended")
        ended = next(r for r in attempts(pg_url, job="long") if r.run_id == run_id)
        assert ended.outcome == "killed", ended
        assert ended.finished is not None
        assert ended.finished - new.started < 3 * SECOND, (old, ended, new)


def _finished(url: str, run_id: str) -> bool:
    return any(r.finished is not None for r in attempts(url) if r.run_id == run_id)


def test_a_replica_at_its_max_running_tells_nothing_of_slots_another_ran(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    jobs = """\
        a: {every: 2s, grace: 1s, command: "sleep 1.5"}
        b: {every: 2s, grace: 1s, command: "sleep 1.5"}
    """
    f = schedules(tmp_path / "s.yaml", pg_url, jobs)
    f.write_text(f.read_text().replace("daemon:\n", "daemon:\n  max_running: 1\n", 1))
    for name in ("r1", "r2"):
        start_replica(group, f, name, tmp_path)
    for replica in group:
        replica.daemon.wait_for("daemon.started", timeout=START)
    eventually(lambda: len(attempts(pg_url)) >= 8, 20, "8 runs")
    ran = {(r.job, r.slot.strftime("%Y-%m-%dT%H:%M:%SZ")) for r in attempts(pg_url)}
    missed = [(e["job"], e["first_slot"]) for e in events(group, "job.missed")]
    told_but_ran = [m for m in missed if m in ran]
    assert told_but_ran == [], f"missed told of slots another replica ran: {told_but_ran}"
    assert events(group, "job.queued"), "no replica was ever at its max_running"
    # b waits on one replica while the other, not at its limit, takes it: b runs too
    assert {r.job for r in attempts(pg_url)} == {"a", "b"}
    for job in ("a", "b"):
        assert doubled(attempts(pg_url, job=job)) == {}


def test_a_pause_while_the_database_is_away_is_refused_and_jobs_keep_their_secrets(
    tmp_path: Path, group: list[Replica], own_pg: pg.Server
) -> None:
    url = own_pg.url()
    out = tmp_path / "env.txt"
    job = f'envdump: {{every: 1h, command: "env > {out}"}}'
    f = schedules(tmp_path / "s.yaml", None, job)
    env = {"CROND_DATABASE_URL": url, "PGCONNECT_TIMEOUT": "3", "CROND_REPLICA": "r1"}
    r1 = start_replica(group, f, "r1", tmp_path, env=env)
    r1.daemon.wait_for("daemon.started", timeout=START)
    triggered = run_cli("trigger", str(f), "envdump", "--wait", "--socket", str(r1.socket))
    assert triggered.returncode == 0, triggered.stderr
    seen = out.read_text()
    assert "CROND_DATABASE_URL" not in seen
    assert "PGCONNECT_TIMEOUT" not in seen
    assert "CROND_REPLICA" not in seen

    assert own_pg.halt() == 0
    r1.daemon.wait_for("database.unavailable", timeout=15)
    paused = run_cli("pause", str(f), "envdump", "--socket", str(r1.socket))
    assert paused.returncode != 0
    assert "the cluster's database is unavailable" in paused.stderr
    own_pg.restart()
    r1.daemon.wait_for("database.available", timeout=15)
    paused = run_cli("pause", str(f), "envdump", "--socket", str(r1.socket))
    assert paused.returncode == 0, paused.stderr


def _crond(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crond", *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **env}, check=False,
    )  # fmt: skip


def test_replica_settings_from_flags_and_environment_are_checked_before_start(
    tmp_path: Path,
) -> None:
    f = schedules(tmp_path / "s.yaml", None, 'tick: {every: 1s, command: "true"}')
    secret = "hunter2-secret"
    bad_url = _crond(
        "run", str(f), "--state-dir", "none",
        env={"CROND_DATABASE_URL": f"mysql://crond:{secret}@db.internal/crond"},
    )  # fmt: skip
    assert bad_url.returncode == 1
    assert "CROND_DATABASE_URL: mysql://db.internal/… is not a PostgreSQL URL" in bad_url.stderr
    assert secret not in bad_url.stderr
    bad_name = _crond(
        "run", str(f), "--state-dir", "none", "--replica", "web/1",
        env={"CROND_DATABASE_URL": "postgresql:///crond"},
    )  # fmt: skip
    assert bad_name.returncode == 1
    assert '--replica: "web/1" holds a /' in bad_name.stderr
