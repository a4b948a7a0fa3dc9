"""The PostgreSQL store's backfills (base.BackfillRecords; `crond backfill`,
docs/schedules.md, "Backfill"; the table: crond/store/schema_pg.py, schema 6).

Every replica that knows a backfill drives it; each slot's run is claimed by a row of
`crond_claims` of copy `backfill:ID` (the backfill's own, apart from the slot's scheduled
claim), in the transaction that records its attempt and moves the backfill's progress:
of the replicas that claim one slot, one commits it, so a slot runs once. A job that
runs one at a time (`exclusive`) is not claimed while an attempt of it is unfinished on
any replica: nothing is recorded, and the slot is tried again. A backfill no longer
running (cancelled, or finished, through another replica) claims nothing: DONE.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from crond.clock import iso_utc
from crond.store.pg_conn import SUMMARY_STARTED, Connection, utc
from crond.store.pg_locks import Need, lock_rows, take
from crond.store.rows import BUSY, DONE, BackfillRow, Claim, Start, backfill_of

# One backfill start, in one statement: the claim (not while the job, run one at a time,
# has an attempt unfinished), the attempt it records, the backfill's progress.
_CLAIM = """
WITH going AS (
    SELECT EXISTS (SELECT 1 FROM crond_backfills WHERE cluster = %(cluster)s
        AND id = %(backfill)s AND state = 'running') AS going
), busy AS (
    SELECT %(exclusive)s AND EXISTS (SELECT 1 FROM crond_attempts WHERE cluster = %(cluster)s
        AND job = %(job)s AND finished IS NULL) AS busy
), claim AS (
    INSERT INTO crond_claims (cluster, job, slot, copy, replica, run_id, claimed)
    SELECT %(cluster)s, %(job)s, %(slot)s, %(copy)s, %(replica)s, %(run_id)s, %(started)s
    FROM busy, going WHERE going.going AND NOT busy.busy
    ON CONFLICT DO NOTHING RETURNING 1
), attempt AS (
    INSERT INTO crond_attempts (cluster, run_id, job, slot, attempt, started, replica, kind)
    SELECT %(cluster)s, %(run_id)s, %(job)s, %(slot)s, 1, %(started)s, %(replica)s, 'backfill'
    FROM claim RETURNING id
), progress AS (
    UPDATE crond_backfills SET started = started + 1, last_slot = %(slot)s,
        next_slot = %(slot)s
    WHERE cluster = %(cluster)s AND id = %(backfill)s AND EXISTS (SELECT 1 FROM claim)
)
SELECT (SELECT going FROM going), (SELECT busy FROM busy), (SELECT id FROM attempt)
"""
_COLUMNS = (
    "id, job, range_from, range_to, total, started, last_slot, next_slot, succeeded, "
    "failed, state, created, ended, who"
)


class Backfills(Connection):
    """The backfills of the store's cluster."""

    def backfill_add(self, row: BackfillRow) -> bool:
        with self._transaction() as cur:
            cur.execute(
                "INSERT INTO crond_backfills (cluster, id, job, range_from, range_to, total, "
                "next_slot, state, created, who) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, 'running', %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                (self.cluster, row.id, row.job, row.range_from, row.range_to, row.total,
                 row.next_slot, row.created, row.who),
            )  # fmt: skip
            return cur.fetchone() is not None

    def backfill_counted(self, backfill_id: str, success: bool, next_slot: datetime | None) -> None:
        column = "succeeded" if success else "failed"
        with self._transaction() as cur:
            cur.execute(
                f"UPDATE crond_backfills SET {column} = {column} + 1, next_slot = %s "  # noqa: S608  (a column's name)
                "WHERE cluster = %s AND id = %s",
                (next_slot, self.cluster, backfill_id),
            )

    def backfill_end(self, backfill_id: str, state: str, ended: datetime) -> None:
        with self._transaction() as cur:
            cur.execute(
                "UPDATE crond_backfills SET state = %s, ended = %s "
                "WHERE cluster = %s AND id = %s AND state = 'running'",
                (state, ended, self.cluster, backfill_id),
            )

    def backfills(self, *, going: bool) -> list[BackfillRow]:
        where = " AND state = 'running'" if going else ""
        rows = self._all(
            f"SELECT {_COLUMNS} FROM crond_backfills WHERE cluster = %s{where} ORDER BY created",  # noqa: S608  (constant text)
            (self.cluster,),
        )
        return self._decoded(lambda: [backfill_of(r, utc) for r in rows])

    def claim_backfill(
        self,
        starts: Sequence[Start],
        backfills: Mapping[str, str],
        started: datetime,
        *,
        exclusive: Collection[str] = (),
        locks: Mapping[str, Sequence[Need]] | None = None,
    ) -> list[Claim]:
        claims: list[Claim] = []
        with self._transaction() as cur:
            if locks:  # first of all, in the order of names (pg_locks.py)
                lock_rows(cur, self.cluster, [n for s in starts for n, _ in locks.get(s[0], ())])
            for job, run_id, slot in starts:
                backfill = backfills[run_id]
                values = {
                    "cluster": self.cluster, "job": job, "slot": slot, "run_id": run_id,
                    "copy": f"backfill:{backfill}", "replica": self._replica,
                    "started": started, "exclusive": job in exclusive, "backfill": backfill,
                }  # fmt: skip
                needs = locks.get(job, ()) if locks else ()
                if needs:  # (its claim undone if a lock has no room)
                    cur.execute("SAVEPOINT crond_backfill")
                cur.execute(_CLAIM, values)
                going, busy, row_id = cur.fetchone() or (True, False, None)
                if row_id is None:
                    claims.append(DONE if not going else BUSY if busy else None)
                    continue
                locked = needs and take(cur, self.cluster, self._replica, job, run_id, slot,
                                        needs, started)  # fmt: skip
                if locked:
                    cur.execute("ROLLBACK TO SAVEPOINT crond_backfill")
                    claims.append(locked)
                    continue
                claims.append(int(row_id))
                cur.execute(SUMMARY_STARTED, (self.cluster, job, row_id, run_id,
                    iso_utc(slot), 1, iso_utc(started), self._replica))  # fmt: skip
        return claims
