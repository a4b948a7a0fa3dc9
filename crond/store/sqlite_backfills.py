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
        """A new backfill (nothing of it started yet: `row`'s range, total, next slot)."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO backfills (id, job, range_from, range_to, total, started, "
                "next_slot, succeeded, failed, state, created, who) "
                "VALUES (?, ?, ?, ?, ?, 0, ?, 0, 0, 'running', ?, ?)",
                (
                    row.id, row.job, row.range_from.timestamp(), row.range_to.timestamp(),
                    row.total, _ts(row.next_slot), row.created.timestamp(), row.who,
                ),
            )  # fmt: skip

    def backfill_tally(
        self, backfill_id: str, succeeded: int, failed: int, next_slot: datetime | None
    ) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE backfills SET succeeded = ?, failed = ?, next_slot = ? WHERE id = ?",
                (succeeded, failed, _ts(next_slot), backfill_id),
            )

    def backfill_end(self, backfill_id: str, state: str, ended: datetime) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE backfills SET state = ?, ended = ? WHERE id = ? AND state = 'running'",
                (state, ended.timestamp(), backfill_id),
            )


def _ts(when: datetime | None) -> float | None:
    return None if when is None else when.timestamp()
