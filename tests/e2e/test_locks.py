"""Named locks with the real `crond` binary: two jobs due together every second share a
lock of one place; from their own timestamps, they never run at once (the ten-minute
span is the FakeClock test's, tests/daemon/test_locks_fake_clock.py)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from tests.daemon.test_locks_fake_clock import RUN, intervals
from tests.e2e.harness import Crond, eventually, run_cli
from tests.e2e.test_daemon import start, write


def test_two_jobs_sharing_a_lock_never_run_at_once(tmp_path: Path, crond: list[Crond]) -> None:
    out = tmp_path / "runs.txt"
    f = write(
        tmp_path / "s.yaml",
        f"""\
        locks: {{db: 1}}
        jobs:
          backup: {{every: 1s, locks: [db], command: '{RUN.format(job="backup", out=out)}'}}
          vacuum: {{every: 1s, locks: [db], command: '{RUN.format(job="vacuum", out=out)}'}}
        """,
    )
    d = start(crond, str(f), "--state-dir", str(tmp_path / "state"))
    d.wait_for("daemon.started")
    for job in ("backup", "vacuum", "backup", "vacuum"):
        d.wait_for("job.finished", lambda e, j=job: e["job"] == j)  # type: ignore[misc]
    wait = d.wait_for("job.waiting")
    assert d.stop() == 0
    assert (wait["reason"], wait["lock"]) == ("lock", "db")
    assert wait["held_by"][0].split("@")[0] in {"backup", "vacuum"} - {wait["job"]}
    runs = intervals(out)
    assert {job for job, _, _ in runs} == {"backup", "vacuum"}
    for (_, _, end), (_, begin, _) in itertools.pairwise(runs):
        assert end <= begin, "two holders of db: 1 ran at once"


def test_ps_shows_who_holds_a_lock_and_who_waits(tmp_path: Path, crond: list[Crond]) -> None:
    sock = tmp_path / "crond.sock"
    f = write(
        tmp_path / "s.yaml",
        f"""\
        locks: {{db: 1}}
        daemon: {{control_socket: {sock}}}
        jobs:
          backup: {{every: 1h, locks: [db], command: 'exec sleep 30'}}
          vacuum: {{every: 1s, locks: [db], grace: 1h, command: 'true'}}
          report: {{every: 1h, locks: [db], command: 'true'}}
        """,
    )
    d = start(crond, str(f), "--state-dir", str(tmp_path / "state"))
    d.wait_for("daemon.started")
    assert run_cli("trigger", str(f), "backup", "--socket", str(sock)).returncode == 0
    waiting = d.wait_for("job.waiting", lambda e: e["job"] == "vacuum")
    refused = run_cli("trigger", str(f), "report", "--socket", str(sock))
    assert refused.returncode == 1
    assert "older run(s) wait for report's locks (vacuum first)" in refused.stderr
    lines = [json.loads(line) for line in run_cli("ps", str(f), "--json").stdout.splitlines()]
    assert [(e["job"], e.get("locks"), e.get("waiting")) for e in lines] == [
        ("backup", ["db"], None),
        ("vacuum", None, True),
    ]
    assert lines[1]["slot"] == waiting["slot"]
    assert (lines[1]["lock"], lines[1]["held_by"][0].split("@")[0]) == ("db", "backup")
    table = run_cli("ps", str(f)).stdout.splitlines()
    assert table[1].split()[-1] == "LOCKS"
    assert table[2].split()[-1] == "db"
    assert table[3].split()[:3] == ["WAITING", "SLOT", "LOCK"]
    assert table[4].split()[0] == "vacuum"
    # `status` says the same, from the store (the daemon keeps its locks there).
    state = ["--state-dir", str(tmp_path / "state")]
    eventually(
        lambda: "waiting: vacuum" in run_cli("status", str(f), *state).stdout,
        what="status shows the locks (kept by the daemon on its loop's next turn)",
    )
    said = run_cli("status", str(f), *state).stdout.splitlines()
    held = [line for line in said if line.startswith("lock db:")]
    assert held == [
        f"lock db: held by {lines[0]['job']}@{lines[0]['slot']}; waiting: "
        f"vacuum@{waiting['slot']} (until {lines[1]['deadline']})"
    ], said
    rows = {
        r["job"]: r
        for r in map(json.loads, run_cli("status", str(f), *state, "--json").stdout.splitlines())
    }
    assert rows["backup"]["locks"] == {"holds": ["db"], "waiting": []}
    assert [w["lock"] for w in rows["vacuum"]["locks"]["waiting"]] == ["db"]
    assert "locks" not in rows["report"]
    assert run_cli("kill", str(f), "backup", "--socket", str(sock)).returncode == 0
    d.wait_for("job.finished", lambda e: e["job"] == "vacuum")  # it got db at once
    assert d.stop() == 0
