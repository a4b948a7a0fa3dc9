"""Pauses in the state store (`crond pause`, `resume`) on a real SQLite file: kept, replaced,
cleared, across a new process and an older store's file, read while the daemon holds the
store; and what `crond status` shows of them (the table and --json; expired; escaped)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from crond import status
from crond.cli import main
from crond.clock import iso_utc
from crond.store import base, files
from crond.store import sqlite as state

T0 = datetime(2026, 12, 2, 16, 0, 0, 123000, tzinfo=UTC)
ALICE = json.dumps({"uid": 1000, "user": "alice", "pid": 4242})


def _pause(
    job: str,
    until: datetime | None = None,
    note: str | None = None,
    by: str = ALICE,
    since: datetime = T0,
) -> base.PauseRow:
    return base.PauseRow(job, since, until, note, by)


# --- the store ----------------------------------------------------------------------------


def test_a_pause_is_kept_as_given_and_replaced_and_cleared(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    assert store.pauses() == {}
    until = T0 + timedelta(hours=2, microseconds=7)
    store.set_pause(_pause("a", until, "db migration"))
    store.set_pause(_pause("b"))  # until resumed, no note
    assert store.pauses() == {"a": _pause("a", until, "db migration"), "b": _pause("b")}
    # A second pause of a job replaces the first, whole: no note left over from it.
    store.set_pause(_pause("a", None, None, since=T0 + timedelta(minutes=5)))
    assert store.pauses()["a"] == _pause("a", since=T0 + timedelta(minutes=5))
    assert store.pauses()["b"] == _pause("b")
    store.clear_pause("a")
    assert list(store.pauses()) == ["b"]
    store.clear_pause("a")  # resumed twice, or never paused: no error
    store.clear_pause("nobody")
    assert list(store.pauses()) == ["b"]
    store.close()


_WRITER = """
import sys
from datetime import UTC, datetime
from pathlib import Path
from crond.store import base, sqlite
store = sqlite.SqliteStore(Path(sys.argv[1]))
at = datetime(2026, 12, 2, 16, tzinfo=UTC)
store.set_pause(base.PauseRow("a", at, datetime(2026, 12, 2, 18, tzinfo=UTC), "n", "{}"))
store.set_pause(base.PauseRow("b", at, None, None, "{}"))
store.clear_pause("b")
{exit}
"""


def test_a_pause_outlives_the_process_that_set_it(tmp_path: Path) -> None:
    """Written by one daemon, read by the next (its store closed, or the process killed
    without closing anything: each pause is a commit of its own)."""
    for how, directory in (
        ("store.close()", tmp_path / "closed"),
        ("os._exit(9)", tmp_path / "died"),
    ):
        code = _WRITER.replace("{exit}", f"import os\n{how}")
        done = subprocess.run([sys.executable, "-c", code, str(directory)], check=False)
        assert done.returncode == (9 if "_exit" in how else 0)
        again = state.SqliteStore(directory)  # the next daemon
        expected = base.PauseRow(
            "a", datetime(2026, 12, 2, 16, tzinfo=UTC), datetime(2026, 12, 2, 18, tzinfo=UTC),
            "n", "{}",
        )  # fmt: skip
        assert again.pauses() == {"a": expected}
        again.close()
        reader = state.Reader(directory)  # and `crond status`
        assert reader.pauses() == {"a": expected}
        reader.close()


def test_an_older_store_without_the_table_gains_it(tmp_path: Path) -> None:
    """A store of an older crond (same schema, no pauses table): a reader sees no pauses
    (it never writes), the daemon's open adds the table and keeps the rest."""
    store = state.SqliteStore(tmp_path)
    store.update_view([], [("a", T0)])
    store.close()
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    db.execute("DROP TABLE pauses")
    db.close()
    reader = state.Reader(tmp_path)
    assert reader.pauses() == {}
    reader.close()
    store = state.SqliteStore(tmp_path)
    assert store.cursors() == {"a": T0}
    store.set_pause(_pause("a"))
    assert store.pauses() == {"a": _pause("a")}
    store.close()


def test_the_reader_sees_pauses_while_the_daemon_holds_the_store(tmp_path: Path) -> None:
    writer = state.SqliteStore(tmp_path)
    writer.set_pause(_pause("a", T0 + timedelta(hours=1), "x"))
    reader = state.Reader(tmp_path)
    assert list(reader.pauses()) == ["a"]
    writer.set_pause(_pause("b"))  # each read sees the latest commit
    assert sorted(reader.pauses()) == ["a", "b"]
    writer.clear_pause("a")
    assert list(reader.pauses()) == ["b"]
    reader.close()
    writer.close()


def test_a_pause_row_that_does_not_decode_is_a_state_error(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    with db:
        db.execute("INSERT INTO pauses VALUES ('a', 'not a time', NULL, NULL, '{}')")
    db.close()
    with pytest.raises(base.StateError, match="unexpected data"):
        store.pauses()
    store.close()


# --- what `crond status` shows --------------------------------------------------------------

FILE = "jobs:\n  a: {every: 1h, command: 'true'}\n  b: {every: 1h, command: 'true'}\n" + (
    "  c: {every: 1h, command: 'true'}\n  d: {every: 1h, command: 'true'}\n"
)


def _paused_store(directory: Path, now: datetime) -> datetime:
    """a: paused until tomorrow (to the minute), with a note; b: until resumed; c: a pause
    that ran out with no daemon to clear it; d: not paused. Returns a's `until`."""
    until = (now + timedelta(days=1)).replace(second=0, microsecond=0)
    store = state.SqliteStore(directory)
    store.set_pause(_pause("a", until, "db migration", since=now))
    store.set_pause(_pause("b", None, None, since=now))
    store.set_pause(_pause("c", now - timedelta(minutes=1), "old", since=now - timedelta(hours=1)))
    store.close()
    return until


def _status(f: Path, directory: Path, *more: str) -> str:
    result = CliRunner().invoke(main, ["status", str(f), "--state-dir", str(directory), *more])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_status_shows_each_pause_in_the_table_and_as_json(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(FILE)
    until = _paused_store(tmp_path / "state", datetime.now(UTC))
    lines = _status(f, tmp_path / "state").splitlines()
    assert lines[0].split()[-1] == "PAUSE"
    shown = {line.split()[0]: line for line in lines[1:]}
    minute = until.strftime("%Y-%m-%d %H:%M UTC")
    assert shown["a"].endswith(f'paused until {minute} by alice ("db migration")')
    assert shown["b"].endswith("paused (until resumed) by alice")
    assert "paused" not in shown["c"]
    assert "pause expired" in shown["c"]
    assert shown["d"].endswith(" -")

    rows = {
        r["job"]: r
        for r in map(json.loads, _status(f, tmp_path / "state", "--json").split("\n")[:-1])
    }
    by = {"uid": 1000, "user": "alice", "pid": 4242}
    assert rows["a"]["paused"] == {"until": iso_utc(until), "note": "db migration", "by": by}
    assert rows["a"]["pause_expired"] is None
    assert rows["b"]["paused"] == {"until": None, "note": None, "by": by}
    assert rows["c"]["paused"] is None  # ran out: not paused
    assert rows["c"]["pause_expired"]["note"] == "old"
    assert (rows["d"]["paused"], rows["d"]["pause_expired"]) == (None, None)


def test_status_without_pauses_has_no_pause_column(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(FILE)
    state.SqliteStore(tmp_path / "state").close()
    lines = _status(f, tmp_path / "state").splitlines()
    assert lines[0].split()[-2:] == ["NEXT", "FIRE"]
    assert "paused" not in "\n".join(lines)
    for line in _status(f, tmp_path / "state", "--json").splitlines():
        row = json.loads(line)
        assert (row["paused"], row["pause_expired"]) == (None, None)


def test_status_of_a_running_daemon_reads_its_pauses_too(tmp_path: Path) -> None:
    """The quick path (the running daemon's view, the file not loaded) shows the same."""
    f = tmp_path / "s.yaml"
    f.write_text(FILE)
    now = datetime.now(UTC)
    until = _paused_store(tmp_path / "state", now)
    store = state.SqliteStore(tmp_path / "state")
    nxt = now + timedelta(hours=1)
    store.publish_view(
        [base.ViewRow(j, True, "every 1h", nxt.timestamp(), iso_utc(nxt), nxt.isoformat(), None)
         for j in "abcd"],
        hashlib.sha256(f.read_bytes()).hexdigest(),
    )  # fmt: skip
    # This process plays the daemon: alive, on this boot.
    store.set_meta("daemon", json.dumps({"pid": os.getpid(), "boot_id": files.boot_id()}))
    try:
        quick = status.quick(f, str(tmp_path / "state"), now, as_json=True)
        assert quick is not None  # answered from the view
        rows = {r["job"]: r for r in map(json.loads, quick.splitlines())}
        assert rows["a"]["paused"]["until"] == iso_utc(until)
        assert rows["c"]["pause_expired"] is not None
        text = status.quick(f, str(tmp_path / "state"), now, as_json=False)
        assert text is not None
        assert "paused (until resumed) by alice" in text
    finally:
        store.close()


def test_notes_and_names_are_shown_escaped_and_bounded(tmp_path: Path) -> None:
    """A note is anybody's text: no line break, terminal escape or bidi control reaches
    the table, and --json keeps it whole, on one line."""
    now = datetime.now(UTC)
    note = 'fix\nb  FAKE LINE\r\x1b[31mred\u202eevil\u2028"q"'
    bad_user = json.dumps({"uid": 7, "user": "ev\x1bil\nx", "pid": 1})
    rows = [base.status_row(base.ViewRow(j, True, "every 1h", None, None, None, None), None)
            for j in ("a", "b", "c", "d", "e")]  # fmt: skip
    pauses = {
        "a": _pause("a", None, note),
        "b": _pause("b", None, None, by=bad_user),
        "c": _pause("c", None, "x" * 2000, by=json.dumps({"uid": 0})),  # no user name
        "d": _pause("d", None, None, by="[" * 5000),  # not decodable: nobody named
        "e": _pause("e", None, None, by='{"uid": true, "user": 3, "pid": "1"}'),
    }
    table = status.format_status(rows, alive=True, pauses=pauses, now=now)
    assert len(table.splitlines()) == 6  # the header and one line a job
    for unsafe in ("\n", "\r", "\x1b", "\u202e", "\u2028"):
        assert unsafe not in table.replace("\n", "", 5)
    a, b, c, d, e = table.splitlines()[1:]
    assert a.endswith('paused (until resumed) by alice ("fix\\nb  FAKE LINE\\r\\x1b[31mred'
                      '\\u202eevil\\u2028"q"")')  # fmt: skip
    assert b.endswith("paused (until resumed) by ev\\x1bil\\nx")
    assert c.endswith(f'by uid 0 ("{"x" * 500}...")')
    assert d.endswith("paused (until resumed)")
    assert e.endswith("paused (until resumed)")  # wrong types: nobody named

    lines = status.format_status_json(rows, alive=True, pauses=pauses, now=now).split("\n")
    assert len(lines) == 5
    shown = {r["job"]: r["paused"] for r in map(json.loads, lines)}
    assert shown["a"]["note"] == note  # the data, whole
    assert shown["b"]["by"] == {"uid": 7, "user": "ev\x1bil\nx", "pid": 1}
    assert shown["c"]["by"] == {"uid": 0, "user": None, "pid": None}
    assert shown["d"]["by"] is None
    assert shown["e"]["by"] == {"uid": None, "user": None, "pid": None}
    assert all(line.isascii() for line in lines)


def test_a_pause_runs_out_at_its_until(tmp_path: Path) -> None:
    until = datetime(2026, 12, 2, 18, 0, 30, tzinfo=UTC)
    pause = _pause("a", until)
    assert status.pause_text(pause, until - timedelta(microseconds=1)).startswith(
        "paused until 2026-12-02 18:00:30 UTC"
    )
    assert status.pause_text(pause, until).startswith("pause expired 2026-12-02 18:00:30 UTC")
    assert not status.expired(_pause("a"), until + timedelta(days=999))
