"""Steering the running daemon with the real binary and its real socket: ps, trigger
(--wait), kill, pause/resume, the concurrency limits, the permission check, and clients
that misbehave (docs/control.md)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.harness import CROND, Crond, eventually, pid_alive, run_cli

FAR = "cron: '0 0 1 1 *'"  # a job that only runs when triggered


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def start(started: list[Crond], f: Path, state: Path) -> Crond:
    daemon = Crond([str(f), "--state-dir", str(state)])
    started.append(daemon)
    daemon.wait_for("control.listening")
    return daemon


def steer(f: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args[:1], str(f), *args[1:], "--state-dir", str(state))


def test_every_command_and_its_exit_status(tmp_path: Path, crond: list[Crond]) -> None:
    f = write(
        tmp_path / "s.yaml",
        f"""
        jobs:
          slow: {{{FAR}, command: "echo starting; sleep 60"}}
          check: {{{FAR}, command: "echo checking; echo oops >&2; exit 3"}}
          off: {{{FAR}, command: "echo ran anyway", enabled: false}}
        """,
    )
    state = tmp_path / "st"
    daemon = start(crond, f, state)
    assert steer(f, state, "ps").returncode == 0
    started = steer(f, state, "trigger", "slow")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    assert daemon.wait_for("job.triggered")["run_id"] == run_id
    again = steer(f, state, "trigger", "slow")  # overlap: skip, a run going
    assert (again.returncode, again.stderr) == (
        1,
        "crond: slow has a run going and overlap: skip\n",
    )
    ps = steer(f, state, "ps", "--json")
    (row,) = [json.loads(line) for line in ps.stdout.splitlines()]
    assert (row["job"], row["run_id"], row["attempt"]) == ("slow", run_id, 1)
    assert pid_alive(row["pid"])
    waited = steer(f, state, "trigger", "check", "--wait")
    assert waited.returncode == 3
    assert waited.stdout == "checking\n"
    assert "oops" in waited.stderr
    assert steer(f, state, "trigger", "off").returncode == 0  # a disabled job too
    daemon.wait_for("job.finished", lambda e: e["job"] == "off")
    killed = steer(f, state, "kill", "slow")
    assert killed.returncode == 0, killed.stderr
    finished = daemon.wait_for("job.finished", lambda e: e["job"] == "slow")
    assert (finished["outcome"], finished["run_id"]) == ("killed", run_id)
    assert daemon.wait_for("job.kill_requested")["by"]["uid"] == os.getuid()
    assert steer(f, state, "kill", "slow").returncode == 1  # nothing running
    typo = steer(f, state, "trigger", "slwo")
    assert typo.returncode == 1
    assert "did you mean 'slow'" in typo.stderr
    assert steer(f, state, "pause", "check", "--note", "db migration").returncode == 0
    paused = daemon.wait_for("job.paused")
    assert (paused["job"], paused["until"], paused["note"]) == ("check", None, "db migration")
    status = steer(f, state, "status", "--json")
    rows = {r["job"]: r for r in map(json.loads, status.stdout.splitlines())}
    assert rows["check"]["paused"]["note"] == "db migration"
    assert rows["slow"]["paused"] is None
    assert steer(f, state, "resume", "check").returncode == 0
    assert daemon.wait_for("job.resumed")["by"]["uid"] == os.getuid()
    again = steer(f, state, "resume", "check")
    assert (again.returncode, again.stdout) == (0, "check was not paused\n")
    daemon.stop()
    gone = steer(f, state, "ps")
    assert gone.returncode == 2
    assert f"no crond is running for {f}" in gone.stderr


def test_kill_stops_the_whole_group_even_a_child_that_ignores_sigterm(
    tmp_path: Path, crond: list[Crond]
) -> None:
    pids = tmp_path / "pids"
    f = write(
        tmp_path / "s.yaml",
        f"""
        jobs:
          stubborn:
            {FAR}
            kill_after: 1s
            command: "sh -c 'trap \\"\\" TERM; echo $$ >> {pids}; while :; do sleep 1; done' & wait"
        """,
    )
    state = tmp_path / "st"
    daemon = start(crond, f, state)
    assert steer(f, state, "trigger", "stubborn").returncode == 0
    eventually(lambda: pids.exists() and pids.read_text().strip() != "", what="the grandchild")
    grandchild = int(pids.read_text().split()[0])
    began = time.monotonic()
    assert steer(f, state, "kill", "stubborn").returncode == 0
    finished = daemon.wait_for("job.finished")
    assert finished["outcome"] == "killed"
    assert time.monotonic() - began < 10  # TERM ignored: KILL after kill_after (1 s)
    eventually(lambda: not pid_alive(grandchild), what="the grandchild gone")
    daemon.stop()


def test_a_pause_outlives_kill_9_and_a_for_pause_ends_by_itself(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f = write(
        tmp_path / "s.yaml",
        """
        jobs:
          tick: {every: 1s, command: "true"}
          held: {every: 1s, command: "true"}
        """,
    )
    state = tmp_path / "st"
    first = start(crond, f, state)
    assert steer(f, state, "pause", "held", "--note", "maintenance").returncode == 0
    assert steer(f, state, "pause", "tick", "--for", "3s").returncode == 0
    first.proc.send_signal(signal.SIGKILL)
    first.exited()
    second = start(crond, f, state)
    # `tick`'s pause runs out by itself (by: null); `held` stays paused across the restart.
    resumed = second.wait_for("job.resumed", timeout=10)
    assert (resumed["job"], resumed["by"]) == ("tick", None)
    second.wait_for("job.started", lambda e: e["job"] == "tick")
    time.sleep(1.5)  # two more slots of `held` pass, paused
    assert not [e for e in second.named("job.started") if e["job"] == "held"]
    status = steer(f, state, "status", "--json")
    rows = {r["job"]: r for r in map(json.loads, status.stdout.splitlines())}
    assert rows["held"]["paused"]["note"] == "maintenance"
    assert rows["tick"]["paused"] is None
    second.stop()


def test_the_limits_under_a_burst(tmp_path: Path, crond: list[Crond]) -> None:
    out = tmp_path / "starts"
    # Every run holds its place until the test lets them go (not a fixed sleep that a
    # busy machine could outlast before the trigger below is refused).
    release = tmp_path / "release"
    hold = f"while [ ! -e {release} ]; do sleep 0.05; done"
    f = write(
        tmp_path / "s.yaml",
        f"""
        daemon: {{max_running: 3}}
        jobs:
          many: {{every: 1s, overlap: allow, max_running: 2, command: "echo x >> {out}; {hold}"}}
          a: {{every: 1s, command: "{hold}"}}
          b: {{every: 1s, command: "{hold}"}}
        """,
    )
    state = tmp_path / "st"
    daemon = start(crond, f, state)
    daemon.wait_for("job.skipped", lambda e: e["reason"] == "max_running", timeout=10)
    daemon.wait_for("job.queued", timeout=10)
    time.sleep(2)  # two more seconds of slots against the limits
    ps = steer(f, state, "ps", "--json")
    running = [json.loads(line) for line in ps.stdout.splitlines()]
    assert len(running) <= 3  # the daemon's limit
    assert sum(1 for r in running if r["job"] == "many") <= 2  # the job's
    refused = steer(f, state, "trigger", "many")
    assert refused.returncode == 1
    assert "max_running" in refused.stderr
    release.touch()
    daemon.stop()
    peak = _peak(daemon)
    assert peak <= 3


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def open_fds(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def _peak(daemon: Crond) -> int:
    """The most runs going at once, from the log's starts and ends."""
    going, peak = 0, 0
    for event in daemon.events:
        if event["event"] == "job.started" and event["attempt"] == 1:
            going += 1
            peak = max(peak, going)
        elif event["event"] == "job.finished":
            going -= 1
    return peak


def test_a_silent_client_and_a_thousand_requests_do_not_disturb_the_schedule(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f = write(tmp_path / "s.yaml", "jobs:\n  tick: {every: 1s, command: 'true'}\n")
    state = tmp_path / "st"
    daemon = start(crond, f, state)
    fds = open_fds(daemon.proc.pid)
    silent = socket.socket(socket.AF_UNIX)
    silent.connect(str(state / "crond.sock"))  # and sends nothing
    try:
        before = len(daemon.named("job.started"))
        daemon.wait_for("job.started", lambda e: len(daemon.named("job.started")) > before + 2)
        lags = [e["lag_ms"] for e in daemon.named("job.started")[before:]]
        assert max(lags) < 100  # on time while the client sits there
        warm = 0
        for i in range(1000):
            if i == 100:  # caches and pools warmed up: from here memory must stay flat
                warm = rss_kib(daemon.proc.pid)
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(state / "crond.sock"))
                sock.sendall(b'{"v": 1, "cmd": "ps", "args": {}}\n')
                reply = sock.makefile("rb").readline()
                assert json.loads(reply)["ok"] is True
        assert rss_kib(daemon.proc.pid) - warm < 2048  # no memory growth (< 2 MB for 900)
    finally:
        silent.close()
    eventually(lambda: open_fds(daemon.proc.pid) <= fds + 2, what="no fd growth")
    daemon.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to be another user)")
def test_a_user_outside_the_group_is_refused(tmp_path: Path, crond: list[Crond]) -> None:
    f = write(tmp_path / "s.yaml", f"jobs:\n  j: {{{FAR}, command: 'true'}}\n")
    state = tmp_path / "st"
    start(crond, f, state)
    sock = state / "crond.sock"
    assert sock.stat().st_mode & 0o777 == 0o660
    tmp_path.chmod(0o755)  # nobody may reach the socket's directory; only its mode stops it
    state.chmod(0o755)
    python = shutil.which("python3", path="/usr/bin:/bin")  # not the venv's: under /root
    if python is None:
        pytest.skip("no system python3 for another user to run")
    tried = subprocess.run(
        [python, "-c", _CONNECT, str(sock)],
        user=65534,
        group=65534,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert tried.stdout.strip() == "PermissionError", tried.stderr


_CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); s.sendall(b'{"v": 1, "cmd": "ps", "args": {}}\\n')
    print("connected:", s.makefile("rb").readline())
except OSError as exc:
    print(type(exc).__name__)
"""


def test_two_triggers_of_a_replace_job_leave_one_run_going(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f = write(
        tmp_path / "s.yaml",
        "daemon: {shutdown_timeout: 1s}\n"
        f"jobs:\n  rep: {{{FAR}, overlap: replace, kill_after: 1s, command: 'sleep 60'}}\n",
    )
    state = tmp_path / "st"
    daemon = start(crond, f, state)
    assert steer(f, state, "trigger", "rep").returncode == 0
    args = [str(f), "--state-dir", str(state)]
    both = [
        subprocess.Popen(
            [CROND, "trigger", args[0], "rep", *args[1:]], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    ids = [p.communicate(timeout=30)[0].strip() for p in both]
    assert all(ids), ids
    for _ in range(3):  # the first run, then each trigger's: the later replaces the earlier
        daemon.wait_for("job.started")
    ended = [daemon.wait_for("job.finished")["outcome"] for _ in range(2)]
    assert ended == ["killed", "killed"]
    ps = steer(f, state, "ps", "--json")
    assert len(ps.stdout.splitlines()) == 1  # one run of rep goes: the newest
    daemon.stop()


def test_callers_that_hang_up_on_a_wait_give_their_place_back(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f = write(
        tmp_path / "s.yaml",
        "daemon: {shutdown_timeout: 1s}\n"
        f"jobs:\n  quiet: {{{FAR}, overlap: allow, command: 'sleep 60'}}\n",
    )
    state = tmp_path / "st"
    daemon = start(crond, f, state)
    for _ in range(20):  # more than the 16 connections the socket takes at once
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(state / "crond.sock"))
            sock.sendall(b'{"v": 1, "cmd": "trigger", "args": {"job": "quiet", "wait": true}}\n')
        daemon.wait_for("job.triggered")  # then hung up (Ctrl-C) on a run that prints nothing
    ps = steer(f, state, "ps", "--json")
    assert ps.returncode == 0, ps.stderr
    assert len(ps.stdout.splitlines()) == 20  # the runs go on
    daemon.stop()


def test_the_socket_where_the_file_says_or_none(tmp_path: Path, crond: list[Crond]) -> None:
    sock = tmp_path / "elsewhere.sock"
    job = f"jobs:\n  j: {{{FAR}, command: 'true'}}\n"
    f = write(tmp_path / "s.yaml", f"daemon: {{control_socket: {sock}}}\n{job}")
    daemon = Crond([str(f), "--state-dir", "none"])
    crond.append(daemon)
    assert daemon.wait_for("control.listening")["path"] == str(sock)
    assert run_cli("ps", str(f)).returncode == 0  # found from the file
    daemon.stop()
    off = write(tmp_path / "off.yaml", f"daemon: {{control_socket: none}}\n{job}")
    quiet = Crond([str(off), "--state-dir", "none"])
    crond.append(quiet)
    quiet.wait_for("daemon.started")
    said = run_cli("ps", str(off))
    assert said.returncode == 2
    assert "control_socket: none" in said.stderr
    quiet.stop()
    assert not quiet.named("control.listening")


def test_a_pause_until_an_instant_past_names_it_and_now(tmp_path: Path) -> None:
    f = write(tmp_path / "s.yaml", f"jobs:\n  nightly: {{{FAR}, command: 'true'}}\n")
    before = time.time()
    refused = run_cli("pause", str(f), "nightly", "--until", "2026-01-04T11:00:00+01:00")
    after = time.time()
    assert refused.returncode == 2  # a usage error: nothing is sent (no daemon needed)
    said = refused.stderr.strip().splitlines()[-1]
    head = "Error: --until 2026-01-04T10:00:00Z has passed (now "
    tail = "): give a later instant or --for"
    assert said.startswith(head), refused.stderr
    assert said.endswith(tail), refused.stderr
    now = said[len(head) : -len(tail)]
    assert now.endswith("Z")
    shown = datetime.fromisoformat(now).timestamp()
    assert int(before) <= shown <= after
