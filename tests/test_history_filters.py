"""`crond history --failed/--since/--run` and `crond output RUN_ID`: the store's filter
(crond/store/base.py `Only`) on SQLite and PostgreSQL, and the real commands on a store
a daemon's recorder wrote (docs/state.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from crond.run.output import TAIL_LINES
from crond.store import base
from crond.store import sqlite as state
from tests.store.test_postgres import Opener, opener  # noqa: F401  (the fixture, both stores)

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
CROND = str(Path(sys.executable).with_name("crond"))
# (job, run_id, attempt, minutes after T0, outcome, lines of output)
ATTEMPTS = [
    ("a", "run-1", 1, 0, "success", 1),
    ("a", "run-2", 1, 10, "failed", 2),
    ("a", "run-2", 2, 11, "timeout", TAIL_LINES),
    ("b", "run-3", 1, 20, "killed", 0),
    ("b", "run-4", 1, 30, "success", 0),
    ("b", "run-5", 1, 40, "lost", 0),
]


def _fill(store: base.Store) -> None:
    for job, run_id, attempt, minutes, outcome, lines in ATTEMPTS:
        at = T0 + timedelta(minutes=minutes)
        row = store.start(job, run_id=run_id, slot=at, attempt=attempt, started=at, cursor=at)
        store.finish(row, job=job, finished=at, outcome=outcome, exit_code=0, duration_s=0.5,
                     output=[f"{run_id}/{attempt} line {i}" for i in range(lines)])  # fmt: skip


def _ids(rows: list[base.AttemptRow]) -> list[tuple[str, int]]:
    return [(r.run_id, r.attempt) for r in rows]


def test_the_filters_on_both_stores(opener: Opener) -> None:  # noqa: F811  (the fixture)
    store = opener()
    _fill(store)
    failed = base.Only(failed=True)
    assert _ids(store.recent(None, 100, failed)) == [
        ("run-2", 1), ("run-2", 2), ("run-3", 1), ("run-5", 1)
    ]  # fmt: skip
    assert _ids(store.recent("a", 100, failed)) == [("run-2", 1), ("run-2", 2)]
    assert _ids(store.recent(None, 1, failed)) == [("run-5", 1)]  # the newest
    since = base.Only(since=T0 + timedelta(minutes=11))
    assert _ids(store.recent(None, 100, since)) == [
        ("run-2", 2), ("run-3", 1), ("run-4", 1), ("run-5", 1)
    ]  # fmt: skip
    both = base.Only(failed=True, since=T0 + timedelta(minutes=11))
    assert _ids(store.recent("b", 100, both)) == [("run-3", 1), ("run-5", 1)]
    assert _ids(store.recent(None, 100, base.Only(run_id="run-2"))) == [("run-2", 1), ("run-2", 2)]
    assert store.recent(None, 100, base.Only(run_id="nope")) == []
    assert len(store.recent(None, 100)) == len(ATTEMPTS)


def _crond(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  a: {every: 1h, command: 'true'}\n  b: {every: 1h, command: 'true'}\n")
    argv = [CROND, args[0], str(f), *args[1:], "--state-dir", str(tmp_path / "st")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def _filled(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path / "st")
    _fill(store)
    store.close()


def test_history_failed_since_and_run(tmp_path: Path) -> None:
    _filled(tmp_path)
    failed = _crond(tmp_path, "history", "--failed", "--json")
    assert failed.returncode == 0, failed.stderr
    rows = [json.loads(line) for line in failed.stdout.splitlines()]
    assert [(r["run_id"], r["outcome"]) for r in rows] == [
        ("run-2", "failed"), ("run-2", "timeout"), ("run-3", "killed"), ("run-5", "lost")
    ]  # fmt: skip
    since = _crond(tmp_path, "history", "b", "--since", "2026-03-01T12:25:00Z", "--json")
    assert [json.loads(line)["run_id"] for line in since.stdout.splitlines()] == ["run-4", "run-5"]
    run = _crond(tmp_path, "history", "--run", "run-3")
    assert run.stdout.startswith("2026-03-01T12:20:00Z  b  run-3  attempt 1")
    recent = _crond(tmp_path, "history", "--since", "1h")  # T0 is long ago
    assert (recent.returncode, recent.stdout, recent.stderr) == (0, "", "no attempts match\n")


def test_since_refuses_what_is_neither_a_duration_nor_an_instant(tmp_path: Path) -> None:
    _filled(tmp_path)
    done = _crond(tmp_path, "history", "--since", "yesterday")
    assert done.returncode == 2
    assert '"yesterday" is neither a duration (2h, 30m, 7d) nor an instant' in done.stderr
    done = _crond(tmp_path, "history", "--since", "2026-03-01T12:00:00")
    assert done.returncode == 2
    assert "has no offset" in done.stderr


def test_output_prints_each_attempts_lines_and_says_when_they_may_be_cut(tmp_path: Path) -> None:
    _filled(tmp_path)
    done = _crond(tmp_path, "output", "run-2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "run-2/1 line 0", "run-2/1 line 1", *(f"run-2/2 line {i}" for i in range(TAIL_LINES))
    ]  # fmt: skip
    heading_1, heading_2, note = done.stderr.splitlines()
    assert heading_1 == (
        "== a run run-2 attempt 1: failed, exit 0, 500ms (started 2026-03-01T12:10:00Z)"
    )
    assert heading_2.startswith("== a run run-2 attempt 2: timeout")
    assert f"keeps the last {TAIL_LINES} lines" in note
    assert "job.output events with run_id run-2" in note
    as_json = _crond(tmp_path, "output", "run-2", "--json")
    assert [len(json.loads(line)["output"]) for line in as_json.stdout.splitlines()] == [
        2, TAIL_LINES
    ]  # fmt: skip


def test_output_of_an_unknown_run_exits_1(tmp_path: Path) -> None:
    _filled(tmp_path)
    done = _crond(tmp_path, "output", "run-9")
    assert (done.returncode, done.stderr) == (1, "crond: no run run-9 in the history kept\n")


def test_output_of_a_file_with_errors_still_reads_the_store_and_exits_1(tmp_path: Path) -> None:
    _filled(tmp_path)
    f = tmp_path / "broken.yaml"
    f.write_text("jobs:\n  a: {every: 1h, comand: 'true'}\n")
    argv = [CROND, "output", str(f), "run-3", "--state-dir", str(tmp_path / "st")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert f"{f}:2:" in done.stderr
    assert "has errors (above); its history follows" in done.stderr
    assert "== b run run-3 attempt 1: killed" in done.stderr
