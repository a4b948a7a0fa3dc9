"""Named locks with the real `crond` binary: two jobs due together every second share a
lock of one place; from their own timestamps, they never run at once (the ten-minute
span is the FakeClock test's, tests/daemon/test_locks_fake_clock.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.daemon.test_locks_fake_clock import RUN, intervals
from tests.e2e.harness import Crond
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
