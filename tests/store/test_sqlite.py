"""The state store on a real SQLite file: cursors, attempts, pruning, lost runs, corruption,
the upgrade of older schemas; the seam (crond/store/base.py) the daemon's recorder and
`crond status` use, and what status prints of it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from structlog.typing import FilteringBoundLogger

from crond import status
from crond.clock import SystemClock, iso_utc
from crond.config import loader
from crond.config.loaded import LoadedJob
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED
from crond.run import runner
from crond.store import base, files, locate, schema
from crond.store import sqlite as state

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_start_and_finish_record_an_attempt(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    row = store.start(
        "a", run_id="r1", slot=T0, attempt=1, started=T0 + timedelta(milliseconds=2), cursor=T0
    )
    assert store.cursors() == {"a": T0}
    open_row = store.last("a")
    assert open_row is not None
    assert (open_row.outcome, open_row.finished) == (None, None)
    store.finish(
        row,
        job="a",
        finished=T0 + timedelta(seconds=1),
        outcome="success",
        exit_code=0,
        duration_s=0.998,
        output=["hi", "there"],
    )
    done = store.last("a")
    assert done is not None
    assert (done.run_id, done.slot, done.outcome, done.exit_code) == ("r1", T0, "success", 0)
    assert done.output == ["hi", "there"]
    assert store.last("a", outcome="failed") is None


def _note(job: str, created: float = 1.0) -> base.OutboxRow:
    return base.OutboxRow(0, "notify", "ops", job, "failed", f'{{"job": "{job}"}}', created)


def test_the_outbox_keeps_notifications_across_a_restart_until_done(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    ids = store.outbox_add([_note("a", 1.0), _note("b", 2.0), _note("c", 3.0)])
    assert len(set(ids)) == 3
    store.outbox_done(ids[:1])
    store.close()
    store = state.SqliteStore(tmp_path)  # the next daemon (or the same after a crash)
    pending = store.outbox_pending(10)
    assert [(r.id, r.job, r.body, r.created) for r in pending] == [
        (ids[1], "b", '{"job": "b"}', 2.0),
        (ids[2], "c", '{"job": "c"}', 3.0),
    ]  # oldest first
    assert [r.job for r in store.outbox_pending(1)] == ["b"]
    store.outbox_done([r.id for r in pending] + [999])  # an id already gone is no error
    assert store.outbox_pending(10) == []
    store.close()


def test_cursor_never_goes_back(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    store.update_view([], [("a", T0 + timedelta(hours=1))])
    store.update_view([], [("a", T0)])
    assert store.cursors()["a"] == T0 + timedelta(hours=1)


def test_history_is_pruned_per_job(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path, history=5)
    for i in range(12):
        for job in ("a", "b"):
            row = store.start(job, run_id=f"{job}{i}", slot=T0, attempt=1, started=T0, cursor=T0)
            store.finish(
                row, job=job, finished=T0, outcome="success", exit_code=0, duration_s=0.0, output=[]
            )
    assert [r.run_id for r in store.recent("a", 100)] == [f"a{i}" for i in range(7, 12)]
    assert len(store.recent("b", 100)) == 5


def test_open_attempts_are_closed_as_lost_by_the_next_daemon(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    store.start("a", run_id="r1", slot=T0, attempt=1, started=T0, cursor=T0)
    store.close()
    again = state.SqliteStore(tmp_path)  # a new daemon after a crash
    lost = again.close_lost(T0 + timedelta(minutes=1))
    assert [(r.job, r.run_id, r.slot) for r in lost] == [("a", "r1", T0)]
    last = again.last("a")
    assert last is not None
    assert last.outcome == "lost"
    assert again.close_lost(T0 + timedelta(minutes=2)) == []


def test_corrupt_file_is_moved_aside_and_a_fresh_one_started(tmp_path: Path) -> None:
    (tmp_path / state.DB_NAME).write_bytes(b"this is not a database" * 100)
    store = state.SqliteStore(tmp_path)
    assert store.moved_aside is not None
    assert Path(store.moved_aside).exists()
    assert store.cursors() == {}
    store.update_view([], [("a", T0)])
    assert store.cursors() == {"a": T0}


def test_unwritable_directory_is_a_state_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(base.StateError, match="Not a directory"):
        state.SqliteStore(blocker / "sub")


def test_a_reader_sees_committed_rows_while_the_writer_holds_the_file(tmp_path: Path) -> None:
    writer = state.SqliteStore(tmp_path)
    row = writer.start("a", run_id="r1", slot=T0, attempt=1, started=T0, cursor=T0)
    reader = sqlite3.connect(tmp_path / state.DB_NAME)
    assert reader.execute("SELECT count(*) FROM attempts").fetchone() == (1,)
    writer.finish(
        row, job="a", finished=T0, outcome="failed", exit_code=2, duration_s=0.1, output=["boom"]
    )
    assert reader.execute("SELECT outcome FROM attempts").fetchone() == ("failed",)
    reader.close()


def test_default_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    assert locate.default_dir({"STATE_DIRECTORY": "/var/lib/x:/other"}) == Path("/var/lib/x")


def test_boot_id_is_read_from_the_kernel() -> None:
    bid = files.boot_id()
    assert bid is None or len(bid) == 36


def _job(command: str) -> LoadedJob:
    return loader.loads(f"jobs:\n  j: {{every: 1h, command: {command!r}}}\n").jobs["j"]


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def _add(self, event: str, **kw: Any) -> None:
        self.events.append((event, kw))

    info = warning = error = debug = _add

    def bind(self, **_: Any) -> _Log:
        return self


def _run(recorder: StoreRecorder, command: str) -> None:
    log = cast(FilteringBoundLogger, _Log())

    async def main() -> None:
        async with asyncio.TaskGroup() as tasks:
            run = runner.start_run(
                runner.spec_for(_job(command)),
                T0,
                tasks=tasks,
                clock=SystemClock(),
                log=log,
                recorder=recorder,
            )
            await run.wait()

    asyncio.run(main())


def _recorder(store: base.Store, log: _Log) -> StoreRecorder:
    """A recorder that opens `store`, opened."""
    recorder = StoreRecorder(lambda _: store, cast(FilteringBoundLogger, log), SystemClock())
    assert recorder.open()
    return recorder


def test_store_recorder_keeps_each_attempt_with_its_output(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    recorder = _recorder(store, _Log())
    _run(recorder, "echo one; echo two; exit 3")
    row = store.last("j")
    assert row is not None
    assert (row.slot, row.attempt, row.outcome, row.exit_code) == (T0, 1, "failed", 3)
    assert row.output == ["one", "two"]
    assert store.cursors() == {"j": T0}
    assert not recorder.degraded


def test_a_broken_store_never_stops_a_run(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    log = _Log()
    recorder = _recorder(store, log)
    store.close()  # every write now fails
    log.events.clear()
    _run(recorder, "echo still runs")
    _run(recorder, "echo and again")
    assert recorder.degraded
    assert [e for e, _ in log.events] == ["state.write_failed"]  # once per `quiet` seconds


def finish(store: state.SqliteStore, row: int, job: str, outcome: str, **kw: Any) -> None:
    store.finish(
        row,
        job=job,
        finished=T0,
        outcome=outcome,
        exit_code=0 if outcome == "success" else 1,
        duration_s=0.5,
        output=[],
        **kw,
    )


def test_summaries_keep_the_last_success_beyond_the_history(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    ok = store.start("a", run_id="ok", slot=T0, attempt=1, started=T0, cursor=T0)
    finish(store, ok, "a", "success")
    for i in range(5):
        row = store.start("a", run_id=f"bad{i}", slot=T0, attempt=1, started=T0, cursor=T0)
        finish(store, row, "a", "failed", keep=3)
    running = store.start("b", run_id="b1", slot=T0, attempt=1, started=T0, cursor=T0)
    summaries = state.Reader(tmp_path).summaries()
    a = summaries["a"]
    assert (a.run_id, a.outcome, a.exit_code) == ("bad4", "failed", 1)
    assert (a.success_run_id, a.success_duration_s) == ("ok", 0.5)
    assert (a.slot, a.success_started) == ("2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z")
    assert [r.run_id for r in store.recent("a", 100)] == ["bad2", "bad3", "bad4"]  # keep=3
    b = summaries["b"]
    assert (b.run_id, b.finished, b.success_run_id) == ("b1", None, None)
    assert running > 0


def test_summary_instants_are_iso_text_as_the_events_write_them(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    started = T0 + timedelta(microseconds=1_234_567)
    row = store.start("a", run_id="r", slot=T0, attempt=1, started=started, cursor=T0)
    finish(store, row, "a", "success")
    a = state.Reader(tmp_path).summaries()["a"]
    assert (a.slot, a.started, a.finished, a.success_started) == (
        "2026-03-01T12:00:00Z",
        "2026-03-01T12:00:01.234567Z",
        "2026-03-01T12:00:00Z",
        "2026-03-01T12:00:01.234567Z",
    )


def test_lost_runs_show_as_lost_in_the_summary(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    store.start("a", run_id="r", slot=T0, attempt=1, started=T0, cursor=T0)
    store.close()
    again = state.SqliteStore(tmp_path)
    (lost,) = again.close_lost(T0 + timedelta(minutes=1))
    assert lost.run_id == "r"
    a = state.Reader(tmp_path).summaries()["a"]
    assert (a.outcome, a.finished) == ("lost", "2026-03-01T12:01:00Z")


def test_reader_refuses_a_missing_store_and_never_creates_one(tmp_path: Path) -> None:
    with pytest.raises(base.StateError, match="no such file"):
        state.Reader(tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()


def test_update_view_moves_several_cursors_in_one_commit(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    store.update_view([], [("a", T0), ("b", T0 + timedelta(seconds=1))])
    store.update_view([], [("a", T0 - timedelta(days=1))])
    assert store.cursors() == {"a": T0, "b": T0 + timedelta(seconds=1)}


def test_resolve_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", "/srv/systemd-gave-this")
    assert locate.resolve_dir(None, None) == Path("/srv/systemd-gave-this")
    assert locate.resolve_dir(None, "/srv/state") == Path("/srv/state")
    assert locate.resolve_dir("/flag", "/srv/state") == Path("/flag")
    assert locate.resolve_dir(None, "none") is None
    assert locate.resolve_dir("none", "/srv/state") is None


def test_one_store_serves_one_daemon(tmp_path: Path) -> None:
    first = state.SqliteStore(tmp_path)
    with pytest.raises(base.StateError, match=r"in use by another crond \(pid \d+\)"):
        state.SqliteStore(tmp_path)
    first.close()
    state.SqliteStore(tmp_path).close()  # free again once the first has closed it


def test_a_store_of_another_schema_is_refused_not_misread(tmp_path: Path) -> None:
    state.SqliteStore(tmp_path).close()
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    with db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    db.close()
    for open_it in (state.SqliteStore, state.Reader):
        with pytest.raises(base.StateError, match=r"another version of crond \(schema 99"):
            open_it(tmp_path)


# --- older schemas, upgraded in place ---------------------------------------------------

# Schema 2 as crond wrote it (its `crond status --json` lines made by SQLite in generated
# columns, kept current by triggers), kept here to make such a store: the summary and the
# view, and the triggers between them. The other tables are as they still are.
_SCHEMA_2_SUMMARY = """CREATE TABLE summary (
    job TEXT PRIMARY KEY, last_id INTEGER, run_id TEXT, slot TEXT, attempt INTEGER,
    started TEXT, finished TEXT, outcome TEXT, exit_code INTEGER, duration_s REAL,
    success_run_id TEXT, success_started TEXT, success_finished TEXT, success_duration_s REAL,
    last_json TEXT GENERATED ALWAYS AS (CASE WHEN run_id IS NULL THEN NULL ELSE json_object(
        'run_id', run_id, 'slot', slot, 'attempt', attempt, 'started', started,
        'finished', finished, 'outcome', outcome, 'exit_code', exit_code,
        'duration_s', duration_s) END) STORED,
    success_json TEXT GENERATED ALWAYS AS (CASE WHEN success_finished IS NULL THEN NULL
        ELSE json_object('run_id', success_run_id, 'started', success_started,
        'finished', success_finished, 'duration_s', success_duration_s) END) STORED
)"""
_SCHEMA_2_VIEW = """CREATE TABLE view (
    pos INTEGER PRIMARY KEY, job TEXT NOT NULL UNIQUE, enabled INTEGER NOT NULL,
    schedule TEXT NOT NULL, next_at REAL, next_text TEXT, next_local TEXT, next_note TEXT,
    started TEXT, finished TEXT, outcome TEXT, duration_s REAL, success_finished TEXT,
    last_json TEXT, success_json TEXT, open INTEGER NOT NULL DEFAULT 0,
    head TEXT GENERATED ALWAYS AS (json_object('job', job,
        'enabled', json(CASE WHEN enabled THEN 'true' ELSE 'false' END),
        'schedule', schedule)) VIRTUAL,
    next_json TEXT GENERATED ALWAYS AS (CASE WHEN next_text IS NULL THEN NULL ELSE
        json_object('at', next_text, 'local', next_local, 'note', next_note) END) VIRTUAL,
    line TEXT GENERATED ALWAYS AS (substr(head, 1, length(head) - 1) || ',"last_run":'
        || coalesce(last_json, 'null') || ',"last_success":' || coalesce(success_json, 'null')
        || ',"next_fire":' || coalesce(next_json, 'null')
        || CASE WHEN open THEN ',"running":true}' ELSE ',"running":false}' END) STORED
)"""
_SCHEMA_2_TRIGGER = """CREATE TRIGGER summary_{when} AFTER {when} ON summary BEGIN
    UPDATE view SET (started, finished, outcome, duration_s, success_finished, last_json,
        success_json, open) = (NEW.started, NEW.finished, NEW.outcome, NEW.duration_s,
        NEW.success_finished, NEW.last_json, NEW.success_json,
        NEW.run_id IS NOT NULL AND NEW.finished IS NULL) WHERE job = NEW.job;
END"""
_SCHEMA_2_VIEW_INSERT = """INSERT INTO view (pos, job, enabled, schedule, next_at, next_text,
    next_local, next_note, started, finished, outcome, duration_s, success_finished,
    last_json, success_json, open)
    SELECT v.*, s.started, s.finished, s.outcome, s.duration_s, s.success_finished,
        s.last_json, s.success_json, s.run_id IS NOT NULL AND s.finished IS NULL
    FROM (SELECT ? AS pos, ? AS job, ?, ?, ?, ?, ?, ?) v LEFT JOIN summary s ON s.job = v.job"""
# Schema 1, as the first release with a store wrote it: schema 2's summary, and a view
# without the summaries (nor triggers).
_SCHEMA_1_VIEW = """CREATE TABLE view (job TEXT PRIMARY KEY, pos INTEGER NOT NULL,
    enabled INTEGER NOT NULL, schedule TEXT NOT NULL, next_at REAL, next_text TEXT,
    next_local TEXT, next_note TEXT)"""

_T1 = datetime(2026, 1, 1, tzinfo=UTC)
_NEXT = _T1 + timedelta(days=1)
_VIEW = [
    base.ViewRow("a", True, "every 1m", _NEXT.timestamp(), iso_utc(_NEXT), _NEXT.isoformat(),
                 None),
    base.ViewRow("b", True, 'weird "name" \\ é', None, None, None, None),
    base.ViewRow("never", False, "0 6 * * * (UTC)", None, None, None, None),
]  # fmt: skip


def _lived_in(directory: Path) -> None:
    """A store with some history: `a` succeeded then failed (its last success is older
    than its last run), `b` was left running, `never` never ran; cursors; a @reboot mark."""
    store = state.SqliteStore(directory)
    for run_id, outcome, at in (
        ("r1", "success", _T1),
        ("r2", "failed", _T1 + timedelta(minutes=1)),
    ):
        row = store.start("a", run_id=run_id, slot=at, attempt=1, started=at, cursor=at)
        store.finish(row, job="a", finished=at + timedelta(seconds=1.5), outcome=outcome,
                     exit_code=0 if outcome == "success" else 2, duration_s=1.5,
                     output=[f"{run_id} said"])  # fmt: skip
    store.start("b", run_id="r3", slot=_T1, attempt=1, started=_T1, cursor=_T1 + timedelta(hours=1))
    store.set_meta("reboot:boot", "boot-id-1")
    store.close()


def _as_old_schema(directory: Path, version: int) -> list[str]:
    """Turn a store of this crond into one as crond with schema `version` left it, its
    view published as that crond did; the status --json lines that schema made (schema 2),
    or none."""
    db = sqlite3.connect(directory / state.DB_NAME)
    summary = db.execute("SELECT * FROM summary").fetchall()
    with db:
        db.execute("DROP TABLE summary")
        db.execute(_SCHEMA_2_SUMMARY)
        db.executemany(f"INSERT INTO summary VALUES ({', '.join('?' * 14)})", summary)
        db.execute("DROP TABLE view")
        db.execute(_SCHEMA_2_VIEW if version == 2 else _SCHEMA_1_VIEW)
        if version == 2:
            for when in ("INSERT", "UPDATE"):
                db.execute(_SCHEMA_2_TRIGGER.replace("{when}", when))
        rows = [(i, r.job, int(r.enabled), r.schedule, r.next_at, r.next_text, r.next_local,
                 r.next_note) for i, r in enumerate(_VIEW)]  # fmt: skip
        if version == 2:
            db.executemany(_SCHEMA_2_VIEW_INSERT, rows)
        else:
            db.executemany("INSERT INTO view VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           [(r[1], r[0], *r[2:]) for r in rows])  # fmt: skip
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(version),))
        db.execute("INSERT OR REPLACE INTO meta VALUES ('view_sha256', 'abc')")
    lines = [r[0] for r in db.execute("SELECT line FROM view ORDER BY pos")] if version == 2 else []
    db.close()
    return lines


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_store_is_upgraded_in_place_keeping_history_and_cursors(
    tmp_path: Path, version: int
) -> None:
    _lived_in(tmp_path)
    old_lines = _as_old_schema(tmp_path, version)
    with pytest.raises(base.StateError, match=rf"older crond \(schema {version}\); the daemon up"):
        state.Reader(tmp_path)  # a reader does not write: it waits for the daemon
    store = state.SqliteStore(tmp_path)  # what the daemon opens
    assert store.get_meta("schema") == str(schema.SCHEMA_VERSION) == "3"
    assert store.get_meta("view_sha256") == ""  # the old view is gone: not to be trusted
    assert [(r.run_id, r.outcome, r.output) for r in store.recent("a", 10)] == [
        ("r1", "success", ["r1 said"]), ("r2", "failed", ["r2 said"])
    ]  # fmt: skip
    assert store.cursors() == {"a": _T1 + timedelta(minutes=1), "b": _T1 + timedelta(hours=1)}
    assert store.get_meta("reboot:boot") == "boot-id-1"
    a = store.summaries()["a"]
    assert (a.run_id, a.outcome, a.exit_code, a.success_run_id) == ("r2", "failed", 2, "r1")
    # Data, not presentation: no generated columns, no triggers.
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    columns = {r[1] for r in db.execute("PRAGMA table_xinfo(summary)")}
    assert not {"last_json", "success_json"} & columns
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").fetchone() == (
        0,
    )
    db.close()
    # The daemon publishes its view: status prints what the old schema's SQL printed, and
    # the pauses that came later (none here).
    store.publish_view(_VIEW, "def")
    lines = status.format_status_json(store.status_rows(), alive=True).splitlines()
    if old_lines:
        assert lines == [old[:-1] + ',"paused":null,"pause_expired":null}' for old in old_lines]
    assert [json.loads(line)["running"] for line in lines] == [False, True, False]
    # And it is written as any store.
    row = store.start("never", run_id="r4", slot=_NEXT, attempt=1, started=_NEXT, cursor=_NEXT)
    finish(store, row, "never", "success")
    assert store.summaries()["never"].success_run_id == "r4"
    assert store.outbox_add([_note("late")]) == [1]  # an older store gains the outbox
    store.close()
    state.Reader(tmp_path).close()  # and read


def test_an_upgrade_that_fails_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    _lived_in(tmp_path)
    _as_old_schema(tmp_path, 2)
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    with db:  # a summary the upgrade cannot copy
        db.execute("ALTER TABLE summary RENAME COLUMN success_duration_s TO something_else")
    db.close()
    with pytest.raises(base.StateError, match="success_duration_s"):
        state.SqliteStore(tmp_path)
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("2",)
    assert db.execute("SELECT count(*) FROM attempts").fetchone() == (3,)
    assert db.execute("SELECT count(*) FROM summary").fetchone() == (2,)
    assert db.execute("SELECT count(*) FROM view").fetchone() == (3,)
    db.close()


def test_an_sqlite_library_too_old_is_refused_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.SqliteStore(tmp_path).close()
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 23, 1))
    for open_it in (state.SqliteStore, state.Reader):
        with pytest.raises(
            base.StateError, match=r"is 3\.23\.1; crond's state store needs 3\.24\.0"
        ):
            open_it(tmp_path)


# --- what status prints of the store -----------------------------------------------------


def _shown(store: state.SqliteStore) -> dict[str, tuple[object, ...]]:
    """Each job's status, as --json and the table show it."""
    rows = store.status_rows()
    lines = [json.loads(line) for line in status.format_status_json(rows, alive=True).splitlines()]
    table = {r.job: r for r in rows}
    return {
        line["job"]: (
            (line["last_run"] or {}).get("outcome"),
            (line["last_success"] or {}).get("run_id"),
            line["running"],
            table[line["job"]].outcome,
            table[line["job"]].open,
        )
        for line in lines
    }


def test_status_follows_the_summaries(tmp_path: Path) -> None:
    """Every write of a summary reaches status, and a view made later picks them up."""
    store = state.SqliteStore(tmp_path)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    store.publish_view([base.view_row(name, True, "every 1m", None) for name in "ab"], "x")

    def shown() -> dict[str, tuple[object, ...]]:
        return _shown(store)

    assert shown() == {"a": (None, None, False, None, False), "b": (None, None, False, None, False)}
    first = store.start("a", run_id="r1", slot=t0, attempt=1, started=t0, cursor=t0)
    assert shown()["a"] == (None, None, True, None, True)
    store.finish(first, job="a", finished=t0, outcome="success", exit_code=0, duration_s=1.0,
                 output=[])  # fmt: skip
    assert shown()["a"] == ("success", "r1", False, "success", False)
    second = store.start("a", run_id="r2", slot=t0, attempt=1, started=t0, cursor=t0)
    store.finish(second, job="a", finished=t0, outcome="failed", exit_code=1, duration_s=1.0,
                 output=[])  # fmt: skip
    assert shown()["a"] == ("failed", "r1", False, "failed", False)
    store.start("b", run_id="r3", slot=t0, attempt=1, started=t0, cursor=t0)
    assert store.close_lost(t0)[0].run_id == "r3"
    assert shown()["b"] == ("lost", None, False, "lost", False)
    # Made again (a reload): the summaries come with it, in the new order.
    store.publish_view([base.view_row(name, True, "every 1m", None) for name in "ba"], "y")
    assert list(shown()) == ["b", "a"]
    assert shown()["a"] == ("failed", "r1", False, "failed", False)
    store.close()


def test_status_json_is_json_whatever_the_text(tmp_path: Path) -> None:
    """Written by hand (for speed), checked against the json module: quotes, backslashes,
    controls and non-ASCII text; numbers; nulls; a dead daemon's open run not running."""
    summary = base.Summary("j", "r\"1", "2026-01-01T00:00:00Z", 2, "2026-01-01T00:00:00.5Z",
                           None, None, None, None, "r0", "s", "f", 0.125)  # fmt: skip
    view = base.ViewRow("j", True, 'say "hi"\\ \n\t\x01 é ☃', 1.0, "at", "local", "a\u2028note")
    row = base.status_row(view, summary)
    expected = {
        "job": "j",
        "enabled": True,
        "schedule": view.schedule,
        "last_run": {"run_id": 'r"1', "slot": summary.slot, "attempt": 2,
                     "started": summary.started, "finished": None, "outcome": None,
                     "exit_code": None, "duration_s": None},
        "last_success": {"run_id": "r0", "started": "s", "finished": "f", "duration_s": 0.125},
        "next_fire": {"at": "at", "local": "local", "note": "a\u2028note"},
        "running": True,
        "paused": None,
        "pause_expired": None,
    }  # fmt: skip
    line = status.format_status_json([row], alive=True)
    assert line == json.dumps(expected, separators=(",", ":"), ensure_ascii=False)
    assert "\n" not in line  # one line a job
    dead = json.loads(status.format_status_json([row], alive=False))
    assert dead["running"] is False
    never = base.status_row(base.ViewRow("n", False, "every 1m", None, None, None, None), None)
    assert json.loads(status.format_status_json([never], alive=True)) == {
        "job": "n", "enabled": False, "schedule": "every 1m", "last_run": None,
        "last_success": None, "next_fire": None, "running": False, "paused": None,
        "pause_expired": None,
    }  # fmt: skip


def test_rows_that_do_not_decode_are_a_state_error(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    store._db.execute(
        "INSERT INTO attempts (run_id, job, slot, attempt, started, output) "
        "VALUES ('r', 'a', 'not a time', 1, 0, 'not json')"
    )
    store._db.execute("INSERT INTO cursors VALUES ('a', 'not a time')")
    with pytest.raises(base.StateError, match="unexpected data"):
        store.cursors()
    with pytest.raises(base.StateError, match="unexpected data"):
        store.recent("a", 10)
    with pytest.raises(base.StateError, match="unexpected data"):
        store.close_lost(T0)


def test_a_full_disk_is_reported_as_such(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    store._db.execute("PRAGMA max_page_count = 20")  # a disk that fills up

    def fill() -> None:
        for i in range(10_000):
            row = store.start("a", run_id=f"r{i}", slot=T0, attempt=1, started=T0, cursor=T0)
            finish(store, row, "a", "success", keep=100_000)

    with pytest.raises(base.StateError, match="full") as err:
        fill()
    assert "rollback" not in str(err.value)
    assert not store._db.in_transaction  # and the connection is usable again
    assert store.cursors() == {"a": T0}


def test_damage_found_by_a_write_is_moved_aside_at_the_reopen(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    for i in range(300):
        row = store.start("a", run_id=f"r{i}", slot=T0, attempt=1, started=T0, cursor=T0)
        store.finish(row, job="a", finished=T0, outcome="success", exit_code=0,
                     duration_s=0.1, output=["x" * 500], keep=100_000)  # fmt: skip
    store.checkpoint()
    store.close()
    path = tmp_path / state.DB_NAME
    data = bytearray(path.read_bytes())
    page = 4096
    # The history's pages, past the schema's (the roots, and sqlite_master's overflow
    # pages: its text is longer than a page), and not the last ones.
    for n in range(20, len(data) // page - 2):
        data[n * page : n * page + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    damaged = state.SqliteStore(tmp_path)  # the header is fine: it opens
    with pytest.raises(base.StateError, match="malformed"):
        damaged.recent("a", 1000)
    damaged.close()
    fresh = state.SqliteStore(tmp_path, aside=True)  # what the daemon does at the next heartbeat
    assert fresh.moved_aside is not None
    assert Path(fresh.moved_aside).exists()
    assert fresh.recent("a", 10) == []
    fresh.close()


def test_finish_of_a_row_that_is_gone_does_nothing(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    row = store.start("a", run_id="r1", slot=T0, attempt=1, started=T0, cursor=T0)
    store.close()
    fresh = state.SqliteStore(tmp_path, aside=True)  # moved aside: a new file
    other = fresh.start("b", run_id="r2", slot=T0, attempt=1, started=T0, cursor=T0)
    assert other == row  # the same row id, in the new file: another run's row
    fresh.finish(row, job="a", run_id="r1", finished=T0, outcome="success", exit_code=0,
                 duration_s=0.1, output=[])  # fmt: skip
    b = fresh.last("b")
    assert b is not None
    assert b.finished is None  # not closed by the other run's finish


def test_start_many_records_a_wakes_runs_in_one_commit(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    slot = T0 + timedelta(minutes=1)
    ids = store.start_many([("a", "ra", slot), ("b", "rb", slot)], started=slot)
    assert len(set(ids)) == 2
    assert store.cursors() == {"a": slot, "b": slot}
    summaries = state.Reader(tmp_path).summaries()
    assert (summaries["a"].run_id, summaries["b"].run_id) == ("ra", "rb")
    assert summaries["a"].finished is None


def test_checkpoints_come_every_so_many_commits_then_one_write(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)
    for i in range(5):
        store.start("a", run_id=f"r{i}", slot=T0, attempt=1, started=T0, cursor=T0)
    store.checkpoint()
    assert store.get_meta("checkpointed") is None  # too few commits to bother
    for i in range(300):
        store.start("a", run_id=f"s{i}", slot=T0, attempt=1, started=T0, cursor=T0)
    store.checkpoint()
    assert store.get_meta("checkpointed") == "305"  # the write that restarts the WAL
    db = sqlite3.connect(f"file:{tmp_path / state.DB_NAME}?mode=ro", uri=True)
    assert db.execute("SELECT count(*) FROM attempts").fetchone() == (305,)


def test_publishing_a_view_writes_only_the_rows_that_changed(tmp_path: Path) -> None:
    store = state.SqliteStore(tmp_path)

    def rows(names: str, schedule: str = "every 1m") -> list[base.ViewRow]:
        return [base.view_row(name, True, schedule if name != "c" else "every 2m", None)
                for name in names]  # fmt: skip

    def published(names: str, **kw: str) -> int:
        before = store._db.total_changes
        store.publish_view(rows(names, **kw), "d")
        return store._db.total_changes - before - 1  # not the digest

    def shown() -> list[tuple[str, str]]:
        return [(r.job, r.schedule) for r in store.status_rows()]

    assert published("abcde") == 5
    assert published("abcde") == 0  # the same file again: nothing to write
    before = store._db.total_changes
    store.publish_view([*rows("ab"), base.view_row("c", True, "every 5m", None), *rows("de")], "d")
    assert store._db.total_changes - before - 1 == 2  # one row: deleted, written again
    assert shown() == [("a", "every 1m"), ("b", "every 1m"), ("c", "every 5m"),
                       ("d", "every 1m"), ("e", "every 1m")]  # fmt: skip
    assert published("abcdef") == 1 + 2  # f added; c back to its first schedule
    assert published("bacdef") == 4  # a and b swapped places
    assert [job for job, _ in shown()] == list("bacdef")
    assert published("bac") == 3  # d, e and f removed
    assert [job for job, _ in shown()] == list("bac")
    store.close()


def test_a_schema_1_store_without_the_summaries_json_is_refused_not_broken(
    tmp_path: Path,
) -> None:
    """Development builds wrote schema 1 before the summary had its JSON columns: such a
    store cannot be upgraded in place (every write would fail), so it is refused."""
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    db.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema', '1');"
        "CREATE TABLE summary (job TEXT PRIMARY KEY, last_id INTEGER, run_id TEXT);"
    )
    db.close()
    with pytest.raises(base.StateError, match="development build of crond"):
        state.SqliteStore(tmp_path)
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("1",)
    db.close()


# --- the seam: the daemon's recorder against any Store; storage imports none of crond ---


class _MemoryStore:
    """A Store kept in memory (base.Store, structurally: mypy checks it where the opener is
    typed), whose writes fail while `failing` holds an error: the recorder's policy seen
    without SQLite."""

    def __init__(self, aside: bool, *, lost: list[base.AttemptRow] | None = None) -> None:
        self.aside = aside
        self.moved_aside = "/somewhere/aside" if aside else None
        self.failing: base.StateError | None = None
        self.lost = lost or []
        self.rows: dict[int, tuple[str, str, str | None]] = {}  # token -> job, run id, outcome
        self.meta: dict[str, str] = {}
        self.outbox: list[base.OutboxRow] = []
        self.paused: dict[str, base.PauseRow] = {}
        self.closed = False

    @property
    def location(self) -> str:
        return "memory"

    def _check(self) -> None:
        if self.failing is not None:
            raise self.failing

    def get_meta(self, key: str) -> str | None:
        self._check()
        return self.meta.get(key)

    def metas(self, prefix: str) -> dict[str, str]:
        self._check()
        return {k: v for k, v in self.meta.items() if k.startswith(prefix)}

    def last(self, job: str, *, outcome: str | None = None) -> base.AttemptRow | None:
        return None

    def recent(
        self, job: str | None, limit: int, only: base.Only = base.EVERY
    ) -> list[base.AttemptRow]:
        return []

    def summaries(self) -> dict[str, base.Summary]:
        return {}

    def status_rows(self) -> list[base.StatusRow]:
        return []

    def view_is_behind(self, oldest: float) -> bool:
        return False

    def pauses(self) -> dict[str, base.PauseRow]:
        self._check()
        return dict(self.paused)

    def close(self) -> None:
        self.closed = True

    def cursors(self) -> dict[str, datetime]:
        self._check()
        return {}

    def start(
        self, job: str, *, run_id: str, slot: datetime, attempt: int, started: datetime,
        cursor: datetime,
    ) -> int:  # fmt: skip
        self._check()
        self.rows[len(self.rows) + 1] = (job, run_id, None)
        return len(self.rows)

    def start_many(
        self, starts: Sequence[base.Start], started: datetime, limits: object = None
    ) -> list[int]:
        return [self.start(s.job, run_id=s.run_id, slot=s.slot, attempt=1, started=started,
                           cursor=s.slot) for s in starts]  # fmt: skip

    def claim(
        self,
        starts: Sequence[base.Start],
        told: Sequence[tuple[str, datetime]],
        started: datetime,
        *,
        copies: Sequence[str] | None = None,
        exclusive: Collection[str] = (),
        replacing: Collection[str] = (),
        limits: object = None,
        locks: object = None,
    ) -> base.Claimed:
        return base.Claimed(list(self.start_many(starts, started)), [True] * len(told))

    def run_counts(self) -> dict[str, int]:
        return {}

    def finish(
        self, row_id: int, *, job: str, run_id: str | None = None, finished: datetime,
        outcome: str, exit_code: int | None, duration_s: float, output: Sequence[str],
        keep: int | None = None,
    ) -> None:  # fmt: skip
        self._check()
        self.rows[row_id] = (job, self.rows[row_id][1], outcome)

    def end(
        self, row_id: int, *, job: str, run_id: str | None = None, finished: datetime,
        outcome: str, exit_code: int | None, duration_s: float, output: Sequence[str],
        keep: int | None = None, release: bool = False,
    ) -> datetime | None:  # fmt: skip
        self.finish(row_id, job=job, finished=finished, outcome=outcome, exit_code=exit_code,
                    duration_s=duration_s, output=output)  # fmt: skip
        return None

    def close_lost(self, now: datetime) -> list[base.AttemptRow]:
        self._check()
        return self.lost

    def set_meta(self, key: str, value: str) -> None:
        self._check()
        self.meta[key] = value

    def outbox_add(self, rows: Sequence[base.OutboxRow]) -> list[int]:
        self._check()
        start = len(self.outbox) + 1
        self.outbox += [row._replace(id=start + n) for n, row in enumerate(rows)]
        return [start + n for n in range(len(rows))]

    def outbox_pending(self, limit: int) -> list[base.OutboxRow]:
        self._check()
        return self.outbox[:limit]

    def outbox_done(self, ids: Sequence[int]) -> None:
        self._check()
        self.outbox = [row for row in self.outbox if row.id not in ids]

    def set_pause(self, row: base.PauseRow) -> None:
        self._check()
        self.paused[row.job] = row

    def clear_pause(self, job: str) -> None:
        self._check()
        self.paused.pop(job, None)

    def set_pauses(self, rows: Sequence[base.PauseRow]) -> None:
        self._check()
        self.paused.update((row.job, row) for row in rows)

    def clear_pauses(self, jobs: Sequence[str]) -> None:
        self._check()
        for job in jobs:
            self.paused.pop(job, None)

    def publish_view(self, rows: Iterable[base.ViewRow], digest: str | None) -> None:
        self._check()

    def update_view(
        self,
        moved: Sequence[base.ViewRow],
        cursors: Sequence[tuple[str, datetime]] = (),
        first: Sequence[tuple[str, datetime]] = (),
    ) -> None:
        self._check()

    def check_in_place(self) -> None:
        self._check()

    def checkpoint(self) -> None:
        self._check()


class _Clock(SystemClock):
    def __init__(self) -> None:
        self.mono = 0.0

    def monotonic(self) -> float:
        return self.mono


def test_the_recorder_degrades_recovers_and_reopens_any_store() -> None:
    """The daemon's policy over the Protocol: unavailable, then opened (recovered); a write
    that fails is logged once a heartbeat and the run goes on; one that finds damage
    has the store opened afresh, the damaged one moved aside; lost runs only once."""
    opened: list[_MemoryStore] = []
    refusals = [base.StateError("no disk")]
    lost = base.AttemptRow(1, "r0", "j", T0, 1, T0, None, None, None, None, [])

    def opener(aside: bool) -> base.Store:
        if refusals:
            raise refusals.pop()
        opened.append(_MemoryStore(aside, lost=[lost]))
        return opened[-1]

    log, clock = _Log(), _Clock()
    recorder = StoreRecorder(opener, cast(FilteringBoundLogger, log), clock, quiet=10.0)
    assert (recorder.label(), recorder.wants_open()) == ("degraded", True)  # not yet opened
    assert not recorder.open()
    assert [e for e, _ in log.events] == ["state.unavailable"]
    assert recorder.open()  # the next heartbeat
    assert [e for e, _ in log.events][1:] == ["state.recovered", "state.opened", "job.lost"]
    assert (recorder.label(), recorder.wants_open()) == ("ok", False)
    assert "pid" in json.loads(opened[0].meta["daemon"])
    log.events.clear()

    clock.mono = 20.0  # a heartbeat or two later
    opened[0].failing = base.StateError("disk full")
    asyncio.run(recorder.prepare([base.Start("j", "r1", T0)], started=T0))
    recorder.mark("k", "v")
    clock.mono = 25.0
    recorder.mark("k", "v")
    assert [e for e, _ in log.events] == ["state.write_failed"]  # once per `quiet`
    assert (recorder.label(), recorder.wants_open()) == ("degraded", False)
    clock.mono = 31.0
    recorder.mark("k", "v")
    opened[0].failing = None
    recorder.mark("k", "v")
    assert [e for e, _ in log.events] == ["state.write_failed"] * 2 + ["state.recovered"]
    assert recorder.label() == "ok"
    log.events.clear()

    clock.mono = 50.0
    opened[0].failing = base.StateError("malformed", corrupt=True)
    recorder.check()  # the heartbeat's look: found damaged
    assert recorder.wants_open()
    assert recorder.open()
    assert opened[0].closed
    assert opened[1].aside  # told to move the damaged one aside
    # The checkpoint's failure is not logged (the same heartbeat); no job.lost: only the
    # first open closes lost runs.
    assert [e for e, _ in log.events] == [
        "state.unavailable", "state.moved_aside", "state.recovered", "state.opened"
    ]  # fmt: skip
    recorder.close()
    assert opened[1].closed


def test_storage_imports_nothing_of_the_runner_nor_the_daemon() -> None:
    """The store takes plain values: none of crond's other packages (nor pydantic) is
    imported with it, and `crond status`'s module stays as lean."""
    code = (
        "import sys, crond.store.locate, crond.store.sqlite, crond.status\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('crond.', 'pydantic')))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert any(m.startswith("crond.store.") for m in loaded)
    for outside in ("crond.run", "crond.daemon", "crond.when", "crond.config.loader", "pydantic"):
        assert not {m for m in loaded if m == outside or m.startswith(outside + ".")}, outside
    storage = "import sys, crond.store.locate\nprint(' '.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", storage], capture_output=True, text=True, check=True
    )
    assert not [m for m in done.stdout.split() if m.startswith("crond.config")]


def test_the_sqlite_store_is_a_store() -> None:
    """Checked by mypy (`make test`): the SQLite classes implement the Protocols."""
    writer: Callable[[Path], base.Store] = state.SqliteStore
    reader: Callable[[Path], base.Reader] = state.Reader
    assert writer is not None
    assert reader is not None


def test_status_finds_the_state_dir_in_the_daemon_block_with_the_bounded_reader() -> None:
    """`crond status` reads `daemon.state_dir` from that block alone, before loading the
    file: with the bounded YAML reader, so an alias bomb there costs nothing."""
    hint = status._state_dir_hint
    text = "jobs:\n  a: {every: 1m, command: x}\ndaemon:\n  # here\n  state_dir: /srv/s\nx: 1\n"
    assert hint(text.encode()) == "/srv/s"
    assert hint(b"jobs: {}\n") is None
    assert hint(b"daemon:\n  state_dir: [unclosed\n") is None
    levels = ['  l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    bomb = "daemon:\n" + "\n".join(levels) + "\n  state_dir: /srv/s\n"  # 9**10 nodes
    began = time.monotonic()
    assert hint(bomb.encode()) is None  # refused, not expanded
    assert time.monotonic() - began < 2


def test_the_recorder_tells_a_failure_from_a_result_of_none(tmp_path: Path) -> None:
    """`write` answers FAILED when nothing was done (no store, or it failed), and a None
    the store gave as a result (a mark not set) as None."""
    log = _Log()
    store = state.SqliteStore(tmp_path)
    recorder = _recorder(store, log)
    assert recorder.write(lambda s: s.get_meta("never set")) is None

    def refuse(_: base.Store) -> None:
        raise base.StateError("disk full")

    assert recorder.write(refuse) is FAILED
    assert [name for name, _ in log.events][-1] == "state.write_failed"
    none = StoreRecorder(None, cast(FilteringBoundLogger, _Log()), SystemClock())
    assert none.write(lambda s: s.get_meta("x")) is FAILED
    recorder.close()
