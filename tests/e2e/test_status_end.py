"""`crond status` for a job whose `end` does not fall on a slot, with the real binary
(docs/schedules.md, "Bounds"): once its last slot has run it says `ended at ... (end)`,
from the running daemon's view as after a restart."""

from __future__ import annotations

import json
import signal
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.e2e.harness import Crond, eventually, run_cli

_TEXT = """\
    jobs:
      bounded:
        every: 2s
        end: {end}
        command: "true"
    """


def _done(f: Path, state: Path) -> object:
    result = run_cli("status", str(f), "--state-dir", str(state), "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["job"]: row for row in map(json.loads, result.stdout.splitlines())}
    return rows["bounded"].get("done")


def test_status_says_ended_live_once_the_end_leaves_no_slot(
    tmp_path: Path, crond: list[Crond]
) -> None:
    state, f = tmp_path / "state", tmp_path / "s.yaml"
    f.write_text(textwrap.dedent(_TEXT.format(end="2030-01-01T00:00:00Z")))
    daemon = Crond([str(f), "--state-dir", str(state)])
    crond.append(daemon)
    first = daemon.wait_for("job.started", lambda e: e["job"] == "bounded")
    slot = datetime.fromisoformat(first["slot"])
    # An `end` one second after a slot at least 5 s ahead: its last slot is that one.
    last = slot + timedelta(seconds=2)
    while last < datetime.now(UTC) + timedelta(seconds=5):
        last += timedelta(seconds=2)
    end = last + timedelta(seconds=1)
    f.write_text(textwrap.dedent(_TEXT.format(end=end.strftime("%Y-%m-%dT%H:%M:%SZ"))))
    daemon.signal(signal.SIGHUP)
    daemon.wait_for("config.reloaded")
    ended = f"ended at {end:%Y-%m-%dT%H:%M:%SZ} (end)"
    daemon.wait_for(
        "job.started",
        lambda e: e["job"] == "bounded" and e["slot"] == f"{last:%Y-%m-%dT%H:%M:%SZ}",
    )
    # The daemon's view: ended as soon as no slot is left (before `end` itself, and after).
    eventually(lambda: _done(f, state) == ended, what="ended, from the live view")
    eventually(lambda: datetime.now(UTC) > end + timedelta(seconds=1), what="past the end")
    assert _done(f, state) == ended
    table = run_cli("status", str(f), "--state-dir", str(state))
    assert ended in table.stdout
    assert "never" not in table.stdout
    assert daemon.stop() == 0
    assert not [e for e in daemon.named("job.started") if e["slot"] > f"{last:%Y-%m-%dT%H:%M:%SZ}"]
    assert _done(f, state) == ended  # and without the daemon, read from the file
    again = Crond([str(f), "--state-dir", str(state)])
    crond.append(again)
    again.wait_for("daemon.started")
    assert _done(f, state) == ended
    assert again.stop() == 0
