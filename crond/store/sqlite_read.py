"""Reading the SQLite store: the queries of `crond status` and `crond history`, and the
store opened read-only for them while the daemon writes (WAL: readers never block the
writer, nor it them). Rows become the plain values of crond/store/base.py here; what is
printed of them is crond/status.py's.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from crond.store import schema
from crond.store.base import (
    EVERY,
    FAILED_OUTCOMES,
    AttemptRow,
    Only,
    PauseRow,
    StateError,
    StatusRow,
    Summary,
)
from crond.store.files import DB_NAME, check_directory
from crond.store.rows import BackfillRow, backfill_of

T = TypeVar("T")

ATTEMPTS = (
    "SELECT id, run_id, job, slot, attempt, started, finished, outcome, exit_code, duration_s, "
    "output, kind FROM attempts"
)
# A store no daemon of this version opened yet has no `kind` (crond/store/schema.py):
# its runs are all of no kind.
_ATTEMPTS_BEFORE_KIND = ATTEMPTS.replace(", kind FROM", ", NULL FROM")
_SUMMARIES = (
    "SELECT job, run_id, slot, attempt, started, finished, outcome, exit_code, duration_s, "
    "success_run_id, success_started, success_finished, success_duration_s FROM summary"
)
# Each job of the daemon's view, in the file's order, with its summary: a scan of the view
# (its rowid is the file's order) and one lookup a job in the summary's key.
_STATUS = """
SELECT v.job, v.enabled, v.schedule, v.next_text, v.next_local, v.next_note,
    s.run_id, s.slot, s.attempt, s.started, s.finished, s.outcome, s.exit_code, s.duration_s,
    s.success_run_id, s.success_started, s.success_finished, s.success_duration_s
FROM view v LEFT JOIN summary s ON s.job = v.job ORDER BY v.pos
"""
PAUSES = "SELECT job, since, until, note, who FROM pauses"


def failure(path: Path, exc: sqlite3.Error) -> StateError:
    """SQLite's error as the store's, marked `corrupt` when the file is damaged."""
    corrupt = isinstance(exc, sqlite3.DatabaseError) and is_corrupt(exc)
    return StateError(f"{path}: {exc}", corrupt=corrupt)


def is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def decoded(path: Path, build: Callable[[], T]) -> T:
    """Rows turned into values; a row that does not decode is the store's fault."""
    try:
        return build()
    except (TypeError, ValueError, OverflowError, IndexError) as exc:
        raise StateError(f"{path}: unexpected data in the store ({exc})") from None


def pause_of(row: Sequence[Any]) -> PauseRow:
    """A `pauses` row (as `PAUSES` selects it) as a value."""
    until = None if row[2] is None else datetime.fromtimestamp(row[2], UTC)
    return PauseRow(str(row[0]), datetime.fromtimestamp(row[1], UTC), until, row[3], str(row[4]))


def attempt_of(row: Sequence[Any]) -> AttemptRow:
    """An `attempts` row (as `ATTEMPTS` selects it) as a value."""
    finished = None if row[6] is None else datetime.fromtimestamp(row[6], UTC)
    return AttemptRow(
        id=row[0],
        run_id=row[1],
        job=row[2],
        slot=datetime.fromtimestamp(row[3], UTC),
        attempt=row[4],
        started=datetime.fromtimestamp(row[5], UTC),
        finished=finished,
        outcome=row[7],
        exit_code=row[8],
        duration_s=row[9],
        output=json.loads(row[10]) if row[10] else [],
        kind=row[11],
    )


class Reads:
    """The reads of `crond status` and `crond history`, on either connection (the daemon
    itself makes only `get_meta`)."""

    _db: sqlite3.Connection
    path: Path
    _attempts = ATTEMPTS  # the query of attempts (a Reader of an older store: without kind)

    @property
    def location(self) -> str:
        return str(self.path)

    def _all(self, query: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self._db.execute(query, params).fetchall()
        except sqlite3.Error as exc:
            raise failure(self.path, exc) from None

    def get_meta(self, key: str) -> str | None:
        rows = self._all("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def metas(self, prefix: str) -> dict[str, str]:
        rows = self._all(
            "SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
        )
        return {str(key): str(value) for key, value in rows}

    def last(self, job: str, *, outcome: str | None = None) -> AttemptRow | None:
        query = self._attempts + " WHERE job = ?"
        params: tuple[Any, ...] = (job,)
        if outcome is not None:
            query += " AND outcome = ?"
            params += (outcome,)
        rows = self._all(query + " ORDER BY id DESC LIMIT 1", params)
        return decoded(self.path, lambda: attempt_of(rows[0]) if rows else None)

    def recent(self, job: str | None, limit: int, only: Only = EVERY) -> list[AttemptRow]:
        where, params = _where(job, only)
        rows = self._all(self._attempts + where + " ORDER BY id DESC LIMIT ?", (*params, limit))
        return decoded(self.path, lambda: [attempt_of(r) for r in reversed(rows)])

    def run_counts(self) -> dict[str, int]:
        """Each job's scheduled runs so far (`max_runs`); none in a store a daemon older
        than the table has not opened since."""
        known = self._all("SELECT 1 FROM sqlite_master WHERE name = 'run_counts'")
        rows = self._all("SELECT job, runs FROM run_counts") if known else []
        return decoded(self.path, lambda: {str(job): int(runs) for job, runs in rows})

    def summaries(self) -> dict[str, Summary]:
        rows = self._all(_SUMMARIES)
        return decoded(self.path, lambda: {r[0]: Summary._make(r) for r in rows})

    def status_rows(self) -> list[StatusRow]:
        rows = self._all(_STATUS)
        return decoded(self.path, lambda: list(map(StatusRow._make, rows)))

    def view_is_behind(self, oldest: float) -> bool:
        return bool(self._all("SELECT 1 FROM view WHERE next_at < ? LIMIT 1", (oldest,)))

    def pauses(self) -> dict[str, PauseRow]:
        try:
            rows = self._db.execute(PAUSES).fetchall()
        except sqlite3.OperationalError as exc:
            # A store no daemon of this version has opened yet (a reader never creates
            # tables): it has no pauses to show.
            if "no such table" in str(exc):
                return {}
            raise failure(self.path, exc) from None
        except sqlite3.Error as exc:
            raise failure(self.path, exc) from None
        return decoded(self.path, lambda: {r[0]: pause_of(r) for r in rows})

    def backfills(self, *, going: bool) -> list[BackfillRow]:
        """The backfills kept, oldest first (`going`: the running ones); none in a store
        no daemon of this version opened yet."""
        if not self._all("SELECT 1 FROM sqlite_master WHERE name = 'backfills'"):
            return []
        where = " WHERE state = 'running'" if going else ""
        rows = self._all(BACKFILLS + where + " ORDER BY created")
        return decoded(self.path, lambda: [backfill_of(r, _utc) for r in rows])


BACKFILLS = (
    "SELECT id, job, range_from, range_to, total, started, last_slot, next_slot, succeeded, "
    "failed, state, created, ended, who FROM backfills"
)


def _utc(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def _where(job: str | None, only: Only) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause of `recent` (a job's attempts: through its index; a run's: a
    scan of the history kept, docs/state.md)."""
    terms: list[str] = []
    params: list[Any] = []
    if job is not None:
        terms.append("job = ?")
        params.append(job)
    if only.failed:
        terms.append(f"outcome IN ({', '.join('?' * len(FAILED_OUTCOMES))})")
        params.extend(FAILED_OUTCOMES)
    if only.since is not None:
        terms.append("started >= ?")
        params.append(only.since.timestamp())
    if only.run_id is not None:
        terms.append("run_id = ?")
        params.append(only.run_id)
    return (" WHERE " + " AND ".join(terms) if terms else ""), tuple(params)


class Reader(Reads):
    """The store opened read-only, for `crond status` and `crond history`."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / DB_NAME
        schema.check_sqlite()
        check_directory(directory)  # as root, SQLite may create the -shm file there
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
                raise failure(self.path, exc) from None
            try:
                self._db = self._connect("mode=ro&immutable=1")
            except sqlite3.Error as again:
                raise StateError(f"{self.path}: {again}") from None

    def _connect(self, flags: str) -> sqlite3.Connection:
        db = sqlite3.connect(f"file:{self.path}?{flags}", uri=True, timeout=5.0)
        try:
            schema.check(db, self.path)
            db.execute("SELECT 1 FROM summary LIMIT 1").fetchall()
            if not schema.has_kind(db):
                self._attempts = _ATTEMPTS_BEFORE_KIND
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        self._db.close()
