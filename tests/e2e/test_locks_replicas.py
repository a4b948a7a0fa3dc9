"""Named locks held in PostgreSQL, with three replicas of the real `crond` binary
(docs/workflows.md, "With replicas"): two jobs due every second share a lock of one place;
through the SIGKILL of the replica holding it (and of its job, as systemd kills a dead
service's cgroup) and a restart of the database, from the runs' own timestamps no two
holders ever run at once, and the killed replica's lock is taken by another within about
`replica_timeout`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.e2e.replicas import Replica, reap, schedules, start_replica
from tests.pg import server as pg

# Each run stamps its start and end, with its run id (a killed run has no end).
RUN = (
    'echo "$CROND_JOB $CROND_RUN_ID start $(date +%s%N)" >> {out}; sleep 0.6; '
    'echo "$CROND_JOB $CROND_RUN_ID end $(date +%s%N)" >> {out}'
)
TIMEOUT = 3.0  # replica_timeout (tests/e2e/replicas.py TIMING)


def _runs(out: Path) -> dict[str, tuple[str, float, float | None]]:
    """Run id -> (job, start, end or None), in seconds, from the runs' own lines."""
    runs: dict[str, tuple[str, float, float | None]] = {}
    for line in out.read_text().splitlines() if out.exists() else []:
        parts = line.split()
        if len(parts) != 4:
            continue  # (a line torn by the kill)
        job, run_id, what, ns = parts
        if what == "start":
            runs[run_id] = (job, int(ns) / 1e9, None)
        elif run_id in runs:
            runs[run_id] = (runs[run_id][0], runs[run_id][1], int(ns) / 1e9)
    return runs


def _until(what: str, ok: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _ended(out: Path) -> int:
    return sum(end is not None for _, _, end in _runs(out).values())


def _holder(url: str) -> str | None:
    with contextlib.suppress(psycopg.Error), psycopg.connect(url, connect_timeout=2) as conn:
        row = conn.execute("SELECT replica FROM crond_lock_holds WHERE name = 'db'").fetchone()
        return None if row is None else str(row[0])
    return None


def _kill_with_its_jobs(replica: Replica) -> None:
    """SIGKILL the replica and its jobs' process groups, as systemd kills a dead
    service's cgroup (docs/operations.md)."""
    pid = replica.daemon.proc.pid
    children = subprocess.run(
        ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
    ).stdout.split()
    replica.daemon.proc.kill()
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(child), signal.SIGKILL)
    replica.daemon.proc.wait(10)


@pytest.mark.timeout(120)
def test_three_replicas_share_a_lock_through_a_kill_and_a_database_restart(
    tmp_path: Path,
) -> None:
    out = tmp_path / "runs.txt"
    jobs = f"""\
        backup: {{every: 1s, locks: [db], grace: 1h, command: '{RUN.format(out=out)}'}}
        vacuum: {{every: 1s, locks: [db], grace: 1h, command: '{RUN.format(out=out)}'}}
        """
    group: list[Replica] = []
    with pg.start() as server:
        url = server.url()
        f = schedules(tmp_path / "s.yaml", url, jobs)
        f.write_text("locks: {db: 1}\n" + f.read_text())
        try:
            names = ["r1", "r2", "r3"]
            live = {n: start_replica(group, f, n, tmp_path) for n in names}
            for replica in live.values():
                replica.daemon.wait_for("daemon.started")
            _until("four runs", lambda: _ended(out) >= 4)
            # The replica holding the lock is killed, with its job.
            # The holder seen is the one killed (asked twice, the lock could be between runs).
            seen: list[str | None] = [None]

            def held() -> bool:
                seen[0] = _holder(url)
                return seen[0] is not None

            _until("a holder", held)
            victim = seen[0]
            assert victim is not None
            _kill_with_its_jobs(live[victim])
            killed_at = time.time()
            _until(
                "a start after the kill",
                lambda: any(s > killed_at for _, s, _ in _runs(out).values()),
                timeout=TIMEOUT + 10,
            )
            freed_after = min(s for _, s, _ in _runs(out).values() if s > killed_at) - killed_at
            live[victim] = start_replica(group, f, victim, tmp_path)
            live[victim].daemon.wait_for("daemon.started")
            before = _ended(out)
            _until("three more runs", lambda: _ended(out) >= before + 3)
            # The database restarts: the claims wait for it; the holds it kept stand.
            server.halt(timeout=10)
            time.sleep(1.0)
            server.restart(timeout=30)
            restarted_at = time.time()
            _until(
                "three runs after the restart",
                lambda: sum(s > restarted_at for _, s, e in _runs(out).values() if e) >= 3,
            )
            for replica in live.values():
                assert replica.daemon.stop() == 0, replica.text()[-2000:]
            waits = Counter(
                (id(r), e["job"], e["slot"])
                for r in group
                for e in r.daemon.events
                if e["event"] == "job.waiting"
            )
            with psycopg.connect(url) as conn:
                left = conn.execute("SELECT count(*) FROM crond_lock_holds").fetchone()
        finally:
            reap(group)
    runs = sorted(_runs(out).values(), key=lambda run: run[1])
    assert left == (0,)  # every run's end gave its lock back
    assert waits, "no run waited for db"
    # Told once a run, not at each ask (again after the database's restart, when the
    # run waited for the database between two refusals).
    assert max(waits.values()) <= 2, waits
    assert {job for job, _, _ in runs} == {"backup", "vacuum"}
    # The killed run's end is its kill (its group was killed with its replica).
    spans = [(job, s, killed_at if e is None else e) for job, s, e in runs]
    assert sum(e is None for _, _, e in runs) <= 1
    for (a, _, end), (b, begin, _) in itertools.pairwise(spans):
        assert end <= begin, f"{a} and {b} held db: 1 at once"
    # Freed when the survivors took the killed replica for dead (replica_timeout), then
    # taken at their next ask (each second).
    assert freed_after < TIMEOUT + 3.0, freed_after
