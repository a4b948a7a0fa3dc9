"""The PostgreSQL store's chained runs (docs/workflows.md, "With replicas"): the children
a parent's end starts, kept in `crond_chained` from the commit of that end until the
commit that claims the child's run, so that a replica's death between the two loses
none of them and doubles none.

- The end of a parent's run inserts one row a child (`record`, from pg_write.py's `end`),
  its `replica` the one that ran the parent: it starts the child at its next wake.
- The child's run is claimed by its parent's run id (`crond_claims` copy
  `after:PARENT_RUN_ID`, its slot the parent's), and its row is deleted in that claim's
  commit (`started`), whatever came of it but a full lock (won; busy: skipped; taken: by
  another replica): of replicas that try, one claim commits, and the child runs once.
- A child that is not started (skipped, its job gone) has its row deleted
  (`drop_chained`).
- A replica that starts takes back the rows its previous process left, and a replica
  that has proved itself alive for `replica_timeout` takes over those of replicas silent
  for as long (`adopt_chained`): they start there.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from crond.store.pg_conn import Connection, utc
from crond.store.rows import AFTER, Chained

# Not when the child's run is claimed already: an end written late (the database was
# away) after the child started must not leave a row to start it again.
_INSERT = """
INSERT INTO crond_chained (cluster, job, parent_run_id, parent_job, outcome, exit_code, slot,
    replica)
SELECT %(cluster)s, %(job)s, %(parent_run_id)s, %(parent_job)s, %(outcome)s, %(exit_code)s,
    %(slot)s, %(replica)s
WHERE NOT EXISTS (SELECT 1 FROM crond_claims WHERE cluster = %(cluster)s AND job = %(job)s
    AND slot = %(slot)s AND copy = %(copy)s)
ON CONFLICT DO NOTHING
"""
_DELETE = "DELETE FROM crond_chained WHERE cluster = %s AND job = %s AND parent_run_id = %s"
_ADOPT = """
UPDATE crond_chained SET replica = %(me)s
WHERE cluster = %(cluster)s AND (replica = %(mine)s OR replica IN (
    SELECT name FROM crond_replicas WHERE cluster = %(cluster)s AND name <> %(me)s
    AND %(since)s::timestamptz IS NOT NULL AND last_beat < %(since)s))
RETURNING job, parent_job, parent_run_id, outcome, exit_code, slot
"""


def record(cur: Any, cluster: str, replica: str, chained: Sequence[Chained]) -> None:
    """The chained runs a parent's end starts, in the commit of that end."""
    cur.executemany(_INSERT, [
        {"cluster": cluster, "job": c.job, "parent_run_id": c.parent_run_id,
         "parent_job": c.parent_job, "outcome": c.outcome, "exit_code": c.exit_code,
         "slot": c.slot, "replica": replica, "copy": AFTER + c.parent_run_id}
        for c in chained
    ])  # fmt: skip


def started(cur: Any, cluster: str, job: str, copy: str) -> None:
    """A chained run claimed (its copy: AFTER and its parent's run id): its row goes."""
    cur.execute(_DELETE, (cluster, job, copy.removeprefix(AFTER)))


class ChainedRows(Connection):
    """The chained runs of the store's cluster not yet started: one of the parts of
    crond.store.postgres.PostgresStore."""

    def drop_chained(self, keys: Sequence[tuple[str, str]]) -> None:
        """Chained runs that will not start, (job, parent's run id) each."""
        with self._transaction() as cur:
            cur.executemany(_DELETE, [(self.cluster, job, run_id) for job, run_id in keys])

    def adopt_chained(
        self, now: datetime, timeout: timedelta | None, *, mine: bool
    ) -> list[Chained]:
        """The chained runs this replica is now to start: those of replicas whose last beat
        is older than `timeout` (None: none of theirs), and with `mine` (at its start)
        those its own name's previous process left; oldest parent slot first."""
        with self._transaction() as cur:
            cur.execute(_ADOPT, {
                "me": self._replica, "cluster": self.cluster,
                "since": None if timeout is None else now - timeout,
                "mine": self._replica if mine else None,
            })  # fmt: skip
            rows = cur.fetchall()
        return sorted(
            (Chained(job, parent, run_id, outcome, code, utc(slot))
             for job, parent, run_id, outcome, code, slot in rows),
            key=lambda c: (c.slot, c.parent_run_id, c.job),
        )  # fmt: skip

    def pending_chained(self) -> list[Chained]:
        """This replica's chained runs not yet started, oldest parent slot first."""
        rows = self._all(
            "SELECT job, parent_job, parent_run_id, outcome, exit_code, slot FROM crond_chained "
            "WHERE cluster = %s AND replica = %s ORDER BY slot, parent_run_id, job",
            (self.cluster, self._replica),
        )
        return [Chained(j, p, r, o, c, utc(s)) for j, p, r, o, c, s in rows]
