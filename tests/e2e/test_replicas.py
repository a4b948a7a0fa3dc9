"""Replicas over PostgreSQL with the real binary: several `crond run --replica` on one
file and one database (docs/state.md). What they did together is read from the table
crond_attempts, the union of their runs: each slot once and none missing, through a
kill -9 of one replica and through the database going away and coming back; a job every
replica runs; pause, resume and kill through any replica's socket; files that differ;
two clusters in one database; a second replica of a live one's name.

Every job runs every second or two and the replicas beat every second (replica_timeout
3 s), so each test takes seconds. Waits are on the table or the logs with deadlines;
the only sleeps hold a state for the scenario (the database down ~5 s, a pause watched).
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime, timedelta
from pathlib import Path

import psycopg

from tests.e2e.harness import eventually, pid_alive, run_cli
from tests.e2e.replicas import (
    Replica,
    attempts,
    by_slot,
    doubled,
    events,
    gaps,
    now,
    schedules,
    slot_after,
    start_replica,
    wait_any,
)
from tests.pg import server as pg

SECOND = timedelta(seconds=1)
# How long a replica may take to start and log daemon.started (a cold start under load).
START = 20.0


def start_all(group: list[Replica], file: Path, names: list[str], base: Path) -> datetime:
    """Start a replica of `file` for each name; the instant all of them had started."""
    for name in names:
        start_replica(group, file, name, base)
    for replica in group[-len(names) :]:
        replica.daemon.wait_for("daemon.started", timeout=START)
    return now()


def wait_slot_after(url: str, instant: datetime, timeout: float, **where: str) -> None:
    eventually(
        lambda: slot_after(url, instant, **where), timeout, f"a slot after {instant} in the table"
    )


def liveness_says(replica: Replica, database: str, timeout: float) -> None:
    """Wait until the replica's liveness file carries `"database": database`."""
    eventually(
        lambda: (replica.liveness_json() or {}).get("database") == database,
        timeout,
        f"{replica.name}'s liveness file says database {database}",
    )


def runs_of(url: str, job: str, cluster: str | None = None) -> dict[datetime, list[str]]:
    return {
        slot: [r.replica for r in rows]
        for slot, rows in by_slot(attempts(url, cluster, job)).items()
    }


def assert_once_no_gap(url: str, job: str, until: datetime, cluster: str | None = None) -> None:
    """Each slot of `job` started exactly once, none missing from the first to the last,
    and the last one recent (a replica that stopped running slots is a gap at the end)."""
    rows = attempts(url, cluster, job)
    slots = list(by_slot(rows))
    assert slots, f"no run of {job} in the table"
    assert doubled(rows) == {}, f"{job}: slots not started exactly once"
    assert gaps(slots, SECOND) == [], f"{job}: slots nobody started"
    assert slots[-1] >= until - 2 * SECOND, f"{job}: nothing since {slots[-1]}"


# --- three replicas, then one killed -----------------------------------------------------

JOBS = """\
    tick: {every: 1s, command: "true"}
    local: {every: 1s, command: "true", replicas: all}
    sleeper: {every: 2s, command: "sleep 600", overlap: allow}
"""


def test_three_replicas_start_each_slot_once_through_a_kill_9(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    f = schedules(tmp_path / "s.yaml", pg_url, JOBS)
    everyone = start_all(group, f, ["r1", "r2", "r3"], tmp_path)
    wait_slot_after(pg_url, everyone + 8 * SECOND, 20, job="tick")

    at = now()
    assert_once_no_gap(pg_url, "tick", at)
    # `replicas: all`: each replica once a slot, from the first slot all three were up.
    local = [
        r for r in attempts(pg_url, job="local") if everyone + SECOND < r.slot < at - 2 * SECOND
    ]
    assert len(by_slot(local)) >= 5
    assert doubled(local, copies=3) == {}, "replicas: all: not each replica once a slot"

    # Kill -9 a replica with a run going: its open runs are lost, by a survivor.
    def running() -> set[str]:
        return {r.replica for r in attempts(pg_url, job="sleeper") if r.finished is None}

    eventually(lambda: bool(running()), 10, "a sleeper running")
    victim = next(r for r in group if r.name in running())
    victim.daemon.kill()
    killed = now()
    survivors = [r for r in group if r is not victim]
    open_runs = {
        r.run_id for r in attempts(pg_url) if r.replica == victim.name and r.finished is None
    }
    assert open_runs
    lost_logged: set[str] = set()

    def all_lost() -> bool:
        lost_logged.update(e.get("run_id", "") for e in events(survivors, "job.lost"))
        return open_runs <= lost_logged

    # replica_timeout (3 s) after its last beat (at most a heartbeat before the kill),
    # seen at a survivor's next beat: 5 s at most, and a second for a loaded machine.
    eventually(all_lost, 6, f"job.lost of {open_runs} in a survivor's log")
    # Not before its time either: its last beat was at most a heartbeat before the kill.
    assert now() - killed >= 1.5 * SECOND, "taken for dead before replica_timeout"
    outcomes = {r.run_id: r.outcome for r in attempts(pg_url) if r.run_id in open_runs}
    assert set(outcomes.values()) == {"lost"}, outcomes

    wait_slot_after(pg_url, now() + 4 * SECOND, 15, job="tick")
    at = now()
    assert_once_no_gap(pg_url, "tick", at)
    assert doubled(attempts(pg_url, job="sleeper")) == {}
    assert gaps(list(runs_of(pg_url, "sleeper")), 2 * SECOND) == []
    after = [r for r in attempts(pg_url, job="tick") if r.slot > killed + SECOND]
    assert {r.replica for r in after} <= {s.name for s in survivors}
    for replica in survivors:
        assert replica.daemon.proc.poll() is None, f"{replica.name} exited"
    # One file, one version: nothing to say, not even while a replica is starting.
    assert events(group, "cluster.config_mismatch") == []


# --- the database going away ---------------------------------------------------------------


def test_postgres_stopped_then_started_under_running_replicas(
    tmp_path: Path, group: list[Replica], own_pg: pg.Server
) -> None:
    url = own_pg.url()
    f = schedules(tmp_path / "s.yaml", url, 'tick: {every: 1s, grace: 1s, command: "true"}')
    everyone = start_all(group, f, ["r1", "r2", "r3"], tmp_path)
    wait_slot_after(url, everyone + 2 * SECOND, 15, job="tick")
    for replica in group:
        liveness_says(replica, "ok", 5)

    assert own_pg.halt() == 0
    down = now()
    for replica in group:
        replica.daemon.wait_for("database.unavailable", timeout=5)
        liveness_says(replica, "unavailable", 4)
    time.sleep(max(0.0, 5 - (now() - down).total_seconds()))  # the outage itself
    up_asked = now()
    own_pg.restart()
    for replica in group:
        replica.daemon.wait_for("database.available", timeout=10)
        liveness_says(replica, "ok", 4)
    back = now()
    wait_slot_after(url, back + 3 * SECOND, 15, job="tick")

    runs = runs_of(url, "tick")
    assert doubled(attempts(url, job="tick")) == {}, "a slot started twice"
    # No claim could be made while the server was down, and these slots' grace (1 s)
    # ran out before it was back: nobody ran them.
    dark = [s for s in runs if down + 0.2 * SECOND < s < up_asked - 1.5 * SECOND]
    assert dark == [], f"runs of slots while the database was down: {dark}"
    _, missed = wait_any(group, "job.missed", lambda e: e.get("reason") == "database", 5)
    assert missed["job"] == "tick"
    # Every run any replica started has its row: none started without a claim.
    started = {e["run_id"] for e in events(group, "job.started")}
    assert started <= {r.run_id for r in attempts(url)}
    # Scheduling came back by itself: every slot from a second after the return on.
    resumed = [s for s in runs if s > back + SECOND]
    assert len(resumed) >= 2
    assert gaps(resumed, SECOND) == []
    assert resumed[0] <= back + 2 * SECOND, f"first slot after the return: {resumed[0]}"
    assert all(r.daemon.proc.poll() is None for r in group)


# --- control through any replica ------------------------------------------------------------


def test_pause_and_resume_through_one_socket_hold_on_every_replica(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    f = schedules(tmp_path / "s.yaml", pg_url, 'tick: {every: 1s, command: "true"}')
    everyone = start_all(group, f, ["r1", "r2", "r3"], tmp_path)
    wait_slot_after(pg_url, everyone + SECOND, 15, job="tick")

    paused = run_cli("pause", str(f), "tick", "--socket", str(group[0].socket))
    assert paused.returncode == 0, paused.stderr
    held = now()
    # Watch 4 s of slots: the other replicas would run them if the pause stayed on r1.
    time.sleep(4)
    late = [s for s in runs_of(pg_url, "tick") if s > held + 2 * SECOND]
    assert late == [], f"slots run more than 2 s after the pause: {late}"

    resumed = run_cli("resume", str(f), "tick", "--socket", str(group[2].socket))
    assert resumed.returncode == 0, resumed.stderr
    again = now()
    wait_slot_after(pg_url, again + 4 * SECOND, 10, job="tick")
    after = [s for s in runs_of(pg_url, "tick") if s > again + 2 * SECOND]
    assert after, "no slot ran after the resume"
    assert after[0] <= again + 3 * SECOND, f"first slot after resume: {after[0]}"
    assert gaps(after, SECOND) == []
    assert doubled(attempts(pg_url, job="tick")) == {}


def test_kill_asked_of_one_replica_stops_the_run_on_another(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    f = schedules(tmp_path / "s.yaml", pg_url, 'long: {cron: "0 0 1 1 *", command: "sleep 600"}')
    start_all(group, f, ["r1", "r2"], tmp_path)
    r1, r2 = group

    triggered = run_cli("trigger", str(f), "long", "--socket", str(r2.socket))
    assert triggered.returncode == 0, triggered.stderr
    run_id = triggered.stdout.strip()
    start = r2.daemon.wait_for("job.started", lambda e: e.get("run_id") == run_id, timeout=5)

    asked = run_cli("kill", str(f), run_id, "--socket", str(r1.socket))
    end = r2.daemon.wait_for("job.finished", lambda e: e.get("run_id") == run_id, timeout=2.5)
    assert end.get("outcome") == "killed"
    eventually(lambda: not pid_alive(start["pid"]), 1, "the run's process gone")

    # The end is written off the replica's loop, just after it is logged.
    def ended() -> list[tuple[str, str | None]]:
        return [(r.replica, r.outcome) for r in attempts(pg_url, job="long") if r.run_id == run_id]

    with contextlib.suppress(AssertionError):
        eventually(lambda: ended() == [("r2", "killed")], 2, "the end in the table")
    assert ended() == [("r2", "killed")]
    # And the caller is told it was stopped, not that nothing ran.
    assert asked.returncode == 0, asked.stderr + asked.stdout


# --- clusters and files ----------------------------------------------------------------------


def test_replicas_whose_files_differ_say_so(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    tick = 'tick: {every: 1s, command: "true"}'
    a = schedules(tmp_path / "a.yaml", pg_url, tick)
    b = schedules(tmp_path / "b.yaml", pg_url, tick + '\nother: {every: 1h, command: "true"}')
    start_replica(group, a, "r1", tmp_path)
    start_replica(group, b, "r2", tmp_path)
    # Two daemons' starts first: seconds each on a loaded machine.
    _, said = wait_any(group, "cluster.config_mismatch", timeout=20)
    text = str(said)
    assert "r1" in text, said
    assert "r2" in text, said


def test_two_clusters_in_one_database_never_see_each_others_slots(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    tick = 'tick: {every: 1s, command: "true"}'
    alpha = schedules(tmp_path / "alpha.yaml", pg_url, tick, cluster="alpha")
    beta = schedules(tmp_path / "beta.yaml", pg_url, tick, cluster="beta")
    # The same replica names in both: a name is a cluster's own.
    start_all(group, alpha, ["r1", "r2"], tmp_path / "alpha")
    everyone = start_all(group, beta, ["r1", "r2"], tmp_path / "beta")
    wait_slot_after(pg_url, everyone + 5 * SECOND, 15, cluster="alpha", job="tick")
    wait_slot_after(pg_url, everyone + 5 * SECOND, 15, cluster="beta", job="tick")

    at = now()
    for cluster in ("alpha", "beta"):
        assert_once_no_gap(pg_url, "tick", at, cluster=cluster)
    # The slots both clusters had up: each ran them all, neither took the other's claims.
    first = everyone.replace(microsecond=0) + SECOND
    window = {first + i * SECOND for i in range(4)}
    for cluster in ("alpha", "beta"):
        assert window <= set(runs_of(pg_url, "tick", cluster)), cluster
    assert {r.cluster for r in attempts(pg_url)} == {"alpha", "beta"}
    assert all(r.daemon.proc.poll() is None for r in group)


def test_a_second_replica_of_a_live_ones_name_refuses_to_start(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    # The database from the environment, as a secret would come: the file names none.
    env = {"CROND_DATABASE_URL": pg_url}
    f = schedules(tmp_path / "s.yaml", None, 'tick: {every: 1s, command: "true"}')
    first = start_replica(group, f, "r1", tmp_path / "first", env=env)
    first.daemon.wait_for("daemon.started", timeout=START)
    wait_slot_after(pg_url, now(), 10, job="tick")

    second = start_replica(group, f, "r1", tmp_path / "second", env=env)
    assert second.daemon.exited(timeout=15) == 1
    assert "r1" in second.text(), second.text()
    assert "password" not in second.text()
    refused = now()
    wait_slot_after(pg_url, refused + SECOND, 10, job="tick")
    assert first.daemon.proc.poll() is None
    assert {r.replica for r in attempts(pg_url)} == {"r1"}
    with psycopg.connect(pg_url) as conn:
        live = conn.execute("SELECT count(*) FROM crond_replicas WHERE name = 'r1'").fetchone()
    assert live == (1,)
