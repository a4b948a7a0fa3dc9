"""The state store in one SQLite file (WAL mode): the daemon's writes.

A slot's `started` row and the job's cursor are committed in one transaction before the
child is spawned, so a slot is started at most once even across a crash or `kill -9` of
the daemon; a run found `started` by the next daemon is closed as `lost`, never re-run.
Every SQLite error becomes a StateError (marked `corrupt` when the file is damaged); what
the daemon then does about it is its own policy (crond/daemon/stores.py).

The schema and its upgrades are crond/store/schema.py; the reads, and the store opened
read-only, crond/store/sqlite_read.py; the writes of runs, and the transaction every write
is, crond/store/sqlite_write.py; the lock and the files, crond/store/files.py. Here,
opening it, the heartbeat's upkeep, the marks, the outbox, the pauses and the view.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from crond.store import files, schema
from crond.store.base import OutboxRow, PauseRow, StateError, ViewRow
from crond.store.files import DB_NAME, LOCK_NAME
from crond.store.sqlite_backfills import Backfills
from crond.store.sqlite_read import Reader, decoded, failure, is_corrupt
from crond.store.sqlite_write import move_cursors

__all__ = ["DB_NAME", "LOCK_NAME", "Reader", "SqliteStore"]

# Commits between checkpoints: a few pages each, so the WAL stays around a megabyte.
_CHECKPOINT_EVERY = 200
_VIEW_KEYS = "pos, job, enabled, schedule, next_at, next_text, next_local, next_note"


class SqliteStore(Backfills):
    """One SQLite file, opened by the daemon. Not thread-safe: use it from the event
    loop's thread."""

    def __init__(self, directory: Path, *, history: int = 100, aside: bool = False) -> None:
        """Open (or create, or upgrade) the store in `directory`, locked for this process:
        two daemons on one store would close each other's runs as lost and share cursors.
        `aside`: the file is known to be damaged (a write said so): move it aside first."""
        schema.check_sqlite()
        self.directory = directory
        self.path = directory / DB_NAME
        self.history = history
        self.moved_aside: str | None = None
        self._commits = 0  # since the last checkpoint
        self._lock = files.take_lock(directory)
        try:
            if aside and self.path.exists():
                self.moved_aside = str(files.move_aside(self.path))
            self._db = self._open()
        except BaseException:
            os.close(self._lock)
            raise

    # --- opening --------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            return _connect(self.path)
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc) or not self.path.exists():
                raise failure(self.path, exc) from None
        self.moved_aside = str(files.move_aside(self.path))  # keep the evidence, start afresh
        try:
            return _connect(self.path)
        except sqlite3.DatabaseError as exc:
            raise failure(self.path, exc) from None

    def close(self) -> None:
        self._db.close()
        os.close(self._lock)

    # --- the heartbeat's -------------------------------------------------------------

    def check_in_place(self) -> None:
        files.check_lock_in_place(self.directory, self._lock)

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
            raise failure(self.path, exc) from None
        self.set_meta("checkpointed", str(self._commits))
        self._commits = 0

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # --- notifications not yet delivered ---------------------------------------------

    def outbox_add(self, rows: Sequence[OutboxRow]) -> list[int]:
        with self._transaction() as db:
            ids = []
            for r in rows:
                cursor = db.execute(
                    "INSERT INTO outbox (kind, notifier, job, event, body, created) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (r.kind, r.notifier, r.job, r.event, r.body, r.created),
                )
                assert cursor.lastrowid is not None
                ids.append(cursor.lastrowid)
            return ids

    def outbox_pending(self, limit: int) -> list[OutboxRow]:
        rows = self._all(
            "SELECT id, kind, notifier, job, event, body, created FROM outbox ORDER BY id LIMIT ?",
            (limit,),
        )
        return decoded(self.path, lambda: [OutboxRow(*row) for row in rows])

    def outbox_done(self, ids: Sequence[int]) -> None:
        with self._transaction() as db:
            db.executemany("DELETE FROM outbox WHERE id = ?", [(i,) for i in ids])

    # --- pauses (crond pause, resume) -----------------------------------------------

    def set_pause(self, row: PauseRow) -> None:
        until = None if row.until is None else row.until.timestamp()
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO pauses (job, since, until, note, who) "
                "VALUES (?, ?, ?, ?, ?)",
                (row.job, row.since.timestamp(), until, row.note, row.by),
            )

    def clear_pause(self, job: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM pauses WHERE job = ?", (job,))

    # --- the view -------------------------------------------------------------------

    def publish_view(self, rows: Iterable[ViewRow], digest: str | None) -> None:
        """Only the rows that differ from the view's are written: a reload that changed one
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
                f"INSERT INTO view ({_VIEW_KEYS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                [row for row in new if old.get(row[0]) != row],
            )
            db.execute("INSERT OR REPLACE INTO meta VALUES ('view_sha256', ?)", (digest or "",))

    def update_view(
        self,
        moved: Sequence[ViewRow],
        cursors: Sequence[tuple[str, datetime]] = (),
        first: Sequence[tuple[str, datetime]] = (),
    ) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO cursors VALUES (?, ?)",
                [(job, at.timestamp()) for job, at in first],
            )
            db.executemany(
                "UPDATE view SET next_at = ?, next_text = ?, next_local = ?, next_note = ? "
                "WHERE job = ?",
                [(r.next_at, r.next_text, r.next_local, r.next_note, r.job) for r in moved],
            )
            move_cursors(db, cursors)

    def set_pauses(self, rows: Sequence[PauseRow]) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO pauses (job, since, until, note, who) "
                "VALUES (?, ?, ?, ?, ?)",
                [(r.job, r.since.timestamp(), None if r.until is None else r.until.timestamp(),
                  r.note, r.by) for r in rows],
            )  # fmt: skip

    def clear_pauses(self, jobs: Sequence[str]) -> None:
        with self._transaction() as db:
            db.executemany("DELETE FROM pauses WHERE job = ?", [(job,) for job in jobs])


def _connect(path: Path) -> sqlite3.Connection:
    """The store's file opened for the daemon (created, or upgraded, as needed)."""
    db = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        # NORMAL: a commit survives a crash of crond (the WAL is in the OS's hands), not a
        # power cut; FULL would cost an fsync on the start path of every run.
        db.execute("PRAGMA synchronous=NORMAL")
        # Checkpoints are the heartbeat's (`Store.checkpoint`), not the start path's: SQLite
        # would otherwise copy the WAL back inside whichever commit crossed 1,000 pages.
        db.execute("PRAGMA wal_autocheckpoint=0")
        schema.upgrade(db, path)
        schema.check(db, path, empty_ok=True)
        schema.create(db)
        # No `PRAGMA quick_check`: it reads every page (~0.6 s for a million rows) at every
        # start. A file that is not a database fails above; damage deeper in fails the
        # write that meets it, and the daemon then reopens it (moving it aside).
    except (sqlite3.DatabaseError, StateError):
        db.close()
        raise
    return db


def _values(rows: Iterable[ViewRow]) -> Iterator[tuple[Any, ...]]:
    """View rows as the view table's rows, numbered in order."""
    for i, r in enumerate(rows):
        yield (i, r.job, int(r.enabled), r.schedule, r.next_at, r.next_text, r.next_local,
               r.next_note)  # fmt: skip
