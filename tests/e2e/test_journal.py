"""Under systemd, stderr is the journal's stream: each line carries its syslog priority."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.e2e.harness import CROND, eventually


def run_with_stderr_to(log: Path, schedules: Path, journal_stream: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    with log.open("w") as sink:
        if journal_stream == "this file":
            st = os.fstat(sink.fileno())
            journal_stream = f"{st.st_dev}:{st.st_ino}"
        if journal_stream is not None:
            env["JOURNAL_STREAM"] = journal_stream
        proc = subprocess.Popen(
            [CROND, "run", str(schedules), "--state-dir", "none"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env,
        )
        try:
            eventually(lambda: '"outcome":"failed"' in log.read_text(), timeout=15)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(15) == 0
    return log.read_text().splitlines()


def test_lines_carry_their_priority_for_journald(tmp_path: Path) -> None:
    schedules = tmp_path / "s.yaml"
    schedules.write_text("jobs:\n  bad: {every: 1s, command: 'exit 3'}\n")
    lines = run_with_stderr_to(tmp_path / "journal.log", schedules, "this file")
    started = next(line for line in lines if '"event":"daemon.started"' in line)
    failed = next(line for line in lines if '"event":"job.finished"' in line)
    assert started.startswith('<6>{"timestamp":')
    assert failed.startswith("<3>{")  # `journalctl -p err` shows it


def test_no_prefix_when_stderr_is_not_the_journal(tmp_path: Path) -> None:
    """A JOURNAL_STREAM inherited from elsewhere (stderr redirected to a file, a pipe)."""
    schedules = tmp_path / "s.yaml"
    schedules.write_text("jobs:\n  bad: {every: 1s, command: 'exit 3'}\n")
    lines = run_with_stderr_to(tmp_path / "plain.log", schedules, "8:12345")
    assert all(line.startswith("{") for line in lines)
