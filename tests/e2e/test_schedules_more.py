"""Schedules as a person writes them, with the real binary (docs/schedules.md): `max_runs`
kept across a restart (kill -9 included), an `at`-only job done and `status` saying so,
`validate` and `next` on a file with a `cron` list, `at` and bounds, `catchup: all` after
three hours down."""

from __future__ import annotations

import json
import signal
import sqlite3
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.e2e.harness import Crond, eventually, run_cli


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def _status(f: Path, state: Path) -> dict[str, dict[str, object]]:
    result = run_cli("status", str(f), "--state-dir", str(state), "--json")
    assert result.returncode == 0, result.stderr
    return {row["job"]: row for row in map(json.loads, result.stdout.splitlines())}


def test_max_runs_holds_across_a_kill_9_and_a_restart(tmp_path: Path, crond: list[Crond]) -> None:
    state = tmp_path / "state"
    f = _write(
        tmp_path / "s.yaml",
        """\
        jobs:
          limited:
            every: 1s
            max_runs: 4
            command: "true"
        """,
    )
    first = Crond([str(f), "--state-dir", str(state)])
    crond.append(first)
    first.wait_for("job.finished", lambda e: e["job"] == "limited")
    first.wait_for("job.finished", lambda e: e["job"] == "limited")
    first.proc.kill()  # kill -9 after two or three runs
    first.proc.wait(10)
    ran = {e["slot"] for e in first.named("job.started")}
    assert 2 <= len(ran) <= 4

    second = Crond([str(f), "--state-dir", str(state)])
    crond.append(second)
    for _ in range(4 - len(ran)):
        second.wait_for("job.finished", lambda e: e["job"] == "limited")
    # Done: the daemon's view says so (published just after the last start)
    eventually(lambda: bool(_status(f, state)["limited"].get("done")), what="done in status")
    row = _status(f, state)["limited"]
    assert row["next_fire"] is None
    assert row["done"] == "done: max_runs 4 reached"
    assert second.stop() == 0
    slots = ran | {e["slot"] for e in second.named("job.started")}
    assert len(slots) == 4  # four runs in all, none twice
    assert len(first.named("job.started")) + len(second.named("job.started")) == 4

    third = Crond([str(f), "--state-dir", str(state)])  # a clean restart starts nothing
    crond.append(third)
    third.wait_for("daemon.started")
    assert third.stop() == 0
    assert third.named("job.started") == []
    table = run_cli("status", str(f), "--state-dir", str(state))
    assert "done: max_runs 4 reached" in table.stdout


def test_an_at_only_job_runs_once_and_status_says_it_is_done(
    tmp_path: Path, crond: list[Crond]
) -> None:
    state = tmp_path / "state"
    text = """\
        jobs:
          once:
            at: "{at}"
            command: "true"
        """
    f = _write(tmp_path / "s.yaml", text.format(at="2030-01-01T00:00:00Z"))
    daemon = Crond([str(f), "--state-dir", str(state)])
    crond.append(daemon)
    daemon.wait_for("daemon.started")  # however long a busy machine takes to start it
    soon = (datetime.now(UTC) + timedelta(seconds=1.5)).replace(microsecond=0)
    _write(f, text.format(at=soon.isoformat()))
    daemon.signal(signal.SIGHUP)
    daemon.wait_for("config.reloaded")
    started = daemon.wait_for("job.started", lambda e: e["job"] == "once")
    assert started["slot"] == soon.strftime("%Y-%m-%dT%H:%M:%SZ")
    daemon.wait_for("job.finished", lambda e: e["job"] == "once")
    assert daemon.stop() == 0
    row = _status(f, state)["once"]
    assert row["next_fire"] is None
    assert row["done"] == "done: its at instants have run"
    validated = run_cli("validate", str(f))
    assert validated.returncode == 0
    assert "is in the past" in validated.stderr  # the instant has run: validate warns


def test_validate_and_next_understand_lists_instants_and_bounds(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "s.yaml",
        """\
        timezone: America/New_York
        jobs:
          mixed:
            cron: ["0 8 * * mon-fri", "0 10 * * sat,sun"]
            at: 2027-03-14T02:30
            start: 2027-03-12T00:00
            end: 2027-03-15T00:00
            command: "true"
          broken:
            cron: ["0 8 * * *", "0 25 * * *"]
            start: 2027-03-15T00:00
            end: 2027-03-12T00:00
            at: [2027-03-14]
            command: "true"
        """,
    )
    bad = run_cli("validate", str(f))
    assert bad.returncode == 1
    lines = bad.stdout.splitlines() + bad.stderr.splitlines()
    assert any(":10:" in line and "jobs.broken.cron.1" in line and "25" in line for line in lines)
    assert any(":13:" in line and "jobs.broken.at.0" in line for line in lines)
    # (the checks between fields come once each field is valid, as for cron and every)
    g = _write(
        tmp_path / "t.yaml",
        """\
        jobs:
          broken:
            every: 1h
            start: 2027-03-15T00:00:00Z
            end: 2027-03-12T00:00:00Z
            command: "true"
        """,
    )
    bounds = run_cli("validate", str(g))
    assert bounds.returncode == 1
    assert ":5:" in bounds.stdout + bounds.stderr
    assert "jobs.broken.end: end 2027-03-12T00:00:00+00:00 is before start" in (
        bounds.stdout + bounds.stderr
    )
    f.write_text(f.read_text().split("  broken:")[0])
    good = run_cli("next", str(f), "--from", "2027-03-11T00:00:00Z", "-n", "10", "--json")
    assert good.returncode == 0, good.stderr
    fires = [json.loads(line) for line in good.stdout.splitlines()]
    assert [(x["at"], x["note"] is not None) for x in fires] == [
        ("2027-03-12T13:00:00Z", False),  # Fri 08:00 EST
        ("2027-03-13T15:00:00Z", False),  # Sat 10:00 EST
        ("2027-03-14T07:00:00Z", True),  # the `at` in the gap: 03:00 EDT, the jump
        ("2027-03-14T14:00:00Z", False),  # Sun 10:00 EDT; nothing after `end`
    ]


def test_overlap_queue_under_a_job_that_runs_two_and_a_half_intervals(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f = _write(
        tmp_path / "s.yaml",
        """\
        daemon:
          shutdown_timeout: 1s
        jobs:
          slow:
            every: 1s
            grace: 5s
            overlap: queue
            command: sleep 2.5
        """,
    )
    daemon = Crond([str(f), "--state-dir", "none"])
    crond.append(daemon)
    first = daemon.wait_for("job.started")
    t1 = datetime.fromisoformat(first["slot"].replace("Z", "+00:00"))

    def iso(seconds: int) -> str:
        return (t1 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")

    second = daemon.wait_for("job.started", timeout=10)
    assert daemon.stop() == 0
    assert second["slot"] == iso(1)  # the buffered one: started when the first ended
    assert second["lag_ms"] >= 1400  # at about t1 + 2.5 s
    queued = [e["slot"] for e in daemon.named("job.queued")]
    skipped = [(e["slot"], e["reason"]) for e in daemon.named("job.skipped")]
    assert queued[0] == iso(1)
    assert (iso(2), "overlap") in skipped  # one waited already
    order = [e["event"] for e in daemon.events if e["event"] in {"job.started", "job.finished"}]
    assert "job.started,job.started" not in ",".join(order)  # never two at once


def test_catchup_all_after_three_hours_down_runs_each_hour_oldest_first(
    tmp_path: Path, crond: list[Crond]
) -> None:
    # Three hours down, made real in the store: the cursor the daemon kept moved back to
    # the whole hour three hours ago (an hourly job's slots since: three).
    state, out = tmp_path / "state", tmp_path / "slots"
    f = _write(
        tmp_path / "s.yaml",
        f"""\
        jobs:
          hourly:
            cron: "0 * * * *"
            catchup: all
            command: 'echo "$CROND_SLOT" >> {out}; sleep 0.3'
        """,
    )
    first = Crond([str(f), "--state-dir", str(state)])
    crond.append(first)
    first.wait_for("daemon.started")
    assert first.stop() == 0
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    with sqlite3.connect(state / "crond.sqlite3") as db:
        db.execute("INSERT OR REPLACE INTO cursors VALUES ('hourly', ?)",
                   ((hour - timedelta(hours=3)).timestamp(),))  # fmt: skip

    second = Crond([str(f), "--state-dir", str(state)])
    crond.append(second)
    caught = second.wait_for("job.caught_up", lambda e: e["job"] == "hourly")
    for _ in range(3):
        second.wait_for("job.finished", lambda e: e["job"] == "hourly")
    assert second.stop() == 0
    expected = [(hour - timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ") for h in (2, 1, 0)]
    assert caught["slots"] == 3
    assert out.read_text().split()[:3] == expected  # oldest first, once each
    spans = [(e["slot"], e["timestamp"]) for e in second.named("job.started")][:3]
    ends = [e["timestamp"] for e in second.named("job.finished")][:3]
    assert [slot for slot, _ in spans] == expected
    assert all(end <= nxt for end, (_, nxt) in zip(ends, spans[1:], strict=False))  # one at a time


def test_an_at_job_that_never_ran_is_caught_up_after_a_downtime_across_its_instant(
    tmp_path: Path, crond: list[Crond]
) -> None:
    """The daemon sees a new job (an `at` instant three seconds ahead, `catchup: latest`)
    and is stopped before the instant: the job never ran, yet the downtime is its too
    (its cursor was kept when it was first seen), so the next start runs it, caught up."""
    state = tmp_path / "state"
    instant = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
    out = tmp_path / "out"
    f = _write(
        tmp_path / "s.yaml",
        f"""\
        jobs:
          once:
            at: {instant:%Y-%m-%dT%H:%M:%SZ}
            catchup: latest
            command: 'echo $CROND_SLOT >> {out}'
        """,
    )
    first = Crond([str(f), "--state-dir", str(state)])
    crond.append(first)
    first.wait_for("daemon.started")
    eventually(
        lambda: (
            sqlite3.connect(state / "crond.sqlite3")
            .execute("SELECT count(*) FROM cursors WHERE job = 'once'")
            .fetchone()[0]
            == 1
        ),
        what="the new job's cursor kept",
    )
    assert first.stop() == 0
    eventually(lambda: datetime.now(UTC) > instant + timedelta(seconds=0.5), timeout=10,
               what="the instant passed while the daemon was down")  # fmt: skip
    second = Crond([str(f), "--state-dir", str(state)])
    crond.append(second)
    started = second.wait_for("job.started", lambda e: e["job"] == "once")
    second.wait_for("job.finished", lambda e: e["job"] == "once")
    assert second.stop() == 0
    assert started["slot"] == f"{instant:%Y-%m-%dT%H:%M:%SZ}"  # late: its grace, or caught up
    assert out.read_text().split() == [started["slot"]]
