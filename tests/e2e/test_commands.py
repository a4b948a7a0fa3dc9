"""The small commands with the real binary: `crond reload` through the control socket,
`crond ps`'s daemon pid (docs/control.md)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from tests.e2e.harness import Crond, run_cli

FAR = "cron: '0 0 1 1 *'"


def _write(path: Path, jobs: str) -> Path:
    path.write_text("jobs:\n" + textwrap.indent(textwrap.dedent(jobs), "  "))
    return path


def _start(started: list[Crond], f: Path, state: Path) -> Crond:
    daemon = Crond([str(f), "--state-dir", str(state)])
    started.append(daemon)
    daemon.wait_for("control.listening")
    return daemon


def test_reload_says_what_changed_and_the_errors_that_kept_the_old_jobs(
    tmp_path: Path, crond: list[Crond]
) -> None:
    two = f"a: {{{FAR}, command: 'true'}}\nb: {{{FAR}, command: 'true'}}\n"
    f = _write(tmp_path / "s.yaml", two)
    state = tmp_path / "st"
    daemon = _start(crond, f, state)
    _write(f, f"a: {{{FAR}, command: 'false'}}\nc: {{{FAR}, command: 'true'}}\n")
    done = run_cli("reload", str(f), "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "reloaded: 2 jobs (1 added: c; 1 removed: b; 1 changed: a)\n"
    asked = daemon.wait_for("config.reload_requested")
    assert asked["by"]["uid"] == os.getuid()
    assert daemon.wait_for("config.reloaded")["added"] == ["c"]
    f.write_text("jobs:\n  a: {cron: 'nope', command: 'true'}\n")
    refused = run_cli("reload", str(f), "--state-dir", str(state))
    assert refused.returncode == 1
    first, *_, last = refused.stderr.splitlines()
    assert first.startswith(f"{f}:2:")
    assert "cron" in first
    assert last == f"crond: {f} was not reloaded (errors above); the daemon keeps the 2 jobs it had"
    daemon.wait_for("config.reload_failed")
    assert daemon.proc.poll() is None


def test_reload_without_a_daemon_exits_2(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", f"a: {{{FAR}, command: 'true'}}\n")
    done = run_cli("reload", str(f), "--state-dir", str(tmp_path / "st"))
    assert done.returncode == 2
    assert f"no crond is running for {f}" in done.stderr


def test_ps_shows_the_daemons_pid_with_and_without_runs(tmp_path: Path, crond: list[Crond]) -> None:
    f = _write(tmp_path / "s.yaml", f"slow: {{{FAR}, command: 'sleep 60'}}\n")
    state = tmp_path / "st"
    daemon = _start(crond, f, state)
    idle = run_cli("ps", str(f), "--state-dir", str(state))
    assert (idle.returncode, idle.stdout) == (0, f"daemon pid {daemon.proc.pid}\n")
    assert idle.stderr == "nothing running\n"
    assert run_cli("trigger", str(f), "slow", "--state-dir", str(state)).returncode == 0
    table = run_cli("ps", str(f), "--state-dir", str(state))
    assert table.stdout.splitlines()[0] == f"daemon pid {daemon.proc.pid}"
    assert table.stdout.splitlines()[1].startswith("JOB")
    rows = run_cli("ps", str(f), "--json", "--state-dir", str(state))
    (row,) = [json.loads(line) for line in rows.stdout.splitlines()]
    assert row["daemon_pid"] == daemon.proc.pid
    assert row["job"] == "slow"
