"""A daemon whose control socket a live crond listens on refuses to start (exit 1, one
line naming the socket and the other daemon's pid), with the real binary: a replica
started in another replica's state directory registers no name in the database, and a
daemon without a database started in another daemon's state directory leaves it alone.
A socket left by a daemon killed with -9 is no refusal.
"""

from __future__ import annotations

import signal
from pathlib import Path

import psycopg

from tests.e2e.harness import Crond
from tests.e2e.replicas import Replica, schedules, start_replica

TICK = 'tick: {every: 1s, command: "true"}'


def _refused(daemon: Crond, socket: Path, pid: int) -> None:
    assert daemon.exited() == 1
    said = [line.strip() for line in daemon.other]
    assert said == [
        f"crond: control socket {socket}: another crond (pid {pid}) is listening on it: stop "
        "that one, or give each daemon its own state directory (--state-dir, "
        "daemon.state_dir) or daemon.control_socket"
    ], said
    (taken,) = daemon.named("control.taken")
    assert (taken["level"], taken["path"], taken["pid"]) == ("error", str(socket), pid)
    assert "daemon.started" not in daemon.names()


def test_a_replica_in_another_replicas_state_directory_refuses_to_start(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    f = schedules(tmp_path / "s.yaml", pg_url, TICK)
    r1 = start_replica(group, f, "r1", tmp_path)
    r1.daemon.wait_for("control.listening", timeout=20)
    # The same directory, and no --replica: a name of its own (the host's), as a second
    # unit left on the default directory would have.
    twin = Crond([str(f), "--state-dir", str(r1.state_dir)])
    try:
        _refused(twin, r1.socket, r1.daemon.proc.pid)
    finally:
        twin.kill()
    with psycopg.connect(pg_url) as conn:
        names = conn.execute("SELECT name FROM crond_replicas ORDER BY name").fetchall()
    assert names == [("r1",)]
    assert r1.daemon.proc.poll() is None
    r1.daemon.wait_for("job.started", timeout=5)  # the first one goes on


def test_a_daemon_in_a_live_daemons_state_directory_refuses_and_a_dead_ones_is_taken(
    tmp_path: Path, crond: list[Crond]
) -> None:
    state = tmp_path / "state"
    f = tmp_path / "s.yaml"
    f.write_text(f"jobs:\n  {TICK}\n")
    first = Crond([str(f), "--state-dir", str(state)])
    crond.append(first)
    first.wait_for("control.listening")
    second = Crond([str(f), "--state-dir", str(state)])
    crond.append(second)
    _refused(second, state / "crond.sock", first.proc.pid)
    assert first.proc.poll() is None
    first.signal(signal.SIGKILL)  # its socket stays, with nobody listening
    first.exited()
    assert (state / "crond.sock").exists()
    third = Crond([str(f), "--state-dir", str(state)])
    crond.append(third)
    third.wait_for("control.listening")
    assert "control.taken" not in third.names()
