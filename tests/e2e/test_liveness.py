"""Proof of life: sd_notify datagrams, the liveness file going stale, PID-1 reaping."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.harness import Crond, eventually, run_cli


def _datagrams(sock: socket.socket, until: str, timeout: float = 10.0) -> list[str]:
    """Messages received until one containing `until` (inclusive)."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            got.append(sock.recv(4096).decode())
        except TimeoutError:
            raise AssertionError(f"no {until} within {timeout}s; got {got}") from None
        if until in got[-1]:
            return got


def _drain_forever(sock: socket.socket) -> None:
    while True:
        sock.recv(4096)


def test_sd_notify_ready_watchdog_reload_stopping(tmp_path: Path, crond: list[Crond]) -> None:
    address = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  a: {cron: '@yearly', command: 'true'}\n")
    try:
        d = Crond([str(f)], env={"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "400000"})
        crond.append(d)
        assert any("READY=1" in m for m in _datagrams(sock, "READY=1"))
        pings = _datagrams(sock, "WATCHDOG=1")
        pings += _datagrams(sock, "WATCHDOG=1")  # at half of WATCHDOG_USEC: several a second
        d.signal(signal.SIGHUP)
        around = _datagrams(sock, "RELOADING=1")
        assert "MONOTONIC_USEC=" in around[-1]
        assert any("READY=1" in m for m in _datagrams(sock, "READY=1"))
        d.wait_for("config.reloaded")
        d.signal(signal.SIGTERM)
        _datagrams(sock, "STOPPING=1")
        assert d.exited() == 0
    finally:
        sock.close()


def test_watchdog_pings_come_from_the_loop_at_half_the_interval(
    tmp_path: Path, crond: list[Crond]
) -> None:
    address = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  a: {cron: '@yearly', command: 'true'}\n")
    try:
        d = Crond([str(f)], env={"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "400000"})
        crond.append(d)
        _datagrams(sock, "READY=1")
        _datagrams(sock, "WATCHDOG=1")
        start = time.monotonic()
        for _ in range(4):
            _datagrams(sock, "WATCHDOG=1")
        assert 0.5 < time.monotonic() - start < 3  # four pings at ~200 ms
        d.signal(signal.SIGSTOP)  # a stuck loop sends nothing
        sock.settimeout(0.6)
        with pytest.raises(TimeoutError):
            _drain_forever(sock)
        d.signal(signal.SIGCONT)
        _datagrams(sock, "WATCHDOG=1")
        assert d.stop() == 0
    finally:
        sock.close()


def test_liveness_file_goes_stale_when_the_daemon_is_stopped(
    tmp_path: Path, crond: list[Crond]
) -> None:
    live = tmp_path / "run" / "liveness.json"
    live.parent.mkdir()
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  a: {every: 1h, command: 'true'}\n")
    d = Crond([str(f), "--liveness-file", str(live), "--heartbeat", "200ms"])
    crond.append(d)
    eventually(live.exists, what="the liveness file is written")
    payload = json.loads(live.read_text())
    assert payload["pid"] == d.proc.pid
    assert payload["jobs"] == 1
    assert payload["running"] == 0
    assert payload["next_fire"]["job"] == "a"
    assert payload["updated_at"].endswith("Z")
    assert run_cli("health", "--liveness-file", str(live)).returncode == 0
    d.signal(signal.SIGSTOP)
    try:
        eventually(
            lambda: (
                run_cli("health", "--liveness-file", str(live), "--max-age", "1s").returncode == 1
            ),
            10,
            "health reports stale",
        )
        stale = run_cli("health", "--liveness-file", str(live), "--max-age", "1s")
        assert "stale" in stale.stderr
    finally:
        d.signal(signal.SIGCONT)
    eventually(
        lambda: run_cli("health", "--liveness-file", str(live)).returncode == 0, 10, "fresh again"
    )
    assert d.stop() == 0
    # A clean stop leaves a last word: not "fresh" for a pid that is gone.
    assert json.loads(live.read_text())["stopped"] is True
    after = run_cli("health", "--liveness-file", str(live))
    assert after.returncode == 1
    assert f"stopped: the daemon (pid {d.proc.pid}) stopped cleanly at " in after.stderr


def test_health_without_a_file_says_so(tmp_path: Path) -> None:
    result = run_cli("health", "--liveness-file", str(tmp_path / "none.json"))
    assert result.returncode == 1
    assert "no liveness file" in result.stderr


def test_health_finds_the_liveness_file_from_the_schedules_file(
    tmp_path: Path, crond: list[Crond]
) -> None:
    """`crond health FILE`, as every other command takes FILE: the file's
    `daemon.liveness_file` (read from that block alone, or by loading the file when the
    block is unclear); `--liveness-file` still wins."""
    live = tmp_path / "liveness.json"
    f = tmp_path / "s.yaml"
    f.write_text(f"daemon:\n  liveness_file: {live}\njobs:\n  a: {{every: 1h, command: 'true'}}\n")
    d = Crond([str(f), "--heartbeat", "200ms"])
    crond.append(d)
    eventually(live.exists, what="the liveness file is written")
    fresh = run_cli("health", str(f))
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.startswith(f"{live}: fresh: ")
    anchored = tmp_path / "anchored.yaml"  # an alias to outside: the block alone is unclear
    anchored.write_text(
        f"jobs:\n  a: {{every: 1h, command: &p {live}}}\ndaemon:\n  liveness_file: *p\n"
    )
    assert run_cli("health", str(anchored)).stdout.startswith(f"{live}: fresh: ")
    other = run_cli("health", str(f), "--liveness-file", str(tmp_path / "other.json"))
    assert (other.returncode, other.stderr.split(":")[0]) == (1, str(tmp_path / "other.json"))
    assert d.stop() == 0
    plain = tmp_path / "plain.yaml"  # says nothing: where the shipped unit has it written
    plain.write_text("jobs: {}\n")
    assert run_cli("health", str(plain)).stderr.startswith("/run/crond/liveness.json: ")
    missing = run_cli("health", str(tmp_path / "nosuch.yaml"))
    assert (missing.returncode, missing.stderr) == (
        1,
        f"crond: {tmp_path / 'nosuch.yaml'}: no such file\n",
    )


def _zombie_children(pid: int) -> list[int]:
    zombies = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[1] == str(pid) and fields[0] == "Z":
            zombies.append(int(entry.name))
    return zombies


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root")
def test_no_zombies_as_pid_1(tmp_path: Path, crond: list[Crond]) -> None:
    done = tmp_path / "done"
    f = tmp_path / "s.yaml"
    # Each run leaves an orphan outside its group; it dies later and is re-parented to
    # PID 1, which must reap it.
    script = tmp_path / "orphan.py"
    script.write_text(
        "import os, sys, time\n"
        "r, w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()  # leave the job's group, so only PID 1 can reap it\n"
        "    os.write(w, b'1')\n"
        "    time.sleep(0.2)\n"
        f"    open({str(done)!r}, 'a').write('x\\n')\n"
        "    os._exit(0)\n"
        "os.read(r, 1)\n"
    )
    f.write_text(f"jobs:\n  orphan:\n    every: 1s\n    command: [{sys.executable}, {script}]\n")
    d = Crond([str(f)], prefix=["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"])
    crond.append(d)
    d.wait_for("daemon.started")
    eventually(
        lambda: done.exists() and len(done.read_text().split()) >= 3, 15, "three orphans ran"
    )
    children = Path(f"/proc/{d.proc.pid}/task/{d.proc.pid}/children").read_text().split()
    inner = int(children[0])  # crond, PID 1 inside the namespace
    eventually(lambda: not _zombie_children(inner), 5, "no zombies under crond")
    os.kill(inner, signal.SIGTERM)  # unshare does not pass signals on
    assert d.exited() == 0


def test_a_notify_socket_nobody_reads_never_stalls_scheduling(
    tmp_path: Path, crond: list[Crond]
) -> None:
    address = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)  # bound, never read: its buffer fills with WATCHDOG=1 pings
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    out = tmp_path / "out"
    f = tmp_path / "s.yaml"
    f.write_text(f"jobs:\n  a: {{every: 1s, command: 'echo x >> {out}'}}\n")
    try:
        d = Crond([str(f)], env={"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "2000"})
        crond.append(d)  # a ping every millisecond: the buffer is full at once
        d.wait_for("daemon.started")
        eventually(
            lambda: out.exists() and len(out.read_text().split()) >= 3,
            10,
            "three runs with the notify socket full",
        )
        assert d.stop() == 0
    finally:
        sock.close()
