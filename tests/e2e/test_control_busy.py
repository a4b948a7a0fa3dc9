"""The control socket full, with the real binary: idle clients holding every connection
cannot lock `crond ps` out (the oldest that sent nothing is dropped for it); when every
connection carries a request, `crond ps` says the daemon is busy and exits 2."""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path

from tests.e2e.harness import Crond, run_cli

MAX = 16  # crond.control.server.MAX_CONNECTIONS


def started(crond: list[Crond], tmp_path: Path) -> tuple[Path, Path, Crond]:
    f = tmp_path / "s.yaml"
    f.write_text(
        textwrap.dedent("""
        daemon: {shutdown_timeout: 1s}
        jobs:
          quiet: {cron: '0 0 1 1 *', overlap: allow, command: 'sleep 60'}
        """)
    )
    state = tmp_path / "st"
    daemon = Crond([str(f), "--state-dir", str(state)])
    crond.append(daemon)
    daemon.wait_for("control.listening")
    return f, state, daemon


def held(path: Path, count: int, request: bytes) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(path))
        if request:
            sock.sendall(request)
        socks.append(sock)
    return socks


def test_idle_clients_cannot_lock_the_commands_out(tmp_path: Path, crond: list[Crond]) -> None:
    f, state, daemon = started(crond, tmp_path)
    idle = held(state / "crond.sock", 3 * MAX, b'{"v": 1, "cmd": "p')  # half a line each
    try:
        for _ in range(5):
            ps = run_cli("ps", str(f), "--state-dir", str(state))
            assert ps.returncode == 0, ps.stderr
            assert "nothing running" in ps.stderr
    finally:
        for sock in idle:
            sock.close()
    assert daemon.stop() == 0


def test_every_connection_serving_a_request_is_busy(tmp_path: Path, crond: list[Crond]) -> None:
    f, state, daemon = started(crond, tmp_path)
    wait = b'{"v": 1, "cmd": "trigger", "args": {"job": "quiet", "wait": true}}\n'
    waiting = held(state / "crond.sock", MAX, wait)  # each waits for its run's end
    try:
        for _ in range(MAX):
            daemon.wait_for("job.triggered")
        for _ in range(5):
            ps = run_cli("ps", str(f), "--state-dir", str(state))
            assert ps.returncode == 2
            assert ps.stderr.splitlines() == [
                f"crond: crond is busy: all {MAX} control connections are in use; try again"
            ]
    finally:
        for sock in waiting:
            sock.close()  # hung up: their connections come back (the runs go on)
    ps = run_cli("ps", str(f), "--state-dir", str(state), "--json")
    assert ps.returncode == 0, ps.stderr
    assert len(ps.stdout.splitlines()) == MAX
    daemon.stop()
