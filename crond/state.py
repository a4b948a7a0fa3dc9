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
import json
import os
import secrets
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crond.clock import iso_utc

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from crond.clock import Clock
    from crond.runner import Run, RunResult

SCHEMA_VERSION = 1
DB_NAME = "crond.sqlite3"
_SCHEMA = """
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
"""


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
    """The store could not do what was asked; the message says why."""


class Store:
    """One SQLite file. Not thread-safe: use it from the event loop's thread."""

    def __init__(self, directory: Path, *, history: int = 100) -> None:
        self.directory = directory
        self.path = directory / DB_NAME
        self.history = history
        self.moved_aside: Path | None = None
        self._db = self._open()

    # --- opening --------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            return self._connect()
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc) or not self.path.exists():
                raise StateError(f"{self.path}: {exc}") from None
        # Corrupt: keep the evidence, start afresh.
        aside = self.path.with_name(f"{DB_NAME}.corrupt-{secrets.token_hex(4)}")
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                Path(f"{self.path}{suffix}").rename(f"{aside}{suffix}")
        self.moved_aside = aside
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{self.path}: {exc}") from None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL: a commit survives a crash of crond (the WAL is in the OS's hands),
            # not a power cut; FULL would cost an fsync on the start path of every run.
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            db.execute("PRAGMA quick_check").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def close(self) -> None:
        self._db.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StateError(f"{self.path}: {exc}") from None

    # --- the daemon's writes --------------------------------------------------------

    def cursors(self) -> dict[str, datetime]:
        try:
            rows = self._db.execute("SELECT job, cursor FROM cursors").fetchall()
        except sqlite3.Error as exc:
            raise StateError(f"{self.path}: {exc}") from None
        return {job: datetime.fromtimestamp(c, UTC) for job, c in rows}

    def save_cursor(self, job: str, cursor: datetime) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO cursors VALUES (?, ?) ON CONFLICT(job) DO UPDATE SET "
                "cursor = max(cursor, excluded.cursor)",
                (job, _ts(cursor)),
            )

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
            db.execute(
                "INSERT INTO cursors VALUES (?, ?) ON CONFLICT(job) DO UPDATE SET "
                "cursor = max(cursor, excluded.cursor)",
                (job, _ts(cursor)),
            )
            row = db.execute(
                "INSERT INTO attempts (run_id, job, slot, attempt, started) VALUES (?, ?, ?, ?, ?)",
                (run_id, job, _ts(slot), attempt, _ts(started)),
            )
            assert row.lastrowid is not None
            return row.lastrowid

    def finish(
        self,
        row_id: int,
        *,
        job: str,
        finished: datetime,
        outcome: str,
        exit_code: int | None,
        duration_s: float,
        output: Sequence[str],
    ) -> None:
        """Close an attempt's row and prune the job's history to `history` rows."""
        with self._transaction() as db:
            db.execute(
                "UPDATE attempts SET finished = ?, outcome = ?, exit_code = ?, "
                "duration_s = ?, output = ? WHERE id = ?",
                (_ts(finished), outcome, exit_code, duration_s, json.dumps(list(output)), row_id),
            )
            db.execute(
                "DELETE FROM attempts WHERE job = ? AND finished IS NOT NULL AND id <= "
                "(SELECT id FROM attempts WHERE job = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (job, job, self.history),
            )

    def close_lost(self, now: datetime) -> list[AttemptRow]:
        """Attempts left `started` by a daemon that died: closed as outcome `lost`."""
        with self._transaction() as db:
            rows = db.execute(_SELECT + " WHERE finished IS NULL ORDER BY id").fetchall()
            db.execute(
                "UPDATE attempts SET finished = ?, outcome = 'lost' WHERE finished IS NULL",
                (_ts(now),),
            )
        return [AttemptRow.from_row(r) for r in rows]

    def get_meta(self, key: str) -> str | None:
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            raise StateError(f"{self.path}: {exc}") from None
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # --- reading, for `crond status` and `crond history` ----------------------------

    def last(self, job: str, *, outcome: str | None = None) -> AttemptRow | None:
        query = _SELECT + " WHERE job = ?"
        params: tuple[Any, ...] = (job,)
        if outcome is not None:
            query += " AND outcome = ?"
            params += (outcome,)
        row = self._db.execute(query + " ORDER BY id DESC LIMIT 1", params).fetchone()
        return None if row is None else AttemptRow.from_row(row)

    def recent(self, job: str | None, limit: int) -> list[AttemptRow]:
        if job is None:
            rows = self._db.execute(_SELECT + " ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        else:
            rows = self._db.execute(
                _SELECT + " WHERE job = ? ORDER BY id DESC LIMIT ?",
                (job, limit),
            ).fetchall()
        return [AttemptRow.from_row(r) for r in reversed(rows)]


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
    `quiet` seconds, and `degraded` says so (the liveness file reports it)."""

    def __init__(
        self, store: Store | None, log: FilteringBoundLogger, clock: Clock, quiet: float = 10.0
    ) -> None:
        self.store = store
        self.log = log
        self.clock = clock
        self.quiet = quiet
        self.degraded = False
        self._logged_at: float | None = None

    def failed(self, exc: Exception) -> None:
        self.degraded = True
        now = self.clock.monotonic()
        if self._logged_at is None or now - self._logged_at >= self.quiet:
            self._logged_at = now
            self.log.error("state.write_failed", error=str(exc))

    def started(self, run: Run, attempt: int) -> object:
        if self.store is None:
            return None
        try:
            return self.store.start(
                run.job,
                run_id=run.run_id,
                slot=run.slot,
                attempt=attempt,
                started=self.clock.now(),
                cursor=run.slot,
            )
        except StateError as exc:
            self.failed(exc)
            return None

    def finished(self, token: object, run: Run, result: RunResult, tail: Sequence[str]) -> None:
        if self.store is None or not isinstance(token, int):
            return
        try:
            self.store.finish(
                token,
                job=run.job,
                finished=self.clock.now(),
                outcome=result.outcome.value,
                exit_code=result.exit_code,
                duration_s=result.duration_s,
                output=tail,
            )
        except StateError as exc:
            self.failed(exc)
