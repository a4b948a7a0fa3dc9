"""The SQLite store's backfills written (base.BackfillRecords; `crond backfill`,
docs/schedules.md): a row each, its progress moved with each slot's start
(crond/store/sqlite_write.py's `start_many`), its tallies as runs end, its end. Read in
crond/store/sqlite_read.py.
"""

from __future__ import annotations

from datetime import datetime

from crond.store.rows import BackfillRow
from crond.store.sqlite_write import Writes


class Backfills(Writes):
    """The backfills written, each one commit."""

    def backfill_add(self, row: BackfillRow) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO backfills (id, job, range_from, range_to, total, started, "
                "last_slot, succeeded, failed, state, created, ended, who) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.id, row.job, row.range_from.timestamp(), row.range_to.timestamp(),
                    row.total, row.started, None if row.last_slot is None else
                    row.last_slot.timestamp(), row.succeeded, row.failed, row.state,
                    row.created.timestamp(), None, row.who,
                ),
            )  # fmt: skip

    def backfill_tally(self, backfill_id: str, succeeded: int, failed: int) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE backfills SET succeeded = ?, failed = ? WHERE id = ?",
                (succeeded, failed, backfill_id),
            )

    def backfill_end(self, backfill_id: str, state: str, ended: datetime) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE backfills SET state = ?, ended = ? WHERE id = ? AND state = 'running'",
                (state, ended.timestamp(), backfill_id),
            )
