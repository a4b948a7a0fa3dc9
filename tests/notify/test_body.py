"""Notification bodies and their one-line texts (crond/notify/body.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from crond.notify import body as bodies
from crond.run.attempt import Outcome, RunResult

AT = datetime(2026, 3, 8, 7, 0, 5, tzinfo=UTC)
KEYS = {"event", "job", "host", "run_id", "slot", "attempt", "outcome", "exit_code",
        "duration_s", "streak", "output_tail", "at", "text"}  # fmt: skip


def test_body_has_every_key_null_when_it_does_not_apply() -> None:
    data = json.loads(bodies.body("missed", "backup", "web-1", AT, "t"))
    assert set(data) == KEYS
    assert data["at"] == "2026-03-08T07:00:05Z"
    assert data["run_id"] is None
    assert data["streak"] is None
    assert data["output_tail"] is None


def test_body_of_a_failed_run() -> None:
    slot = datetime(2026, 3, 8, 2, 30, tzinfo=UTC)
    text = bodies.body("failed", "backup", "web-1", AT, "x", run_id="r", slot=slot,
                       attempt=3, outcome="timeout", exit_code=-15, duration_s=7200.0,
                       streak=2, output_tail="a\nb")  # fmt: skip
    data = json.loads(text)
    assert data["slot"] == "2026-03-08T02:30:00Z"
    assert (data["attempt"], data["outcome"], data["exit_code"], data["streak"]) == (
        3, "timeout", -15, 2)  # fmt: skip
    assert data["output_tail"] == "a\nb"


def test_failure_texts() -> None:
    timeout = RunResult(Outcome.TIMEOUT, -15, 7200.01, 3)
    assert (
        bodies.failure_text("backup", "web-1", timeout, 3, timedelta(hours=2))
        == "backup failed on web-1: timeout after 2h, attempt 3 of 3"
    )
    failed = RunResult(Outcome.FAILED, 1, 0.5, 1)
    assert (
        bodies.failure_text("backup", "web-1", failed, 1, None)
        == "backup failed on web-1: exit 1, attempt 1 of 1"
    )
    crashed = RunResult(Outcome.FAILED, -11, 0.5, 2)
    assert (
        bodies.failure_text("b", "h", crashed, 2, None)
        == "b failed on h: signal 11, attempt 2 of 2"
    )
    killed = RunResult(Outcome.KILLED, -9, 0.5, 1)
    assert "killed by signal 9" in bodies.failure_text("b", "h", killed, 1, None)


def test_other_texts() -> None:
    assert (
        bodies.recovered_text("backup", "web-1", 3)
        == "backup recovered on web-1 after 3 failed runs"
    )
    assert bodies.recovered_text("b", "h", 1) == "b recovered on h after 1 failed run"
    first = datetime(2026, 3, 8, 2, 30, tzinfo=UTC)
    assert (
        bodies.missed_text("backup", "web-1", 4, first, first + timedelta(hours=3), reason=None)
        == "backup missed 4 slots on web-1 (02:30 to 05:30 UTC)"
    )
    assert bodies.missed_text("b", "h", 1, first, first, reason="asleep") == (
        "b missed 1 slot on h (02:30 UTC): asleep"
    )
    assert bodies.missed_text("b", "h", 1, first, first, reason="grace") == (
        "b missed 1 slot on h (02:30 UTC): too late to start (past its grace)"
    )
    assert "2026-03-08 02:30 to 2026-03-09 02:30" in bodies.missed_text(
        "b", "h", 2, first, first + timedelta(days=1), reason=None
    )
    assert (
        bodies.lost_text("backup", "web-1")
        == "backup lost on web-1: its daemon died during the run"
    )
    assert (
        bodies.long_running_text("backup", "web-1", timedelta(minutes=45))
        == "backup still running on web-1 after 45m"
    )
    assert bodies.started_text("backup", "web-1") == "backup started on web-1"
    assert bodies.success_text("backup", "web-1", 12.3) == "backup succeeded on web-1 in 12.3s"
    assert bodies.success_text("b", "h", 5400.2) == "b succeeded on h in 1h30m"
    assert (
        bodies.skipped_text("backup", "web-1", "overlap")
        == "backup skipped on web-1: the previous run is still going"
    )
    assert bodies.skipped_text("b", "h", "paused") == "b skipped on h: the job is paused"


def test_tail_keeps_the_last_whole_lines_within_4_kib() -> None:
    lines = [f"line {i:04d} " + "x" * 90 for i in range(1000)]
    tail = bodies.tail_text(lines)
    assert len(tail.encode()) <= 4096
    assert tail.endswith(lines[-1])
    assert tail.split("\n")[0] in lines  # cut at a line boundary
    assert len(tail.encode()) > 4096 - 101  # as many lines as fit


def test_tail_of_one_long_line_keeps_its_end_as_valid_utf8() -> None:
    line = "é" * 5000 + "END"  # 2 bytes a character: a cut may fall inside one
    tail = bodies.tail_text(["first", line])
    assert tail.endswith("END")
    assert len(tail.encode()) <= 4096
    tail.encode("utf-8")  # valid
    odd = bodies.tail_text(["bad \udcff byte"])  # a lone surrogate (surrogateescape)
    assert odd == "bad ? byte"
    assert bodies.tail_text([]) == ""
