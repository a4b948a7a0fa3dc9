"""The state store on a real SQLite file: cursors, attempts, pruning, lost runs, corruption."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from structlog.typing import FilteringBoundLogger

from crond.clock import SystemClock
from crond.config import loader
from crond.config.loaded import LoadedJob
from crond.run import runner
from crond.store import sqlite as state

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_start_and_finish_record_an_attempt(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
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


def test_cursor_never_goes_back(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
    store.save_cursor("a", T0 + timedelta(hours=1))
    store.save_cursor("a", T0)
    assert store.cursors()["a"] == T0 + timedelta(hours=1)


def test_history_is_pruned_per_job(tmp_path: Path) -> None:
    store = state.Store(tmp_path, history=5)
    for i in range(12):
        for job in ("a", "b"):
            row = store.start(job, run_id=f"{job}{i}", slot=T0, attempt=1, started=T0, cursor=T0)
            store.finish(
                row, job=job, finished=T0, outcome="success", exit_code=0, duration_s=0.0, output=[]
            )
    assert [r.run_id for r in store.recent("a", 100)] == [f"a{i}" for i in range(7, 12)]
    assert len(store.recent("b", 100)) == 5


def test_open_attempts_are_closed_as_lost_by_the_next_daemon(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
    store.start("a", run_id="r1", slot=T0, attempt=1, started=T0, cursor=T0)
    store.close()
    again = state.Store(tmp_path)  # a new daemon after a crash
    lost = again.close_lost(T0 + timedelta(minutes=1))
    assert [(r.job, r.run_id, r.slot) for r in lost] == [("a", "r1", T0)]
    last = again.last("a")
    assert last is not None
    assert last.outcome == "lost"
    assert again.close_lost(T0 + timedelta(minutes=2)) == []


def test_corrupt_file_is_moved_aside_and_a_fresh_one_started(tmp_path: Path) -> None:
    (tmp_path / state.DB_NAME).write_bytes(b"this is not a database" * 100)
    store = state.Store(tmp_path)
    assert store.moved_aside is not None
    assert store.moved_aside.exists()
    assert store.cursors() == {}
    store.save_cursor("a", T0)
    assert store.cursors() == {"a": T0}


def test_unwritable_directory_is_a_state_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(state.StateError, match="Not a directory"):
        state.Store(blocker / "sub")


def test_a_reader_sees_committed_rows_while_the_writer_holds_the_file(tmp_path: Path) -> None:
    writer = state.Store(tmp_path)
    row = writer.start("a", run_id="r1", slot=T0, attempt=1, started=T0, cursor=T0)
    reader = sqlite3.connect(tmp_path / state.DB_NAME)
    assert reader.execute("SELECT count(*) FROM attempts").fetchone() == (1,)
    writer.finish(
        row, job="a", finished=T0, outcome="failed", exit_code=2, duration_s=0.1, output=["boom"]
    )
    assert reader.execute("SELECT outcome FROM attempts").fetchone() == ("failed",)
    reader.close()


def test_default_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    assert state.default_dir({"STATE_DIRECTORY": "/var/lib/x:/other"}) == Path("/var/lib/x")


def test_boot_id_is_read_from_the_kernel() -> None:
    bid = state.boot_id()
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


def _run(recorder: state.StoreRecorder, command: str) -> None:
    log = cast(FilteringBoundLogger, _Log())

    async def main() -> None:
        run = runner.start_run(
            runner.spec_for(_job(command)), T0, clock=SystemClock(), log=log, recorder=recorder
        )
        await run.wait()

    asyncio.run(main())


def test_store_recorder_keeps_each_attempt_with_its_output(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
    recorder = state.StoreRecorder(store, cast(FilteringBoundLogger, _Log()), SystemClock())
    _run(recorder, "echo one; echo two; exit 3")
    row = store.last("j")
    assert row is not None
    assert (row.slot, row.attempt, row.outcome, row.exit_code) == (T0, 1, "failed", 3)
    assert row.output == ["one", "two"]
    assert store.cursors() == {"j": T0}
    assert not recorder.degraded


def test_a_broken_store_never_stops_a_run(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
    store.close()  # every write now fails
    log = _Log()
    recorder = state.StoreRecorder(store, cast(FilteringBoundLogger, log), SystemClock())
    _run(recorder, "echo still runs")
    _run(recorder, "echo and again")
    assert recorder.degraded
    assert [e for e, _ in log.events] == ["state.write_failed"]  # once per `quiet` seconds


def finish(store: state.Store, row: int, job: str, outcome: str, **kw: Any) -> None:
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
    store = state.Store(tmp_path)
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
    store = state.Store(tmp_path)
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
    store = state.Store(tmp_path)
    store.start("a", run_id="r", slot=T0, attempt=1, started=T0, cursor=T0)
    store.close()
    again = state.Store(tmp_path)
    (lost,) = again.close_lost(T0 + timedelta(minutes=1))
    assert lost.run_id == "r"
    a = state.Reader(tmp_path).summaries()["a"]
    assert (a.outcome, a.finished) == ("lost", "2026-03-01T12:01:00Z")


def test_reader_refuses_a_missing_store_and_never_creates_one(tmp_path: Path) -> None:
    with pytest.raises(state.StateError, match="no such file"):
        state.Reader(tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()


def test_save_cursors_moves_several_in_one_commit(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
    store.save_cursors([("a", T0), ("b", T0 + timedelta(seconds=1))])
    store.save_cursors([("a", T0 - timedelta(days=1))])
    assert store.cursors() == {"a": T0, "b": T0 + timedelta(seconds=1)}


def test_resolve_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", "/srv/systemd-gave-this")
    assert state.resolve_dir(None, None) == Path("/srv/systemd-gave-this")
    assert state.resolve_dir(None, "/srv/state") == Path("/srv/state")
    assert state.resolve_dir("/flag", "/srv/state") == Path("/flag")
    assert state.resolve_dir(None, "none") is None
    assert state.resolve_dir("none", "/srv/state") is None


def test_one_store_serves_one_daemon(tmp_path: Path) -> None:
    first = state.Store(tmp_path)
    with pytest.raises(state.StateError, match=r"in use by another crond \(pid \d+\)"):
        state.Store(tmp_path)
    first.close()
    state.Store(tmp_path).close()  # free again once the first has closed it


def test_a_store_of_another_schema_is_refused_not_misread(tmp_path: Path) -> None:
    state.Store(tmp_path).close()
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    with db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    db.close()
    for open_it in (state.Store, state.Reader):
        with pytest.raises(state.StateError, match=r"another version of crond \(schema 99"):
            open_it(tmp_path)


# Schema 1, as the first release with a store wrote it: the view without the summaries.
_SCHEMA_1_VIEW = """CREATE TABLE view (job TEXT PRIMARY KEY, pos INTEGER NOT NULL,
    enabled INTEGER NOT NULL, schedule TEXT NOT NULL, next_at REAL, next_text TEXT,
    next_local TEXT, next_note TEXT)"""


def test_a_schema_1_store_is_upgraded_keeping_history_and_cursors(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    row = store.start("a", run_id="r1", slot=t0, attempt=1, started=t0, cursor=t0)
    store.finish(row, job="a", finished=t0, outcome="success", exit_code=0, duration_s=1.0,
                 output=["hi"])  # fmt: skip
    store.close()
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    with db:  # back to schema 1: its view, no triggers, and a view the daemon published
        db.execute("DROP TABLE view")
        db.execute("DROP TRIGGER summary_INSERT")
        db.execute("DROP TRIGGER summary_UPDATE")
        db.execute(_SCHEMA_1_VIEW)
        db.execute("INSERT INTO view VALUES ('a', 0, 1, 'every 1m', NULL, NULL, NULL, NULL)")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
        db.execute("INSERT OR REPLACE INTO meta VALUES ('view_sha256', 'abc')")
    db.close()
    with pytest.raises(state.StateError, match=r"older crond \(schema 1\); the daemon upgrades"):
        state.Reader(tmp_path)  # a reader does not write: it waits for the daemon
    store = state.Store(tmp_path)
    assert store.get_meta("schema") == str(state.SCHEMA_VERSION)
    assert store.get_meta("view_sha256") == ""  # the old view is gone: not to be trusted
    assert [r.run_id for r in store.recent("a", 10)] == ["r1"]
    assert store.cursors() == {"a": t0}
    store.publish_view([state.view_row("a", True, "every 1m", None)], "def")
    line = json.loads(store.status_json(alive=True))
    assert line["last_run"]["run_id"] == "r1"
    assert line["last_success"]["run_id"] == "r1"
    store.close()


def test_the_view_follows_the_summaries_it_shows(tmp_path: Path) -> None:
    """The view holds a copy of each job's summary (status reads the view alone): every
    write of a summary must reach it, and a view made later must pick the summaries up."""
    store = state.Store(tmp_path)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    store.publish_view([state.view_row(name, True, "every 1m", None) for name in "ab"], "x")

    def shown() -> dict[str, tuple[object, ...]]:
        lines = [json.loads(line) for line in store.status_json(alive=True).splitlines()]
        table = {r.job: r for r in store.status_rows()}
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
    store.publish_view([state.view_row(name, True, "every 1m", None) for name in "ba"], "y")
    assert list(shown()) == ["b", "a"]
    assert shown()["a"] == ("failed", "r1", False, "failed", False)
    store.close()


def test_rows_that_do_not_decode_are_a_state_error(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
    store._db.execute(
        "INSERT INTO attempts (run_id, job, slot, attempt, started, output) "
        "VALUES ('r', 'a', 'not a time', 1, 0, 'not json')"
    )
    store._db.execute("INSERT INTO cursors VALUES ('a', 'not a time')")
    with pytest.raises(state.StateError, match="unexpected data"):
        store.cursors()
    with pytest.raises(state.StateError, match="unexpected data"):
        store.recent("a", 10)
    with pytest.raises(state.StateError, match="unexpected data"):
        store.close_lost(T0)


def test_a_full_disk_is_reported_as_such(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
    store._db.execute("PRAGMA max_page_count = 20")  # a disk that fills up

    def fill() -> None:
        for i in range(10_000):
            row = store.start("a", run_id=f"r{i}", slot=T0, attempt=1, started=T0, cursor=T0)
            finish(store, row, "a", "success", keep=100_000)

    with pytest.raises(state.StateError, match="full") as err:
        fill()
    assert "rollback" not in str(err.value)
    assert not store._db.in_transaction  # and the connection is usable again
    assert store.cursors() == {"a": T0}


def test_damage_found_by_a_write_is_moved_aside_at_the_reopen(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
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
    damaged = state.Store(tmp_path)  # the header is fine: it opens
    with pytest.raises(state.StateError, match="malformed"):
        damaged.recent("a", 1000)
    damaged.close()
    fresh = state.Store(tmp_path, aside=True)  # what the daemon does at the next heartbeat
    assert fresh.moved_aside is not None
    assert fresh.moved_aside.exists()
    assert fresh.recent("a", 10) == []
    fresh.close()


def test_finish_of_a_row_that_is_gone_does_nothing(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
    row = store.start("a", run_id="r1", slot=T0, attempt=1, started=T0, cursor=T0)
    store.close()
    fresh = state.Store(tmp_path, aside=True)  # moved aside: a new file
    other = fresh.start("b", run_id="r2", slot=T0, attempt=1, started=T0, cursor=T0)
    assert other == row  # the same row id, in the new file: another run's row
    fresh.finish(row, job="a", run_id="r1", finished=T0, outcome="success", exit_code=0,
                 duration_s=0.1, output=[])  # fmt: skip
    b = fresh.last("b")
    assert b is not None
    assert b.finished is None  # not closed by the other run's finish


def test_start_many_records_a_wakes_runs_in_one_commit(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
    slot = T0 + timedelta(minutes=1)
    ids = store.start_many([("a", "ra", slot), ("b", "rb", slot)], started=slot)
    assert len(set(ids)) == 2
    assert store.cursors() == {"a": slot, "b": slot}
    summaries = state.Reader(tmp_path).summaries()
    assert (summaries["a"].run_id, summaries["b"].run_id) == ("ra", "rb")
    assert summaries["a"].finished is None


def test_checkpoints_come_every_so_many_commits_then_one_write(tmp_path: Path) -> None:
    store = state.Store(tmp_path)
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
    store = state.Store(tmp_path)

    def rows(names: str, schedule: str = "every 1m") -> list[state.ViewRow]:
        return [state.view_row(name, True, schedule if name != "c" else "every 2m", None)
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
    store.publish_view([*rows("ab"), state.view_row("c", True, "every 5m", None), *rows("de")], "d")
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
    with pytest.raises(state.StateError, match="development build of crond"):
        state.Store(tmp_path)
    db = sqlite3.connect(tmp_path / state.DB_NAME)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("1",)
    db.close()
