"""The PostgreSQL store's reads: what `crond status`, `history` and `ps` ask of a cluster
(base.ClusterReader), each one short transaction; and the check a reader makes before
it reads (the tables there, at this crond's schema), which writes nothing.

crond/store/postgres.py is the store these are part of; docs/state.md what they show.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from crond.store import schema_pg
from crond.store.base import (
    EVERY,
    FAILED_OUTCOMES,
    AttemptRow,
    Only,
    PauseRow,
    PerReplica,
    ReplicaRow,
    StateError,
    StatusRow,
    Summary,
)
from crond.store.pg_conn import ATTEMPTS, PAUSES, Connection, attempt_of, pause_of, utc

_SUMMARIES = (
    "SELECT job, run_id, slot, attempt, started, finished, outcome, exit_code, duration_s, "
    "success_run_id, success_started, success_finished, success_duration_s FROM crond_summary "
    "WHERE cluster = %s"
)
_STATUS = """
SELECT v.job, v.enabled::int, v.schedule, v.next_text, v.next_local, v.next_note,
    s.run_id, s.slot, s.attempt, s.started, s.finished, s.outcome, s.exit_code, s.duration_s,
    s.success_run_id, s.success_started, s.success_finished, s.success_duration_s
FROM crond_view v LEFT JOIN crond_summary s ON s.cluster = v.cluster AND s.job = v.job
WHERE v.cluster = %s ORDER BY v.pos
"""
# Each (job, replica)'s newest attempt (of those `also` keeps): a sort of the jobs' kept
# history, read through their index.
_PER_REPLICA = (
    "SELECT DISTINCT ON (job, replica) id, run_id, job, slot, attempt, started, finished, "
    "outcome, exit_code, duration_s, output, replica FROM crond_attempts "
    "WHERE cluster = %s AND job = ANY(%s) {also} ORDER BY job, replica, id DESC"
)
REPLICAS = (
    "SELECT name, host, pid, boot_id, started, last_beat, version, config_digest, "
    "clock_skew_s FROM crond_replicas WHERE cluster = %s"
)


class Reads(Connection):
    """A cluster's history, summaries, view, pauses and replicas (base.ClusterReader)."""

    def check_readable(self) -> None:
        """The tables are there, at this crond's schema, and some replica of the cluster
        has used them; else a StateError that says which of those it is not. Writes
        nothing (a reader must not make tables a daemon would then find made)."""
        with self._transaction() as cur:
            version = schema_pg.version_of(cur)
            if version == schema_pg.SCHEMA_VERSION:
                cur.execute(
                    "SELECT EXISTS (SELECT 1 FROM crond_replicas WHERE cluster = %s)",
                    (self.cluster,),
                )
                used = bool(cur.fetchone()[0])  # type: ignore[index]
        if version is None:
            raise StateError(f"{self.location}: no crond has used this database yet")
        if version != schema_pg.SCHEMA_VERSION:
            newer = "a newer" if version > schema_pg.SCHEMA_VERSION else "an older"
            raise StateError(
                f"{self.location}: written by {newer} crond (schema {version}, this one "
                f"reads {schema_pg.SCHEMA_VERSION}); read it with that crond's version"
            )
        if not used:
            raise StateError(f"{self.location}: no replica of this cluster has used it yet")

    def get_meta(self, key: str) -> str | None:
        rows = self._all(
            "SELECT value FROM crond_meta WHERE cluster = %s AND key = %s", (self.cluster, key)
        )
        return str(rows[0][0]) if rows else None

    def metas(self, prefix: str) -> dict[str, str]:
        rows = self._all(
            "SELECT key, value FROM crond_meta WHERE cluster = %s AND left(key, %s) = %s",
            (self.cluster, len(prefix), prefix),
        )
        return {str(key): str(value) for key, value in rows}

    def last(self, job: str, *, outcome: str | None = None) -> AttemptRow | None:
        query = ATTEMPTS + " WHERE cluster = %s AND job = %s"
        params: tuple[Any, ...] = (self.cluster, job)
        if outcome is not None:
            query += " AND outcome = %s"
            params += (outcome,)
        rows = self._all(query + " ORDER BY id DESC LIMIT 1", params)
        return self._decoded(lambda: attempt_of(rows[0]) if rows else None)

    def recent(self, job: str | None, limit: int, only: Only = EVERY) -> list[AttemptRow]:
        terms: list[str] = ["cluster = %s"]
        params: list[Any] = [self.cluster]
        if job is not None:
            terms.append("job = %s")
            params.append(job)
        if only.failed:
            terms.append("outcome = ANY(%s)")
            params.append(list(FAILED_OUTCOMES))
        if only.since is not None:
            terms.append("started >= %s")
            params.append(only.since)
        if only.run_id is not None:
            terms.append("run_id = %s")
            params.append(only.run_id)
        query = f"{ATTEMPTS} WHERE {' AND '.join(terms)} ORDER BY id DESC LIMIT %s"
        rows = self._all(query, (*params, limit))
        return self._decoded(lambda: [attempt_of(r) for r in reversed(rows)])

    def open_runs(self) -> list[AttemptRow]:
        """Every replica's (the partial index of open attempts: no scan of the history)."""
        rows = self._all(
            ATTEMPTS + " WHERE cluster = %s AND finished IS NULL ORDER BY id", (self.cluster,)
        )
        return self._decoded(lambda: [attempt_of(r) for r in rows])

    def run_counts(self) -> dict[str, int]:
        """Each job's scheduled runs so far (`max_runs`), in the cluster."""
        rows = self._all(
            "SELECT job, runs FROM crond_run_counts WHERE cluster = %s", (self.cluster,)
        )
        return self._decoded(lambda: {str(job): int(runs) for job, runs in rows})

    def summaries(self) -> dict[str, Summary]:
        rows = self._all(_SUMMARIES, (self.cluster,))
        return self._decoded(lambda: {r[0]: Summary._make(r) for r in rows})

    def newest_replicas(self) -> dict[str, str]:
        rows = self._all(
            "SELECT job, replica FROM crond_summary WHERE cluster = %s AND replica IS NOT NULL",
            (self.cluster,),
        )
        return {str(job): str(replica) for job, replica in rows}

    def status_rows(self) -> list[StatusRow]:
        rows = self._all(_STATUS, (self.cluster,))
        return self._decoded(lambda: list(map(StatusRow._make, rows)))

    def view_is_behind(self, oldest: float) -> bool:
        return bool(
            self._all(
                "SELECT 1 FROM crond_view WHERE cluster = %s AND next_at < %s LIMIT 1",
                (self.cluster, oldest),
            )
        )

    def pauses(self) -> dict[str, PauseRow]:
        rows = self._all(PAUSES, (self.cluster,))
        return self._decoded(lambda: {r[0]: pause_of(r) for r in rows})

    def per_replica(self, jobs: Sequence[str]) -> dict[str, dict[str, PerReplica]]:
        """Of each of `jobs` (`replicas: all` ones), by replica: its newest attempt and
        its newest success among those kept (each through the job's index)."""
        found: dict[str, dict[str, PerReplica]] = {}
        if not jobs:
            return found
        newest = self._all(_PER_REPLICA.format(also=""), (self.cluster, list(jobs)))
        success = self._all(
            _PER_REPLICA.format(also="AND outcome = 'success'"), (self.cluster, list(jobs))
        )

        def build() -> dict[str, dict[str, PerReplica]]:
            for row in newest:
                got = attempt_of(row)
                found.setdefault(got.job, {})[str(got.replica)] = PerReplica(got, None)
            for row in success:
                ok = attempt_of(row)
                mine = found.setdefault(ok.job, {})
                mine[str(ok.replica)] = PerReplica(mine.get(str(ok.replica), (ok,))[0], ok)
            return found

        return self._decoded(build)

    def replicas(self) -> list[ReplicaRow]:
        rows = self._all(REPLICAS + " ORDER BY name", (self.cluster,))
        return self._decoded(lambda: [replica_of(r) for r in rows])

    def clock(self) -> datetime:
        rows = self._all("SELECT clock_timestamp()")
        return self._decoded(lambda: utc(rows[0][0]))


def replica_of(row: Any) -> ReplicaRow:
    """A replica as `REPLICAS` selects it."""
    name, host, pid, boot, started, last_beat, version, digest, skew = row
    return ReplicaRow(
        str(name), str(host), int(pid), boot, utc(started), utc(last_beat), str(version), digest,
        None if skew is None else float(skew),
    )  # fmt: skip
