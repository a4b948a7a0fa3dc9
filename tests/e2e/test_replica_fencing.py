"""A replica taken for dead, rightly or not (docs/replicas.md, "What each failure does"):
real replicas on a real PostgreSQL, heartbeat 1 s, replica_timeout 3 s.

- A database frozen (SIGSTOP of its processes) or restarted for longer than
  replica_timeout is an outage every replica shared: none is taken for dead because of
  it, and the run going through it ends as it ends (no `job.lost`).
- A replica whose own path to the database hangs (the test's `Proxy`) while it runs a
  long `overlap: skip` job: with `daemon.fencing: stop` it stops its run before another
  replica starts the job's next slot (the runs' own stamps never overlap), logs
  `cluster.fenced`, and when it is back `cluster.declared_dead` and `job.late_end`
  (outcome killed); with `keep` its run goes on to its end, written late beside `lost`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.e2e.harness import eventually
from tests.e2e.replica_check import parse_stamps
from tests.e2e.replicas import (
    Proxy,
    Replica,
    attempts,
    events,
    frozen,
    now,
    schedules,
    start_replica,
    wait_any,
)
from tests.pg import server as pg

START = 20.0
OUTAGE = 6.0  # seconds: twice replica_timeout
LONG = 14  # seconds the cut-off replica's run takes


def stamped(path: Path, seconds: float) -> str:
    """A run that stamps its start, sleeps, and stamps its end, also when it is stopped
    (SIGTERM): `S|E job slot replica pid run_id epoch` lines, as the fault soak's."""
    line = f'$CROND_JOB $CROND_SLOT $SOAK_REPLICA $$ $CROND_RUN_ID $(date +%s.%N)" >> {path}'
    return (
        f"echo \"S {line}; trap 'echo \"E {line}; exit 143' TERM; "
        f'sleep {seconds} & wait $!; echo "E {line}'
    )


def _start(group: list[Replica], file: Path, name: str, base: Path) -> Replica:
    replica = start_replica(group, file, name, base, env={"SOAK_REPLICA": name})
    replica.daemon.wait_for("state.opened", timeout=START)
    return replica


def _logged(replicas: list[Replica], name: str) -> list[dict[str, Any]]:
    """Every event `name` the replicas logged so far (drained or not)."""
    return [e for r in replicas for e in r.daemon.drain() if e.get("event") == name]


@contextlib.contextmanager
def _halted(server: pg.Server) -> Iterator[None]:
    assert server.halt() == 0
    try:
        yield
    finally:
        server.restart()


@pytest.mark.parametrize("outage", ["frozen", "restarted"])
def test_an_outage_all_replicas_shared_takes_none_for_dead(
    tmp_path: Path, group: list[Replica], own_pg: pg.Server, outage: str
) -> None:
    url = own_pg.url()
    stamps = tmp_path / "stamps.txt"
    long = json.dumps(stamped(stamps, 12))
    jobs = f"""
        long: {{every: 4s, overlap: allow, replicas: all, command: {long}}}
        tick: {{every: 1s, command: "true"}}
    """
    f = schedules(tmp_path / "s.yaml", url, jobs)
    replicas = [_start(group, f, name, tmp_path) for name in ("r1", "r2")]

    def both_long() -> bool:
        return {s.replica for s in parse_stamps(stamps.read_text())} == {"r1", "r2"}

    eventually(lambda: stamps.exists() and both_long(), 10, "a long run on each replica")
    time.sleep(3.5)  # each replica connected for replica_timeout: they judge each other
    went = now()
    with frozen(own_pg) if outage == "frozen" else _halted(own_pg):
        for r in replicas:
            r.daemon.wait_for("database.unavailable", timeout=5)
        time.sleep(OUTAGE)  # the outage's length is the test's, not an event
    for r in replicas:
        r.daemon.wait_for("database.available", timeout=15)
    back = now()
    # Past the time a survivor took the others for dead at once before: each replica has
    # been connected for replica_timeout and beaten since (tick runs again meanwhile).
    eventually(
        lambda: any(a.slot > back + timedelta(seconds=5) for a in attempts(url, job="tick")),
        15,
        "tick running 5 s after the return",
    )
    assert _logged(replicas, "job.lost") == []
    assert [a for a in attempts(url) if a.outcome == "lost"] == []
    # The long runs going through the outage went on to their ends, each written so.
    through = {s.run_id for s in parse_stamps(stamps.read_text()) if s.at < went.timestamp()}
    assert {s.replica for s in parse_stamps(stamps.read_text())} == {"r1", "r2"}

    def ends() -> set[str | None]:
        return {a.outcome for a in attempts(url, job="long") if a.run_id in through}

    eventually(lambda: ends() == {"success"}, 15, "the long runs' ends written, success")
    assert all(r.daemon.proc.poll() is None for r in replicas)


def _proxied(tmp_path: Path, pg_url: str, fencing: str) -> tuple[Path, Path, Proxy]:
    """The file of r2 (the database's own socket) and of r1 (through a `Proxy`)."""
    dbname = psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]
    host = psycopg.conninfo.conninfo_to_dict(pg_url)["host"]
    proxy = Proxy(Path(str(host)) / f".s.PGSQL.{pg.PORT}")
    stamps = tmp_path / "stamps.txt"
    # Long enough to be still going when the proxy holds, after r2's start and 4 s, on a
    # loaded machine too (r2's start alone may take seconds there).
    long = json.dumps(stamped(stamps, LONG))
    jobs = f"long: {{every: 1s, overlap: skip, kill_after: 1s, command: {long}}}"
    direct = schedules(tmp_path / "r2.yaml", pg_url, jobs, fencing=fencing)
    through = schedules(tmp_path / "r1.yaml", proxy.url(str(dbname)), jobs, fencing=fencing)
    return direct, through, proxy


@pytest.mark.parametrize("fencing", ["stop", "keep"])
def test_a_replica_cut_off_from_the_database_fences_its_runs_or_keeps_them(
    tmp_path: Path, group: list[Replica], pg_url: str, fencing: str
) -> None:
    direct, through, proxy = _proxied(tmp_path, pg_url, fencing)
    stamps = tmp_path / "stamps.txt"
    try:
        r1 = _start(group, through, "r1", tmp_path)
        _, first = wait_any([r1], "job.started", lambda e: e.get("job") == "long", 10)
        r2 = _start(group, direct, "r2", tmp_path)
        time.sleep(4.0)  # r2 connected for replica_timeout: it may judge r1 from now on
        assert events([r2], "job.started") == []  # r1's run goes on: skipped on r2
        assert not [e for e in r1.daemon.drain() if e.get("event") == "job.finished"]
        proxy.hold()
        held = time.time()
        _, taken_over = wait_any([r2], "job.started", lambda e: e.get("job") == "long", 15)
        proxy.release()
        for e in (first, taken_over):
            assert e.get("job") == "long"
        if fencing == "stop":
            _, fenced = wait_any([r1], "cluster.fenced", timeout=5)
            assert [run["run_id"] for run in fenced["runs"]] == [first["run_id"]]
        _, late = wait_any([r1], "job.late_end", timeout=15)
        _, dead = wait_any([r1], "cluster.declared_dead", timeout=5)
    finally:
        proxy.close()
    assert late["run_id"] == first["run_id"]
    assert [run["run_id"] for run in dead["runs"]] == [first["run_id"]]
    lost = _logged([r2], "job.lost") + [
        {"run_id": a.run_id} for a in attempts(pg_url) if a.outcome == "lost"
    ]
    assert {e["run_id"] for e in lost} == {first["run_id"]}
    runs = {s.run_id: s for s in parse_stamps(stamps.read_text()) if s.kind == "E"}
    starts = {s.run_id: s for s in parse_stamps(stamps.read_text()) if s.kind == "S"}
    old_end = runs[first["run_id"]].at
    new_start = starts[taken_over["run_id"]].at
    print(
        f"\n{fencing}: held at {held:.2f}; r1's run ended {old_end - held:.2f}s after, r2's "
        f"started {new_start - held:.2f}s after; late end {late['outcome']}"
    )
    if fencing == "stop":
        # Stopped before r2 could take the job over: the job's own stamps never overlap.
        assert late["outcome"] == "killed", late
        assert old_end < new_start, (old_end, new_start)
    else:
        assert late["outcome"] == "success", late
        assert old_end - starts[first["run_id"]].at >= LONG - 0.5  # its whole length
        assert _logged([r1], "cluster.fenced") == []
