"""The SQLite store's writes of runs (base.RunRecords): a run's start, committed with the
job's cursor before the spawn; its finish and the history kept; the runs a dead daemon
left open. And the transaction every write of the store is. crond/store/sqlite.py is the
store these are part of; docs/state.md what it keeps.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from crond.clock import iso_utc
from crond.store.base import AttemptRow, Claim, Claimed, StateError
from crond.store.rows import Chained
from crond.store.sqlite_read import ATTEMPTS, Reads, attempt_of, decoded, failure


class Writes(Reads):
    """The daemon's connection written: every write one commit, counted for the
    heartbeat's checkpoint (crond/store/sqlite.py)."""

    _commits: int  # since the last checkpoint (SqliteStore's)

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
                raise failure(self.path, exc) from None
            if isinstance(exc, (TypeError, ValueError, OverflowError)):
                raise StateError(f"{self.path}: unexpected data ({exc})") from None
            raise


class Runs(Writes):
    """The daemon's runs recorded: base.Store's writes of attempts and cursors."""

    history: int  # the attempts kept a job (SqliteStore's)

    def cursors(self) -> dict[str, datetime]:
        rows = self._all("SELECT job, cursor FROM cursors")
        return decoded(self.path, lambda: {job: datetime.fromtimestamp(c, UTC) for job, c in rows})

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
        with self._transaction() as db:
            move_cursors(db, [(job, cursor)])
            return _record_start(db, job, run_id, slot, attempt, started)

    def start_many(
        self,
        starts: Sequence[tuple[str, str, datetime]],
        started: datetime,
        limits: Mapping[str, int] | None = None,
        *,
        chained: Sequence[tuple[str, str]] = (),
        backfills: Mapping[str, str] | None = None,
    ) -> list[int]:
        """(`chained`: the chained starts among them, (job, parent's run id): their
        records go in the same commit. `backfills`: the backfills' starts among them, run
        id -> backfill id: marked `backfill`, and their backfills' progress moved in the
        same commit.)"""
        marked = backfills or {}
        with self._transaction() as db:
            move_cursors(db, [(job, slot) for job, _, slot in starts])
            if chained:
                db.executemany("DELETE FROM chained WHERE job = ? AND parent_run_id = ?", chained)
            if limits:
                counted = [(job,) for job, _, _ in starts if job in limits]
                db.executemany(_COUNT, counted)
            if marked:
                db.executemany(
                    "UPDATE backfills SET started = started + 1, last_slot = ?1, next_slot = ?1 "
                    "WHERE id = ?2",
                    [(slot.timestamp(), marked[rid]) for _, rid, slot in starts if rid in marked],
                )
            return [
                _record_start(db, job, rid, slot, 1, started, "backfill" if rid in marked else None)
                for job, rid, slot in starts
            ]

    def claim(
        self,
        starts: Sequence[tuple[str, str, datetime]],
        told: Sequence[tuple[str, datetime]],
        started: datetime,
        *,
        copies: Sequence[str] | None = None,
        exclusive: Collection[str] = (),  # noqa: ARG002  (the Protocol's: nothing is busy)
        replacing: Collection[str] = (),  # noqa: ARG002  (its daemon's runs are all its own)
        limits: Mapping[str, int] | None = None,
        locks: Mapping[str, Sequence[tuple[str, int]]] | None = None,  # noqa: ARG002  (its planner's)
    ) -> Claimed:
        """`start_many`: one daemon a store (it is locked), so no claim is ever lost (and
        its daemon's planner knows its runs: none is BUSY here); every slot is its own to
        tell of."""
        if copies is not None and len(copies) != len(starts):
            raise ValueError("claim: one copy a start")
        ids: list[Claim] = list(self.start_many(starts, started, limits)) if starts else []
        return Claimed(ids, [True] * len(told))

    def claim_many(
        self, starts: Sequence[tuple[str, str, datetime]], started: datetime, **kw: Any
    ) -> list[Claim]:
        """`claim` of starts alone."""
        return self.claim(starts, (), started, **kw).starts

    def claim_only(self, slots: Sequence[tuple[str, datetime]], claimed: datetime) -> list[bool]:
        """`claim` of told slots alone."""
        return self.claim((), slots, claimed).told

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
        chained: Sequence[Chained] = (),
    ) -> None:
        with self._transaction() as db:
            if chained:  # the runs this end starts: in its commit (docs/workflows.md)
                db.executemany(
                    "INSERT OR IGNORE INTO chained VALUES (?, ?, ?, ?, ?, ?)",
                    [(c.job, c.parent_run_id, c.parent_job, c.outcome, c.exit_code,
                      c.slot.timestamp()) for c in chained],
                )  # fmt: skip
            changes_before = db.total_changes
            db.execute(
                "UPDATE attempts SET finished = ?, outcome = ?, exit_code = ?, duration_s = ?, "
                "output = ? WHERE id = ? AND run_id = coalesce(?, run_id) AND job = ?",
                (finished.timestamp(), outcome, exit_code, duration_s, json.dumps(list(output)),
                 row_id, run_id, job),
            )  # fmt: skip
            if db.total_changes == changes_before:
                return  # the row is not there (the store was moved aside and started anew)
            _summary_finished(db, row_id, job, iso_utc(finished), outcome, exit_code, duration_s)
            db.execute(
                "DELETE FROM attempts WHERE job = ? AND finished IS NOT NULL AND id <= "
                "(SELECT id FROM attempts WHERE job = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (job, job, self.history if keep is None else keep),
            )

    def end(
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
        chained: Sequence[Chained] = (),
        release: bool = False,  # noqa: ARG002  (a lone daemon's locks are its planner's)
    ) -> datetime | None:
        """`finish`: a lone daemon's lost attempts are a dead process's, never ended late."""
        self.finish(
            row_id,
            job=job,
            run_id=run_id,
            finished=finished,
            outcome=outcome,
            exit_code=exit_code,
            duration_s=duration_s,
            output=output,
            keep=keep,
            chained=chained,
        )
        return None

    def pending_chained(self) -> list[Chained]:
        """The chained runs recorded and not yet started, oldest parent slot first."""
        rows = self._all(
            "SELECT job, parent_job, parent_run_id, outcome, exit_code, slot FROM chained "
            "ORDER BY slot, rowid"
        )
        return decoded(
            self.path,
            lambda: [
                Chained(job, parent_job, run_id, outcome, code, datetime.fromtimestamp(slot, UTC))
                for job, parent_job, run_id, outcome, code, slot in rows
            ],
        )

    def drop_chained(self, keys: Sequence[tuple[str, str]]) -> None:
        """Chained runs that will not start (skipped, their job gone), (job, run id) each."""
        with self._transaction() as db:
            db.executemany("DELETE FROM chained WHERE job = ? AND parent_run_id = ?", keys)

    def close_lost(self, now: datetime) -> list[AttemptRow]:
        with self._transaction() as db:
            rows = db.execute(ATTEMPTS + " WHERE finished IS NULL ORDER BY id").fetchall()
            db.execute(
                "UPDATE attempts SET finished = ?, outcome = 'lost' WHERE finished IS NULL",
                (now.timestamp(),),
            )
            db.executemany(
                "UPDATE summary SET finished = ?, outcome = 'lost' WHERE last_id = ?",
                [(iso_utc(now), r[0]) for r in rows],
            )
        return decoded(self.path, lambda: [attempt_of(r) for r in rows])


# One more scheduled run of a job with `max_runs` (docs/schedules.md).
_COUNT = "INSERT INTO run_counts VALUES (?, 1) ON CONFLICT(job) DO UPDATE SET runs = runs + 1"


def move_cursors(db: sqlite3.Connection, cursors: Sequence[tuple[str, datetime]]) -> None:
    """Cursors forward, never back."""
    db.executemany(
        "INSERT INTO cursors VALUES (?, ?) ON CONFLICT(job) DO UPDATE SET "
        "cursor = max(cursor, excluded.cursor)",
        [(job, cursor.timestamp()) for job, cursor in cursors],
    )


def _record_start(  # noqa: PLR0917  (the row's columns, in order)
    db: sqlite3.Connection,
    job: str,
    run_id: str,
    slot: datetime,
    attempt: int,
    started: datetime,
    kind: str | None = None,
) -> int:
    """An attempt's `started` row, and the job's summary showing it open. A later attempt
    is of the same kind as its run's first."""
    if attempt > 1 and kind is None:
        first = db.execute(
            "SELECT kind FROM attempts WHERE run_id = ? AND attempt = 1", (run_id,)
        ).fetchone()
        kind = None if first is None else first[0]
    row = db.execute(
        "INSERT INTO attempts (run_id, job, slot, attempt, started, kind) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, job, slot.timestamp(), attempt, started.timestamp(), kind),
    )
    assert row.lastrowid is not None
    db.execute(
        "INSERT INTO summary (job, last_id, run_id, slot, attempt, started) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(job) DO UPDATE SET last_id = excluded.last_id, "
        "run_id = excluded.run_id, slot = excluded.slot, attempt = excluded.attempt, "
        "started = excluded.started, finished = NULL, outcome = NULL, exit_code = NULL, "
        "duration_s = NULL",
        (job, row.lastrowid, run_id, iso_utc(slot), attempt, iso_utc(started)),
    )
    return row.lastrowid


def _summary_finished(  # noqa: PLR0917  (the row's columns, in order)
    db: sqlite3.Connection,
    row_id: int,
    job: str,
    finished: str,
    outcome: str,
    exit_code: int | None,
    duration_s: float,
) -> None:
    """The job's summary shows its newest attempt finished (if it still is the newest),
    and a success as its last success."""
    db.execute(
        "UPDATE summary SET finished = ?, outcome = ?, exit_code = ?, duration_s = ? "
        "WHERE job = ? AND last_id = ?",
        (finished, outcome, exit_code, duration_s, job, row_id),
    )
    if outcome != "success":
        return
    run_id, began = db.execute(
        "SELECT run_id, started FROM attempts WHERE id = ?", (row_id,)
    ).fetchone()
    db.execute(
        "UPDATE summary SET success_run_id = ?, success_started = ?, success_finished = ?, "
        "success_duration_s = ? WHERE job = ?",
        (run_id, iso_utc(datetime.fromtimestamp(began, UTC)), finished, duration_s, job),
    )
