"""Chains with the real `crond` binary: the daemon is killed (SIGKILL) after a parent's
end and before its child's start; the next daemon starts the child once, told of the
parent's run (docs/workflows.md, "Nothing lost")."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from crond.store import sqlite
from tests.daemon.test_chains_fake_clock import TELL
from tests.e2e.harness import Crond, pid_alive, run_cli
from tests.e2e.test_daemon import start

FILE = """\
locks: {{db: 1}}
daemon: {{control_socket: {sock}}}
jobs:
  hold: {{every: 1s, locks: [db], enabled: {hold}, command: 'echo $$ >> {pids}; exec sleep 60'}}
  extract: {{every: 1h, command: 'true'}}
  load: {{after: extract, locks: [db], command: '{tell}'}}
"""


def test_a_child_whose_parent_ended_before_a_kill_9_runs_once_after_the_restart(
    tmp_path: Path, crond: list[Crond]
) -> None:
    out, pids, sock = tmp_path / "told.jsonl", tmp_path / "pids", tmp_path / "crond.sock"
    script = tmp_path / "tell.py"
    script.write_text(TELL)
    tell = f"{sys.executable} {script} {out}"
    f = tmp_path / "s.yaml"
    f.write_text(FILE.format(sock=sock, hold="true", pids=pids, tell=tell))
    state = ["--state-dir", str(tmp_path / "state")]
    d = start(crond, str(f), *state)
    d.wait_for("job.started", lambda e: e["job"] == "hold")  # hold takes db, for a minute
    triggered = run_cli("trigger", str(f), "extract", "--socket", str(sock))
    assert triggered.returncode == 0, triggered.stderr
    extract = triggered.stdout.strip()
    d.wait_for("job.finished", lambda e: e["run_id"] == extract)
    waiting = d.wait_for("job.waiting", lambda e: e["job"] == "load")  # db is hold's
    d.proc.send_signal(signal.SIGKILL)  # between extract's end and load's start
    d.exited()
    for pid in map(int, pids.read_text().split()):  # (hold's runs outlived the daemon)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    f.write_text(FILE.format(sock=sock, hold="false", pids=pids, tell=tell))
    again = start(crond, str(f), *state)
    done = again.wait_for("job.finished", lambda e: e["job"] == "load")
    assert done["outcome"] == "success"
    assert again.stop() == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 1  # once, not again at the second start
    assert lines[0]["CROND_PARENT_RUN_ID"] == extract
    assert lines[0]["CROND_PARENT_OUTCOME"] == "success"
    assert lines[0]["CROND_SLOT"] == waiting["slot"]
    store = sqlite.SqliteStore(tmp_path / "state")  # load's start took its record away:
    assert store.pending_chained() == []  # a third daemon starts nothing
    store.close()


def test_a_chain_of_three_and_a_failure_branch(tmp_path: Path, crond: list[Crond]) -> None:
    """extract -> load -> report, each started by its parent's success and told of it;
    a failing audit starts its failure branch (page) and not its success branch."""
    out, sock = tmp_path / "told.jsonl", tmp_path / "crond.sock"
    script = tmp_path / "tell.py"
    script.write_text(TELL)
    tell = f"{sys.executable} {script} {out}"
    f = tmp_path / "s.yaml"
    f.write_text(
        f"daemon: {{control_socket: {sock}}}\n"
        "jobs:\n"
        f"  extract: {{every: 1h, command: '{tell}'}}\n"
        f"  load: {{after: extract, command: '{tell}'}}\n"
        f"  report: {{after: {{load: success}}, command: '{tell}'}}\n"
        f"  audit: {{every: 1h, command: '{tell} 3'}}\n"
        f"  page: {{after: {{audit: failure}}, command: '{tell}'}}\n"
        f"  celebrate: {{after: audit, command: '{tell}'}}\n"
    )
    d = start(crond, str(f), "--state-dir", str(tmp_path / "state"))
    d.wait_for("daemon.started")
    for job in ("extract", "audit"):
        assert run_cli("trigger", str(f), job, "--socket", str(sock)).returncode == 0
    d.wait_for("job.finished", lambda e: e["job"] == "report")
    d.wait_for("job.finished", lambda e: e["job"] == "page")
    assert d.stop() == 0
    told = {line["CROND_JOB"]: line for line in map(json.loads, out.read_text().splitlines())}
    assert set(told) == {"extract", "load", "report", "audit", "page"}  # not celebrate
    runs = {e["job"]: e["run_id"] for e in d.named("job.started")}
    assert told["load"]["CROND_PARENT_RUN_ID"] == runs["extract"]
    assert told["report"]["CROND_PARENT_RUN_ID"] == runs["load"]
    assert told["page"]["CROND_PARENT_RUN_ID"] == runs["audit"]
    assert (told["page"]["CROND_PARENT_OUTCOME"], told["page"]["CROND_PARENT_EXIT_CODE"]) == (
        "failed",
        "3",
    )
    assert told["report"]["CROND_SLOT"] == told["extract"]["CROND_SLOT"]  # the parent's slot
    order = [e["job"] for e in d.named("job.started")]
    assert order.index("extract") < order.index("load") < order.index("report")
