"""The PostgreSQL store's records beside the runs: the pauses operators set (base.PauseRecords)
and the notifications not yet delivered (base.OutboxRecords), each a part of
crond.store.postgres.PostgresStore over its one Connection (pg_conn.py). Who resumed a
pause is the cluster's (pg_cluster.py); docs/state.md says what each table keeps.
"""

from __future__ import annotations

from collections.abc import Sequence

from crond.store.base import OutboxRow, PauseRow
from crond.store.pg_conn import Connection, text


class Pauses(Connection):
    """The pauses of `crond pause`, one a job of the cluster."""

    def set_pause(self, row: PauseRow) -> None:
        with self._transaction() as cur:
            cur.execute(
                "INSERT INTO crond_pauses (cluster, job, since, until, note, who) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (cluster, job) DO UPDATE SET "
                "since = excluded.since, until = excluded.until, note = excluded.note, "
                "who = excluded.who",
                (self.cluster, row.job, row.since, row.until,
                 None if row.note is None else text(row.note), text(row.by)),
            )  # fmt: skip

    def clear_pause(self, job: str) -> None:
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM crond_pauses WHERE cluster = %s AND job = %s", (self.cluster, job)
            )

    def set_pauses(self, rows: Sequence[PauseRow]) -> None:
        # In the order of jobs, as the view's rows (postgres.py): two replicas pausing at
        # once never wait for each other's row locks in a circle.
        with self._transaction() as cur:
            cur.executemany(
                "INSERT INTO crond_pauses (cluster, job, since, until, note, who) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (cluster, job) DO UPDATE SET "
                "since = excluded.since, until = excluded.until, note = excluded.note, "
                "who = excluded.who",
                [(self.cluster, r.job, r.since, r.until,
                  None if r.note is None else text(r.note), text(r.by))
                 for r in sorted(rows, key=lambda r: r.job)],
            )  # fmt: skip

    def clear_pauses(self, jobs: Sequence[str]) -> None:
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM crond_pauses WHERE cluster = %s AND job = ANY(%s)",
                (self.cluster, sorted(jobs)),
            )


class Outbox(Connection):
    """Notifications not yet delivered, each kept with the replica that is to deliver it
    (a dead replica's are taken over: pg_cluster.py)."""

    def outbox_add(self, rows: Sequence[OutboxRow]) -> list[int]:
        ids = []
        with self._transaction() as cur:
            for r in rows:
                cur.execute(
                    "INSERT INTO crond_outbox (cluster, replica, kind, notifier, job, event, "
                    "body, created) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                    (self.cluster, self._replica, r.kind, r.notifier, r.job, r.event,
                     text(r.body), r.created),
                )  # fmt: skip
                ids.append(int(cur.fetchone()[0]))  # type: ignore[index]
        return ids

    def outbox_pending(self, limit: int) -> list[OutboxRow]:
        """This replica's (its own, and those it took over from dead ones)."""
        rows = self._all(
            "SELECT id, kind, notifier, job, event, body, created FROM crond_outbox "
            "WHERE cluster = %s AND replica = %s ORDER BY id LIMIT %s",
            (self.cluster, self._replica, limit),
        )
        return self._decoded(lambda: [OutboxRow(*row) for row in rows])

    def outbox_done(self, ids: Sequence[int]) -> None:
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM crond_outbox WHERE cluster = %s AND id = ANY(%s)",
                (self.cluster, list(ids)),
            )
