"""Faults from outside: the daemon keeps scheduling through each of them."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
from pathlib import Path

from tests.e2e.harness import CROND, Crond, eventually, run_cli


def write(path: Path, text: str) -> Path:
    """Atomically, as editors and config management do."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(textwrap.dedent(text))
    tmp.replace(path)
    return path


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_unwritable_liveness_dir_keeps_scheduling(tmp_path: Path, crond: list[Crond]) -> None:
    live_dir = tmp_path / "run"
    live_dir.mkdir()
    live = live_dir / "liveness.json"
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {every: 1s, command: 'true'}\n")
    d = Crond([str(f), "--liveness-file", str(live), "--heartbeat", "200ms"])
    crond.append(d)
    eventually(live.exists, what="liveness file written")
    live_dir.rename(tmp_path / "old-run")  # atomic: the daemon may be writing right now
    live_dir.write_text("not a directory")  # root ignores modes: make writes fail for real
    first = d.wait_for("liveness.write_failed")
    assert first["path"] == str(live)
    later = d.wait_for("job.started", lambda e: e["timestamp"] > first["timestamp"])
    d.wait_for("job.started", lambda e: e["timestamp"] > later["timestamp"])  # and on
    result = run_cli("health", "--liveness-file", str(live))
    assert result.returncode == 1
    live_dir.unlink()
    live_dir.mkdir()
    d.wait_for("liveness.write_recovered")
    failures = d.named("liveness.write_failed")
    assert d.stop() == 0
    # At most one error per heartbeat: never more failures than heartbeats went by.
    span = len(d.named("job.started")) + 2  # seconds the daemon ran, roughly, x5 beats
    assert 1 <= len(failures) <= span * 5 + 5


def test_closed_stderr_does_not_stop_scheduling(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    f = write(tmp_path / "s.yaml", f"jobs:\n  a: {{every: 1s, command: 'echo x >> {out}'}}\n")
    proc = subprocess.Popen(
        [CROND, "run", str(f), "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        assert proc.stdout is not None
        proc.stderr.readline()  # daemon.started
        proc.stderr.close()  # journald went away: every log write now fails (EPIPE)
        proc.stdout.close()
        seen = lines(out)
        eventually(lambda: lines(out) >= seen + 3, 10, "three more runs after stderr closed")
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_kill_9_of_the_job_group_is_killed(tmp_path: Path, crond: list[Crond]) -> None:
    f = write(tmp_path / "s.yaml", "jobs:\n  victim: {every: 1s, command: 'echo up; sleep 60'}\n")
    d = Crond([str(f)])
    crond.append(d)
    started = d.wait_for("job.started", lambda e: e["job"] == "victim")
    d.wait_for("job.output", lambda e: e["line"] == "up")
    os.killpg(started["pid"], signal.SIGKILL)  # from outside, like the OOM killer or an admin
    done = d.wait_for("job.finished", lambda e: e["run_id"] == started["run_id"])
    assert (done["outcome"], done["exit_code"]) == ("killed", -9)
    assert done["level"] == "warning"
    assert d.stop() == 0


def test_job_that_closes_its_output_is_still_supervised(tmp_path: Path, crond: list[Crond]) -> None:
    mark = tmp_path / "mark"
    f = write(
        tmp_path / "s.yaml",
        f"""\
        jobs:
          quiet:
            every: 1s
            timeout: 1s
            kill_after: 200ms
            command: echo bye; exec >&- 2>&-; touch {mark}; sleep 60
        """,
    )
    d = Crond([str(f)])
    crond.append(d)
    started = d.wait_for("job.started")
    eventually(mark.exists, what="the job closed its output and goes on")
    done = d.wait_for("job.finished", lambda e: e["run_id"] == started["run_id"])
    assert done["outcome"] == "timeout"
    assert done["duration_s"] >= 0.9
    assert d.stop() == 0


def test_hup_storm_leaves_the_last_file_loaded(tmp_path: Path, crond: list[Crond]) -> None:
    f = write(tmp_path / "s.yaml", "jobs:\n  j0: {every: 1h, command: 'true'}\n")
    d = Crond([str(f)])
    crond.append(d)
    d.wait_for("daemon.started")
    for i in range(1, 101):
        write(f, f"jobs:\n  j{i}: {{every: 1h, command: 'true'}}\n")
        d.signal(signal.SIGHUP)
    jobs = {"j0"}

    def settled() -> bool:
        for event in d.named("config.reloaded"):
            if not event.get("_applied"):
                event["_applied"] = True
                jobs.difference_update(event["removed"])
                jobs.update(event["added"])
        return jobs == {"j100"}

    while not settled():
        d.wait_for("config.reloaded", timeout=10)  # fails the test if the reloads stop short
    assert d.named("config.reload_failed") == []
    assert d.proc.poll() is None
    assert d.stop() == 0
