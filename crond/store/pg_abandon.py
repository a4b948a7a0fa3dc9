"""The PostgreSQL store's bookkeeping of claims in doubt (crond/daemon/indoubt.py): the
runs a replica claimed and never started, taken out of the history as if never recorded
(`Abandons`, base.Replicated.abandon). One transaction each, like pg_write.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from crond.clock import iso_utc
from crond.store.pg_conn import ATTEMPTS, Connection, attempt_of
from crond.store.pg_locks import BY_RUN, release_runs


class Abandons(Connection):
    """A replica's runs claimed and never started, removed, and the locks of a run given
    back or read by run (pg_locks.py): one of the parts of
    crond.store.postgres.PostgresStore, beside its runs (pg_write.py)."""

    def abandon(self, run_ids: Sequence[str]) -> int:
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM crond_attempts WHERE cluster = %s AND replica = %s "
                "AND finished IS NULL AND run_id = ANY(%s) RETURNING id, job",
                (self.cluster, self._replica, list(run_ids)),
            )
            gone = cur.fetchall()
            release_runs(cur, self.cluster, run_ids)  # their locks, taken with their claims
            for row_id, job in gone:
                self._summary_back(cur, job, row_id)
                # Counted by its claim (`max_runs`), if the job is counted: it never ran.
                cur.execute("UPDATE crond_run_counts SET runs = runs - 1 WHERE cluster = %s "
                            "AND job = %s AND runs > 0", (self.cluster, job))  # fmt: skip
        return len(gone)

    def release_locks(self, run_id: str) -> None:
        with self._transaction() as cur:
            release_runs(cur, self.cluster, [run_id])

    def lock_holds(self) -> dict[str, list[str]]:
        rows = self._all(BY_RUN, (self.cluster,))
        held: dict[str, list[str]] = {}
        for run_id, name in rows:
            held.setdefault(str(run_id), []).append(str(name))
        return held

    def _summary_back(self, cur: psycopg.Cursor[Any], job: str, row_id: int) -> None:
        """The job's summary, if it showed the attempt `row_id` just removed, shows the
        attempt before it (none left: no summary)."""
        cur.execute(ATTEMPTS + " WHERE cluster = %s AND job = %s ORDER BY id DESC LIMIT 1",
                    (self.cluster, job))  # fmt: skip
        row = cur.fetchone()
        if row is None:
            cur.execute("DELETE FROM crond_summary WHERE cluster = %s AND job = %s AND "
                        "last_id = %s", (self.cluster, job, row_id))  # fmt: skip
            return
        a = attempt_of(row)
        finished = None if a.finished is None else iso_utc(a.finished)
        cur.execute(
            "UPDATE crond_summary SET last_id = %s, run_id = %s, slot = %s, attempt = %s, "
            "started = %s, finished = %s, outcome = %s, exit_code = %s, duration_s = %s, "
            "replica = %s WHERE cluster = %s AND job = %s AND last_id = %s",
            (a.id, a.run_id, iso_utc(a.slot), a.attempt, iso_utc(a.started), finished,
             a.outcome, a.exit_code, a.duration_s, a.replica, self.cluster, job, row_id),
        )  # fmt: skip
