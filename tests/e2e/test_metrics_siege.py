"""The metrics port under siege, with the real binary: a client that holds hundreds of
connections, each with half a request line, cannot keep /healthz probes out (the server
drops the oldest connection still sending its head to admit a newcomer)."""

from __future__ import annotations

import socket
import textwrap
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.harness import Crond

PROBES = 40


def probe(url: str, start: threading.Barrier) -> tuple[int, float]:
    """(status, seconds) of one GET, begun with the others."""
    start.wait()
    began = time.monotonic()
    with urllib.request.urlopen(url, timeout=1.0) as answer:
        answer.read()
        return answer.status, time.monotonic() - began


@pytest.mark.parametrize("held", [120, 1000])
def test_half_open_connections_leave_every_probe_answered(
    tmp_path: Path, crond: list[Crond], held: int
) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        textwrap.dedent("""
        daemon: {heartbeat: 200ms}
        jobs:
          tick: {every: 1s, command: "true"}
        """)
    )
    daemon = Crond([str(f), "--state-dir", "none", "--metrics", "127.0.0.1:0"])
    crond.append(daemon)
    host, port = daemon.wait_for("metrics.serving")["address"].rsplit(":", 1)
    hostile: list[socket.socket] = []
    try:
        for _ in range(held):
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.sendall(b"GET /heal")  # half a request line, never finished
            hostile.append(sock)
        start = threading.Barrier(PROBES)
        with ThreadPoolExecutor(PROBES) as pool:
            futures = [
                pool.submit(probe, f"http://{host}:{port}/healthz", start) for _ in range(PROBES)
            ]
            answers = [future.result() for future in futures]
        assert [status for status, _ in answers] == [200] * PROBES
        assert max(took for _, took in answers) < 1.0
        # The oldest of the hostile ones were dropped; the newest are still held.
        dropped = sum(closed(sock) for sock in hostile)
        assert dropped >= held - 64
    finally:
        for sock in hostile:
            sock.close()
    assert daemon.stop() == 0


def closed(sock: socket.socket) -> bool:
    """Whether the server has closed this connection (EOF or reset), without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True
