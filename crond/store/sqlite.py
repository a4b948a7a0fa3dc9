"""The durable record: each job's cursor and its recent attempts, in SQLite (WAL mode).

A slot's `started` row and the job's cursor are committed in one transaction before the
child is spawned, so a slot is started at most once even across a crash or `kill -9` of
the daemon. A run found `started` by the next daemon is closed as `lost`, never re-run.
The store is a help, never a hazard: every error is caught, counted and reported by the
caller (once per heartbeat), a corrupt file is moved aside and a fresh one started, and
scheduling goes on without it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from crond import ownership
from crond.clock import iso_utc

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from crond.clock import Clock
    from crond.run.runner import Run, RunResult
    from crond.when.timing import Fire

T = TypeVar("T")
# Commits between checkpoints: a few pages each, so the WAL stays around a megabyte.
_CHECKPOINT_EVERY = 200
SCHEMA_VERSION = 2
_UPGRADABLE = frozenset({"1"})  # older schemas `_upgrade` brings to SCHEMA_VERSION
DB_NAME = "crond.sqlite3"
LOCK_NAME = "crond.lock"  # flock'ed by the daemon using the store; holds its pid
# The daemon's view of its jobs (table `view`), or one made for a file (`temp.file_view`).
_VIEW_COLUMNS = """(
    pos INTEGER PRIMARY KEY,  -- the file's order: the rowid, so reading in order is a scan
    job TEXT NOT NULL UNIQUE,
    enabled INTEGER NOT NULL,
    schedule TEXT NOT NULL,
    next_at REAL,
    next_text TEXT,
    next_local TEXT,
    next_note TEXT,
    -- The job's summary as `crond status` shows it, copied here by the summary table's
    -- triggers (and when the view is made): status then reads this one table, in order,
    -- instead of joining 10,000 rows by name (most of its time).
    started TEXT,
    finished TEXT,
    outcome TEXT,
    duration_s REAL,
    success_finished TEXT,
    last_json TEXT,
    success_json TEXT,
    open INTEGER NOT NULL DEFAULT 0,  -- the newest attempt has not finished
    head TEXT GENERATED ALWAYS AS (json_object('job', job,
        'enabled', json(CASE WHEN enabled THEN 'true' ELSE 'false' END),
        'schedule', schedule)) VIRTUAL,
    next_json TEXT GENERATED ALWAYS AS (CASE WHEN next_text IS NULL THEN NULL ELSE
        json_object('at', next_text, 'local', next_local, 'note', next_note) END) VIRTUAL,
    -- `crond status --json`'s whole line, made by SQLite when the row is written (the
    -- parts above are not kept: reading the lines reads every byte of the rows).
    line TEXT GENERATED ALWAYS AS (substr(head, 1, length(head) - 1) || ',"last_run":'
        || coalesce(last_json, 'null') || ',"last_success":' || coalesce(success_json, 'null')
        || ',"next_fire":' || coalesce(next_json, 'null')
        || CASE WHEN open THEN ',"running":true}' ELSE ',"running":false}' END) STORED
)"""
# What the view copies of a job's summary (the triggers below, and `_VIEW_INSERT`).
_VIEW_SUMMARY = "started, finished, outcome, duration_s, success_finished, last_json, success_json"
_SUMMARY_TO_VIEW = """
CREATE TRIGGER IF NOT EXISTS summary_{when} AFTER {when} ON summary BEGIN
    UPDATE view SET ({view_summary}, open) = (NEW.started, NEW.finished, NEW.outcome,
        NEW.duration_s, NEW.success_finished, NEW.last_json, NEW.success_json,
        NEW.run_id IS NOT NULL AND NEW.finished IS NULL) WHERE job = NEW.job;
END;
""".replace("{view_summary}", _VIEW_SUMMARY)
_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cursors (job TEXT PRIMARY KEY, cursor REAL NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    job TEXT NOT NULL,
    slot REAL NOT NULL,
    attempt INTEGER NOT NULL,
    started REAL NOT NULL,
    finished REAL,
    outcome TEXT,
    exit_code INTEGER,
    duration_s REAL,
    output TEXT
);
CREATE INDEX IF NOT EXISTS attempts_job ON attempts (job, id);
CREATE INDEX IF NOT EXISTS attempts_open ON attempts (finished) WHERE finished IS NULL;
-- One row a job, so `crond status` reads 10,000 rows, not a million: the newest attempt
-- and the last success (kept even when older than the history kept), instants already
-- as ISO-8601 text (formatting 50,000 of them was most of status's time).
CREATE TABLE IF NOT EXISTS summary (
    job TEXT PRIMARY KEY,
    last_id INTEGER,
    run_id TEXT,
    slot TEXT,
    attempt INTEGER,
    started TEXT,
    finished TEXT,
    outcome TEXT,
    exit_code INTEGER,
    duration_s REAL,
    success_run_id TEXT,
    success_started TEXT,
    success_finished TEXT,
    success_duration_s REAL,
    -- `crond status --json`'s parts, made by SQLite when the row is written (status then
    -- only joins strings: building 20,000 objects per read was most of its time).
    last_json TEXT GENERATED ALWAYS AS (CASE WHEN run_id IS NULL THEN NULL ELSE json_object(
        'run_id', run_id, 'slot', slot, 'attempt', attempt, 'started', started,
        'finished', finished, 'outcome', outcome, 'exit_code', exit_code,
        'duration_s', duration_s) END) STORED,
    success_json TEXT GENERATED ALWAYS AS (CASE WHEN success_finished IS NULL THEN NULL
        ELSE json_object('run_id', success_run_id, 'started', success_started,
        'finished', success_finished, 'duration_s', success_duration_s) END) STORED
);
-- The running daemon's view of its jobs, for a `crond status` that need not load the
-- file again: written at each load (with the file's sha256 in meta `view_sha256`), next
-- fires updated as they move.
CREATE TABLE IF NOT EXISTS view {view_columns};
-- Whether the view is behind (a stalled daemon): the earliest next fire, without a scan.
CREATE INDEX IF NOT EXISTS view_next ON view (next_at);
""".replace("{view_columns}", _VIEW_COLUMNS)
    + "".join(_SUMMARY_TO_VIEW.replace("{when}", when) for when in ("INSERT", "UPDATE"))
)

# A view row's own columns, as `_values` gives them.
_VIEW_KEYS = "pos, job, enabled, schedule, next_at, next_text, next_local, next_note"
# A view row (the job's place in the file, its schedule and next fire) with its summary,
# as one row of `executemany`: `{view}` is `view` or `temp.file_view`.
_VIEW_INSERT = (
    f"INSERT INTO {{view}} ({_VIEW_KEYS}, {_VIEW_SUMMARY}, open) SELECT"  # noqa: S608
    f" v.*, s.{_VIEW_SUMMARY.replace(', ', ', s.')}, "
    "s.run_id IS NOT NULL AND s.finished IS NULL FROM (SELECT ?, ? AS job, ?, ?, ?, ?, ?, ?) v "
    "LEFT JOIN summary s ON s.job = v.job"
)


def default_dir(environ: dict[str, str] | None = None) -> Path:
    """`$STATE_DIRECTORY` (systemd's StateDirectory=), else /var/lib/crond as root, else
    ~/.local/state/crond."""
    env = os.environ if environ is None else environ
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0])
    if os.geteuid() == 0:
        return Path("/var/lib/crond")
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "crond"


def resolve_dir(flag: str | None, configured: str | None) -> Path | None:
    """Where the store lives: `--state-dir`, else the file's `daemon.state_dir`, else the
    default place; None (no store) when the one that decides says `none`."""
    chosen = flag or configured
    if chosen is None:
        return default_dir()
    return None if chosen.strip().lower() == "none" else Path(chosen).expanduser()


SYSTEM_DIR = Path("/var/lib/crond")


def open_reader(flag: str | None, configured: str | None) -> Reader:
    """The store `crond status`/`history` should read: where `resolve_dir` says; and for a
    user other than root with nothing chosen and nothing there, the system daemon's
    (/var/lib/crond: a monitoring user in the `crond` group need not say so)."""
    directory = resolve_dir(flag, configured)
    if directory is None:
        raise StateError("no state store (state_dir: none): no run history is kept")
    try:
        return Reader(directory)
    except StateError:
        fallback = flag is None and configured is None and directory != SYSTEM_DIR
        if not fallback or not (SYSTEM_DIR / DB_NAME).exists():
            raise
    return Reader(SYSTEM_DIR)


def _check_directory(directory: Path) -> None:
    """As root: the store's directory and those above it are root's alone (nobody else
    can plant a link where crond creates its lock and SQLite files). Raises StateError."""
    problem = ownership.directory_problem(directory)
    if problem is not None:
        raise StateError(problem)


def _ts(instant: datetime) -> float:
    return instant.timestamp()


def _dt(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


@dataclass(frozen=True)
class AttemptRow:
    id: int
    run_id: str
    job: str
    slot: datetime
    attempt: int
    started: datetime
    finished: datetime | None
    outcome: str | None
    exit_code: int | None
    duration_s: float | None
    output: list[str]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> AttemptRow:
        slot, started, finished = _dt(row[3]), _dt(row[5]), _dt(row[6])
        assert slot is not None
        assert started is not None
        output = json.loads(row[10]) if row[10] else []
        return cls(
            row[0], row[1], row[2], slot, row[4], started, finished, row[7], row[8], row[9], output
        )

    def as_dict(self) -> dict[str, Any]:
        def iso(when: datetime | None) -> str | None:
            return None if when is None else iso_utc(when)

        return {
            "job": self.job,
            "run_id": self.run_id,
            "slot": iso(self.slot),
            "attempt": self.attempt,
            "started": iso(self.started),
            "finished": iso(self.finished),
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "duration_s": self.duration_s,
            "output": self.output,
        }


_SELECT = (
    "SELECT id, run_id, job, slot, attempt, started, finished, outcome, exit_code, duration_s, "
    "output FROM attempts"
)


class StateError(Exception):
    """The store could not do what was asked; the message says why. `corrupt`: SQLite
    said the file is damaged (the daemon then moves it aside and starts afresh)."""

    def __init__(self, message: str, *, corrupt: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt


def _failure(path: Path, exc: sqlite3.Error) -> StateError:
    corrupt = isinstance(exc, sqlite3.DatabaseError) and _is_corrupt(exc)
    return StateError(f"{path}: {exc}", corrupt=corrupt)


class Summary(NamedTuple):
    """One job's line in `crond status`: its newest attempt and its last success, with
    instants as `clock.iso_utc` wrote them."""

    job: str
    run_id: str | None  # the newest attempt; None: never run
    slot: str | None
    attempt: int | None
    started: str | None
    finished: str | None  # None while it runs (or if its daemon died)
    outcome: str | None
    exit_code: int | None
    duration_s: float | None
    success_run_id: str | None
    success_started: str | None
    success_finished: str | None
    success_duration_s: float | None


_SUMMARY_COLUMNS = (
    "job, run_id, slot, attempt, started, finished, outcome, exit_code, duration_s, "
    "success_run_id, success_started, success_finished, success_duration_s"
)
_SUMMARIES = f"SELECT {_SUMMARY_COLUMNS} FROM summary"  # noqa: S608  (constant text)

# `crond status`, every job in the view's order, read from the view alone. {view} is
# `view` or `temp.file_view`. --json: the lines SQLite made, joined by SQLite (one string).
# SQLite 3.44 orders an aggregate's input itself; before it, the ordered subquery does:
# an aggregate's subquery with ORDER BY is never flattened (the query planner's rule 16),
# so its rows reach group_concat in order (tests/test_state.py checks the order).
_STATUS_JSON = (
    "SELECT group_concat(line, char(10) ORDER BY pos) FROM {view}"
    if sqlite3.sqlite_version_info >= (3, 44)
    else "SELECT group_concat(line, char(10)) FROM (SELECT line FROM {view} ORDER BY pos)"
)
_STATUS_ROWS = """
SELECT job, enabled, schedule, next_text, next_note, started, finished, outcome, duration_s,
    success_finished, open
FROM {view} ORDER BY pos
"""


class StatusRow(NamedTuple):
    """What the status table shows of one job."""

    job: str
    enabled: bool
    schedule: str
    next_text: str | None
    next_note: str | None
    started: str | None
    finished: str | None
    outcome: str | None
    duration_s: float | None
    success_finished: str | None
    open: bool  # the newest attempt has not finished


class _Reads:
    """The queries of `crond status` and `crond history` (the daemon never makes them)."""

    _db: sqlite3.Connection
    path: Path

    def _all(self, query: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self._db.execute(query, params).fetchall()
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from None

    def last(self, job: str, *, outcome: str | None = None) -> AttemptRow | None:
        query = _SELECT + " WHERE job = ?"
        params: tuple[Any, ...] = (job,)
        if outcome is not None:
            query += " AND outcome = ?"
            params += (outcome,)
        rows = self._all(query + " ORDER BY id DESC LIMIT 1", params)
        return _decoded(self.path, lambda: AttemptRow.from_row(rows[0]) if rows else None)

    def recent(self, job: str | None, limit: int) -> list[AttemptRow]:
        """The newest `limit` attempts (of `job`, or of every job), oldest first."""
        if job is None:
            rows = self._all(_SELECT + " ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = self._all(_SELECT + " WHERE job = ? ORDER BY id DESC LIMIT ?", (job, limit))
        return _decoded(self.path, lambda: [AttemptRow.from_row(r) for r in reversed(rows)])

    def summaries(self) -> dict[str, Summary]:
        """Every job's summary, in one pass over the summary table (one row a job)."""
        rows = self._all(_SUMMARIES)
        return _decoded(self.path, lambda: {r[0]: Summary(*r) for r in rows})

    def status_json(self, *, alive: bool, view: str = "view") -> str:
        """`crond status --json`: one JSON object a job, a line each, in the view's order.
        `alive`: whether the daemon that wrote the store runs; if not, nothing is running
        (an open attempt is a lost one)."""
        rows = self._all(_STATUS_JSON.replace("{view}", view))
        text: str = rows[0][0] or ""
        # `,"running":true}` can only be a line's end: inside a JSON string, " is escaped.
        return text if alive else text.replace(',"running":true}', ',"running":false}')

    def status_rows(self, *, view: str = "view") -> list[StatusRow]:
        """`crond status`: what the table shows of each job, in the view's order."""
        rows = self._all(_STATUS_ROWS.replace("{view}", view))
        return _decoded(
            self.path,
            lambda: [
                StatusRow(r[0], bool(r[1]), r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
                          bool(r[10]))
                for r in rows
            ],
        )  # fmt: skip

    def view_is_behind(self, oldest: float) -> bool:
        """Whether some next fire in the view is before `oldest` (epoch seconds)."""
        return bool(self._all("SELECT 1 FROM view WHERE next_at < ? LIMIT 1", (oldest,)))

    def file_view(self, rows: Iterable[ViewRow]) -> str:
        """A view made for a file (the daemon has not loaded it), in this connection only:
        the name to pass as `view` to the status queries."""
        try:
            self._db.execute("DROP TABLE IF EXISTS temp.file_view")
            self._db.execute("CREATE TEMP TABLE file_view " + _VIEW_COLUMNS)
            self._db.executemany(_VIEW_INSERT.replace("{view}", "temp.file_view"), _values(rows))
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from None
        return "temp.file_view"

    def get_meta(self, key: str) -> str | None:
        rows = self._all("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None


@dataclass(frozen=True)
class ViewRow:
    """One job as the daemon sees it: what `crond status` shows besides the history."""

    job: str
    enabled: bool
    schedule: str
    next_at: float | None  # epoch seconds
    next_text: str | None  # the same, as `clock.iso_utc` writes it
    next_local: str | None  # ISO-8601 in the job's zone
    next_note: str | None


def view_row(name: str, enabled: bool, schedule: str, fire: Fire | None) -> ViewRow:
    """A job's row of a view: what status shows of it besides the history."""
    if fire is None or not enabled:
        return ViewRow(name, enabled, schedule, None, None, None, None)
    at = fire.at
    return ViewRow(
        name, enabled, schedule, at.timestamp(), iso_utc(at), fire.local.isoformat(), fire.note
    )


class Reader(_Reads):
    """The store opened read-only, for `crond status` and `crond history` while the
    daemon writes (WAL: readers never block the writer, nor it them)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / DB_NAME
        _check_directory(directory)  # as root, SQLite may create the -shm file there
        try:
            if not self.path.exists():
                raise StateError(
                    f"{self.path}: no such file (has the daemon run with this state_dir?)"
                )
        except OSError as exc:  # a directory we may not enter
            raise StateError(f"{self.path}: {exc.strerror or exc}") from None
        try:
            self._db = self._connect("mode=ro")
        except sqlite3.Error as exc:
            # With no daemon running, the WAL's -shm file is gone, and a reader that may
            # not write the directory cannot make one: read the file as it is on disk
            # (nobody is writing it, or the -shm would be there).
            if "readonly" not in str(exc) and "unable to open" not in str(exc):
                raise _failure(self.path, exc) from None
            try:
                self._db = self._connect("mode=ro&immutable=1")
            except sqlite3.Error as again:
                raise StateError(f"{self.path}: {again}") from None

    @classmethod
    def empty(cls) -> Reader:
        """No store: an empty one in memory, so that status reads the same either way."""
        reader = cls.__new__(cls)
        reader.path = Path(":memory:")
        reader._db = sqlite3.connect(":memory:")
        reader._db.executescript(_SCHEMA)
        return reader

    def _connect(self, flags: str) -> sqlite3.Connection:
        db = sqlite3.connect(f"file:{self.path}?{flags}", uri=True, timeout=5.0)
        try:
            _check_schema(db, self.path)
            db.execute("SELECT 1 FROM summary LIMIT 1").fetchall()
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        self._db.close()


class Store(_Reads):
    """One SQLite file. Not thread-safe: use it from the event loop's thread."""

    def __init__(self, directory: Path, *, history: int = 100, aside: bool = False) -> None:
        """Open (or create) the store in `directory`, locked for this process: two
        daemons on one store would close each other's runs as lost and share cursors.
        `aside`: the file is known to be damaged (a write said so): move it aside first."""
        self.directory = directory
        self.path = directory / DB_NAME
        self.history = history
        self.moved_aside: Path | None = None
        self._commits = 0  # since the last checkpoint
        self._lock = self._take_lock()
        try:
            if aside and self.path.exists():
                self._move_aside()
            self._db = self._open()
        except BaseException:
            os.close(self._lock)
            raise

    def _take_lock(self) -> int:
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            _check_directory(self.directory)
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self.directory / LOCK_NAME, flags, 0o600)
        except OSError as exc:
            raise StateError(f"{self.directory}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StateError(
                f"{self.directory}: in use by another crond (pid {holder}); give each daemon "
                "its own state_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def _move_aside(self) -> None:
        """Keep the evidence under another name, with its -wal and -shm."""
        aside = self.path.with_name(f"{DB_NAME}.corrupt-{os.urandom(4).hex()}")
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                Path(f"{self.path}{suffix}").rename(f"{aside}{suffix}")
        self.moved_aside = aside

    # --- opening --------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc) or not self.path.exists():
                raise _failure(self.path, exc) from None
        self._move_aside()  # corrupt: keep the evidence, start afresh
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            raise _failure(self.path, exc) from None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL: a commit survives a crash of crond (the WAL is in the OS's hands),
            # not a power cut; FULL would cost an fsync on the start path of every run.
            db.execute("PRAGMA synchronous=NORMAL")
            # Checkpoints are the heartbeat's (`checkpoint`), not the start path's: SQLite
            # would otherwise copy the WAL back inside whichever commit crossed 1,000 pages.
            db.execute("PRAGMA wal_autocheckpoint=0")
            _upgrade(db, self.path)
            _check_schema(db, self.path, empty_ok=True)
            db.executescript(_SCHEMA)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            # No `PRAGMA quick_check`: it reads every page (~0.6 s for a million rows) at
            # every start. A file that is not a database fails above; damage deeper in
            # fails the write that meets it, and the daemon then reopens (moving it aside).
        except (sqlite3.DatabaseError, StateError):
            db.close()
            raise
        return db

    def close(self) -> None:
        self._db.close()
        os.close(self._lock)

    def check_in_place(self) -> None:
        """Raise StateError (to be reopened, as for a damaged file) when the store's
        directory was removed or replaced under the daemon: its writes would go to files
        nobody can see. The lock file this store holds must still be the one there."""
        mine = os.fstat(self._lock)
        try:
            there = (self.directory / LOCK_NAME).lstat()
        except OSError:
            there = None
        if there is None or (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
            raise StateError(
                f"{self.directory}: removed or replaced while the daemon was using it; "
                "the store is made again there (its history is lost)",
                corrupt=True,
            )

    def checkpoint(self) -> None:
        """Every `_CHECKPOINT_EVERY` commits: copy the WAL back into the file as far as
        readers allow (PASSIVE: never waits), then write once, so that the WAL restarts
        now. The first commit after a full checkpoint restarts the WAL, and that commit
        measured 1-10 ms here (against 0.1 ms): paid by the heartbeat, not by the next
        run's start. Not at every heartbeat: a job every minute would pay it each time."""
        if self._commits < _CHECKPOINT_EVERY:
            return
        try:
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from None
        self.set_meta("checkpointed", str(self._commits))
        self._commits = 0

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One commit. On any error the transaction is rolled back if SQLite has not
        already done so, and the first error is the one reported (disk full, say)."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            yield self._db
            self._db.execute("COMMIT")
            self._commits += 1
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise _failure(self.path, exc) from None
            if isinstance(exc, (TypeError, ValueError, OverflowError)):
                raise StateError(f"{self.path}: unexpected data ({exc})") from None
            raise

    # --- the daemon's writes --------------------------------------------------------

    def cursors(self) -> dict[str, datetime]:
        rows = self._all("SELECT job, cursor FROM cursors")
        return _decoded(self.path, lambda: {job: datetime.fromtimestamp(c, UTC) for job, c in rows})

    def save_cursor(self, job: str, cursor: datetime) -> None:
        self.save_cursors([(job, cursor)])

    def save_cursors(self, cursors: Sequence[tuple[str, datetime]]) -> None:
        """Move cursors forward (never back), in one commit."""
        with self._transaction() as db:
            _move_cursors(db, cursors)

    def start(
        self,
        job: str,
        *,
        run_id: str,
        slot: datetime,
        attempt: int,
        started: datetime,
        cursor: datetime,
    ) -> int:
        """Record an attempt as started and move the job's cursor, in one commit.
        Call before spawning. Returns the row's id, for `finish`."""
        with self._transaction() as db:
            _move_cursors(db, [(job, cursor)])
            return _record_start(db, job, run_id, slot, attempt, started)

    def start_many(
        self, starts: Sequence[tuple[str, str, datetime]], started: datetime
    ) -> list[int]:
        """`start` for many first attempts (job, run id, slot) at once, in one commit:
        what one wake starts. Returns their row ids, in order."""
        with self._transaction() as db:
            _move_cursors(db, [(job, slot) for job, _, slot in starts])
            return [
                _record_start(db, job, run_id, slot, 1, started) for job, run_id, slot in starts
            ]

    def finish(
        self,
        row_id: int,
        *,
        job: str,
        run_id: str | None = None,
        finished: datetime,
        outcome: str,
        exit_code: int | None,
        duration_s: float,
        output: Sequence[str],
        keep: int | None = None,
    ) -> None:
        """Close an attempt's row and prune the job's history to `keep` rows (default:
        the store's `history`)."""
        with self._transaction() as db:
            changes_before = db.total_changes
            db.execute(
                "UPDATE attempts SET finished = ?, outcome = ?, exit_code = ?, "
                "duration_s = ?, output = ? WHERE id = ? AND run_id = coalesce(?, run_id) "
                "AND job = ?",
                (
                    _ts(finished),
                    outcome,
                    exit_code,
                    duration_s,
                    json.dumps(list(output)),
                    row_id,
                    run_id,
                    job,
                ),
            )
            if db.total_changes == changes_before:
                return  # the row is not there (the store was moved aside and started anew)
            finished_text = iso_utc(finished)
            db.execute(
                "UPDATE summary SET finished = ?, outcome = ?, exit_code = ?, duration_s = ? "
                "WHERE job = ? AND last_id = ?",
                (finished_text, outcome, exit_code, duration_s, job, row_id),
            )
            if outcome == "success":
                started = db.execute("SELECT run_id, started FROM attempts WHERE id = ?", (row_id,))
                run, began = started.fetchone()
                db.execute(
                    "UPDATE summary SET success_run_id = ?, success_started = ?, "
                    "success_finished = ?, success_duration_s = ? WHERE job = ?",
                    (run, iso_utc(datetime.fromtimestamp(began, UTC)), finished_text, duration_s,
                     job),
                )  # fmt: skip
            db.execute(
                "DELETE FROM attempts WHERE job = ? AND finished IS NOT NULL AND id <= "
                "(SELECT id FROM attempts WHERE job = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (job, job, self.history if keep is None else keep),
            )

    def close_lost(self, now: datetime) -> list[AttemptRow]:
        """Attempts left `started` by a daemon that died: closed as outcome `lost`."""
        with self._transaction() as db:
            rows = db.execute(_SELECT + " WHERE finished IS NULL ORDER BY id").fetchall()
            db.execute(
                "UPDATE attempts SET finished = ?, outcome = 'lost' WHERE finished IS NULL",
                (_ts(now),),
            )
            db.executemany(
                "UPDATE summary SET finished = ?, outcome = 'lost' WHERE last_id = ?",
                [(iso_utc(now), r[0]) for r in rows],
            )
        return _decoded(self.path, lambda: [AttemptRow.from_row(r) for r in rows])

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def publish_view(self, rows: Iterable[ViewRow], digest: str | None) -> None:
        """Make the view a freshly loaded file's jobs, in one commit. `digest`: the
        sha256 of the file's bytes (None: unknown, and no status will trust it).

        Only the rows that differ from the view's are written: a reload that changed one
        job writes one row, a restart on the same file only the next fires that moved
        (rewriting 10,000 rows held the loop for ~0.17 s at every reload)."""
        new = list(_values(rows))
        with self._transaction() as db:
            old = {row[0]: row for row in db.execute(f"SELECT {_VIEW_KEYS} FROM view")}  # noqa: S608
            db.executemany(
                "DELETE FROM view WHERE pos = ?",
                [(pos,) for pos, row in old.items() if pos >= len(new) or new[pos] != row],
            )
            db.executemany(
                _VIEW_INSERT.replace("{view}", "view"),
                [row for row in new if old.get(row[0]) != row],
            )
            db.execute("INSERT OR REPLACE INTO meta VALUES ('view_sha256', ?)", (digest or "",))

    def update_view(
        self,
        moved: Sequence[ViewRow],
        cursors: Sequence[tuple[str, datetime]] = (),
    ) -> None:
        """Next fires that moved, and cursors that moved with no run started, in one
        commit."""
        with self._transaction() as db:
            db.executemany(
                "UPDATE view SET next_at = ?, next_text = ?, next_local = ?, next_note = ? "
                "WHERE job = ?",
                [(r.next_at, r.next_text, r.next_local, r.next_note, r.job) for r in moved],
            )
            _move_cursors(db, cursors)


def _values(rows: Iterable[ViewRow]) -> Iterator[tuple[Any, ...]]:
    """View rows as `_VIEW_INSERT`'s parameters, numbered in order."""
    for i, r in enumerate(rows):
        yield (i, r.job, int(r.enabled), r.schedule, r.next_at, r.next_text, r.next_local,
               r.next_note)  # fmt: skip


def _move_cursors(db: sqlite3.Connection, cursors: Sequence[tuple[str, datetime]]) -> None:
    """Cursors forward, never back."""
    db.executemany(
        "INSERT INTO cursors VALUES (?, ?) ON CONFLICT(job) DO UPDATE SET "
        "cursor = max(cursor, excluded.cursor)",
        [(job, _ts(cursor)) for job, cursor in cursors],
    )


def _record_start(  # noqa: PLR0917  (the row's columns, in order)
    db: sqlite3.Connection, job: str, run_id: str, slot: datetime, attempt: int, started: datetime
) -> int:
    """An attempt's `started` row, and the job's summary showing it open."""
    row = db.execute(
        "INSERT INTO attempts (run_id, job, slot, attempt, started) VALUES (?, ?, ?, ?, ?)",
        (run_id, job, _ts(slot), attempt, _ts(started)),
    )
    assert row.lastrowid is not None
    _summary_started(db, job, row.lastrowid, run_id, slot, attempt, started)
    return row.lastrowid


def _summary_started(  # noqa: PLR0917  (the row's columns, in order)
    db: sqlite3.Connection,
    job: str,
    row_id: int,
    run_id: str,
    slot: datetime,
    attempt: int,
    started: datetime,
) -> None:
    """The job's summary now shows this attempt, open."""
    db.execute(
        "INSERT INTO summary (job, last_id, run_id, slot, attempt, started) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(job) DO UPDATE SET last_id = excluded.last_id, "
        "run_id = excluded.run_id, slot = excluded.slot, attempt = excluded.attempt, "
        "started = excluded.started, finished = NULL, outcome = NULL, exit_code = NULL, "
        "duration_s = NULL",
        (job, row_id, run_id, iso_utc(slot), attempt, iso_utc(started)),
    )


def _upgrade(db: sqlite3.Connection, path: Path) -> None:
    """Schema 1 (crond before the view held the summaries) -> 2: the view is derived data,
    rebuilt at every load, so it is dropped and made again (by `_SCHEMA`) empty. One way:
    an older crond refuses the upgraded store."""
    if _schema_of(db) not in _UPGRADABLE:
        return
    columns = {r[1] for r in db.execute("PRAGMA table_xinfo(summary)")}
    if not {"last_json", "success_json"} <= columns:  # a development build's schema 1
        raise StateError(
            f"{path}: written by a development build of crond (schema 1 without the "
            "summaries' JSON); move the file away to start a fresh store"
        )
    db.executescript(
        "BEGIN; DROP TABLE IF EXISTS view; UPDATE meta SET value = '2' WHERE key = 'schema'; "
        "UPDATE meta SET value = '' WHERE key = 'view_sha256'; COMMIT;"
    )


def _schema_of(db: sqlite3.Connection) -> str | None:
    """The schema a store says it has; None for a new file (no meta table, or no row)."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "meta" not in tables:
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    return None if row is None else str(row[0])


def _check_schema(db: sqlite3.Connection, path: Path, *, empty_ok: bool = False) -> None:
    """Refuse a store written by another version of crond's schema (a downgrade, or a file
    that is not crond's): reading it as ours could only go wrong. `empty_ok`: a file with
    no tables at all is a new store."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables and empty_ok:
        return
    if "meta" not in tables:
        raise StateError(f"{path}: not a crond state store (no meta table)")
    schema = _schema_of(db)
    if schema in _UPGRADABLE:  # only a reader gets here: see _upgrade
        raise StateError(
            f"{path}: written by an older crond (schema {schema}); the daemon upgrades it in "
            "place when it starts (history and cursors are kept): restart `crond run`"
        )
    if schema is not None and schema != str(SCHEMA_VERSION):
        raise StateError(
            f"{path}: written by another version of crond (schema {schema}, this one reads "
            f"{SCHEMA_VERSION}); give this daemon another state_dir or move the file away"
        )


def _decoded(path: Path, build: Callable[[], T]) -> T:
    """Rows turned into values; a row that does not decode is the store's fault."""
    try:
        return build()
    except (TypeError, ValueError, OverflowError, IndexError) as exc:
        raise StateError(f"{path}: unexpected data in the store ({exc})") from None


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def boot_id() -> str | None:
    """The kernel's id of this boot (changes at every boot), for `@reboot`."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


class StoreRecorder:
    """The runner's Recorder backed by a Store, or by nothing when the store is off or
    broken. A failing store never stops a run: the error is logged at most once per
    `quiet` seconds, and `degraded` says so (the liveness file reports it) until a write
    succeeds again. A write that finds the file corrupt asks for a reopen (`corrupt`),
    which the daemon does at its next heartbeat (moving the file aside)."""

    def __init__(
        self, store: Store | None, log: FilteringBoundLogger, clock: Clock, quiet: float = 10.0
    ) -> None:
        self.store = store
        self.log = log
        self.clock = clock
        self.quiet = quiet
        self.degraded = False
        self.corrupt = False
        self.history: dict[str, int] = {}  # job -> attempts kept; the store's default else
        self._prepared: dict[str, int] = {}  # run id -> its first attempt's row (`prepare`)
        self._logged_at: float | None = None

    def failed(self, exc: Exception, event: str = "state.write_failed") -> None:
        self.degraded = True
        if isinstance(exc, StateError) and exc.corrupt:
            self.corrupt = True
        now = self.clock.monotonic()
        if self._logged_at is None or now - self._logged_at >= self.quiet:
            self._logged_at = now
            self.log.error(event, error=str(exc))

    def _write(self, write: Callable[[Store], T]) -> T | None:
        """One write to the store, if there is one: its result, or None (logged, and the
        store marked degraded) when it failed. A write that works ends a degraded spell."""
        if self.store is None:
            return None
        try:
            result = write(self.store)
        except StateError as exc:
            self.failed(exc)
            return None
        if self.degraded:
            self.degraded = False
            self.log.info("state.recovered")
        return result

    def prepare(
        self, starts: Sequence[tuple[str, str, datetime]], *, started: datetime | None = None
    ) -> None:
        """Record the first attempts of a wake's runs (job, run id, slot) in one commit,
        before any of them is spawned, as started at `started` (default: now); each run's
        `started` then finds its row."""
        if not starts:
            return
        at = started or self.clock.now()
        ids = self._write(lambda store: store.start_many(starts, at))
        for (_, run_id, _), row_id in zip(starts, ids or [], strict=False):
            self._prepared[run_id] = row_id

    def started(self, run: Run, attempt: int) -> object:
        if attempt == 1 and self._prepared:
            prepared = self._prepared.pop(run.run_id, None)
            if prepared is not None:
                return prepared
        return self._write(
            lambda store: store.start(
                run.job,
                run_id=run.run_id,
                slot=run.slot,
                attempt=attempt,
                started=self.clock.now(),
                cursor=run.slot,
            )
        )

    def finished(self, token: object, run: Run, result: RunResult, tail: Sequence[str]) -> None:
        if not isinstance(token, int):
            return
        self._write(
            lambda store: store.finish(
                token,
                job=run.job,
                run_id=run.run_id,
                finished=self.clock.now(),
                outcome=result.outcome.value,
                exit_code=result.exit_code,
                duration_s=result.duration_s,
                output=tail,
                keep=self.history.get(run.job),
            )
        )

    def publish_view(self, rows: Iterable[ViewRow], digest: str | None) -> None:
        self._write(lambda store: store.publish_view(rows, digest))

    def update_view(
        self, moved: Sequence[ViewRow], cursors: Sequence[tuple[str, datetime]]
    ) -> None:
        """After a wake: next fires that moved, and cursors that moved with no run started
        (slots missed or skipped: a restart must not take them for downtime)."""
        if moved or cursors:
            self._write(lambda store: store.update_view(moved, cursors))

    def mark(self, key: str, value: str) -> None:
        self._write(lambda store: store.set_meta(key, value))
