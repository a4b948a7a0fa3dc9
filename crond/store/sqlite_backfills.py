"""The SQLite store's backfills written (base.BackfillRecords; `crond backfill`,
docs/schedules.md): a row each, its progress moved with each slot's start
(crond/store/sqlite_write.py's `start_many`), its tallies as runs end, its end. Read in
crond/store/sqlite_read.py.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from crond.store.rows import BackfillRow, Claim, Start
from crond.store.sqlite_write import Runs


class Backfills(Runs):
    """The backfills written, each one commit."""

    def backfill_add(self, row: BackfillRow) -> bool:
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
        return True

    def backfill_counted(self, backfill_id: str, success: bool, next_slot: datetime | None) -> None:
        column = "succeeded" if success else "failed"
        with self._transaction() as db:
            db.execute(
                f"UPDATE backfills SET {column} = {column} + 1, next_slot = ? WHERE id = ?",  # noqa: S608  (a column's name)
                (_ts(next_slot), backfill_id),
            )

    def claim_backfill(
        self,
        starts: Sequence[Start],
        backfills: Mapping[str, str],
        started: datetime,
        *,
        exclusive: Collection[str] = (),  # noqa: ARG002  (one daemon: its core knows its runs)
        locks: Mapping[str, Sequence[tuple[str, int]]] | None = None,  # noqa: ARG002  (so do its locks)
    ) -> list[Claim]:
        """`start_many`: one daemon a store wins every claim."""
        return list(self.start_many(starts, started, backfills=backfills))

    def backfill_end(self, backfill_id: str, state: str, ended: datetime) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE backfills SET state = ?, ended = ? WHERE id = ? AND state = 'running'",
                (state, ended.timestamp(), backfill_id),
            )


def _ts(when: datetime | None) -> float | None:
    return None if when is None else when.timestamp()
