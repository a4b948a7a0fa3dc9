"""The PostgreSQL store's writes of runs: a run's start, its finish, the history kept, the
cursors, and the runs a replica's previous process left open (`Runs`); a wake's starts
with their slots' claims (`Claiming`). Each is one transaction; the claims are the whole
guard against a slot run twice (crond/store/postgres.py says how, docs/state.md what
users get). Runs claimed and never started are taken back by pg_abandon.py.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg

from crond.clock import iso_utc
from crond.store.base import BUSY, DONE, AttemptRow, Claim, Claimed, Locked, Start
from crond.store.pg_chains import record
from crond.store.pg_chains import started as started_chained
from crond.store.pg_cluster import CLOSE_LOST
from crond.store.pg_conn import SUMMARY_STARTED, Connection, attempt_of, utc
from crond.store.pg_locks import RELEASE_RUN, Need, lock_rows, release_own, take
from crond.store.rows import AFTER, Chained

# A slot's claims are exclusive whatever each replica's file says of the job (a rolling
# change of `replicas`): a `one` claim is the slot's row of copy "", which any claim of the
# slot has. An `all` claim (copy: the replica's name) first inserts that row marked
# `each` (its anchor) or finds it; it then claims its copy only if the row is an anchor,
# not a `one` claim: of the replicas that race, the first to commit the row of copy ""
# decides, and the slot runs once, or once a replica, never both. The anchor's insert is
# a statement of its own: one that waited for a peer's commit sees the row in the next.
_ANCHOR = """
INSERT INTO crond_claims (cluster, job, slot, copy, replica, run_id, claimed, each)
VALUES (%(cluster)s, %(job)s, %(slot)s, '', %(replica)s, '', %(started)s, true)
ON CONFLICT DO NOTHING
"""
# One claim, and the attempt it records when it wins, in one statement: the attempt's
# insert selects from the claim's, so a claim another replica holds records nothing.
_CLAIM = """
WITH claim AS (
    INSERT INTO crond_claims (cluster, job, slot, copy, replica, run_id, claimed)
    SELECT %(cluster)s, %(job)s, %(slot)s, %(copy)s, %(replica)s, %(run_id)s, %(started)s
    WHERE %(copy)s = '' OR %(after)s OR EXISTS (SELECT 1 FROM crond_claims
        WHERE cluster = %(cluster)s AND job = %(job)s AND slot = %(slot)s AND copy = ''
        AND each)
    ON CONFLICT DO NOTHING RETURNING 1
), busy AS (
    SELECT %(exclusive)s AND EXISTS (SELECT 1 FROM crond_attempts WHERE cluster = %(cluster)s
        AND job = %(job)s AND finished IS NULL) AS busy
), attempt AS (
    INSERT INTO crond_attempts (cluster, run_id, job, slot, attempt, started, replica)
    SELECT %(cluster)s, %(run_id)s, %(job)s, %(slot)s, 1, %(started)s, %(replica)s
    FROM claim, busy WHERE NOT busy.busy
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM claim), (SELECT busy FROM busy), (SELECT id FROM attempt)
"""
# A job's scheduled run counted (`max_runs`): a row back while the count was below the
# limit (%(limit)s), none once it is reached (the claim is then undone).
_COUNT = """
INSERT INTO crond_run_counts (cluster, job, runs) VALUES (%(cluster)s, %(job)s, 1)
ON CONFLICT (cluster, job) DO UPDATE SET runs = crond_run_counts.runs + 1
WHERE crond_run_counts.runs < %(limit)s
RETURNING runs
"""
# `overlap: replace` across replicas: the job's runs going on the others are asked to stop
# (as `crond kill` asks; each stops its own within about two seconds).
_REPLACE = """
INSERT INTO crond_kills (cluster, target, who, replica, requested)
SELECT cluster, run_id, %s, %s, %s FROM crond_attempts
WHERE cluster = %s AND job = %s AND finished IS NULL AND replica <> %s
"""
# An attempt's end; but of one another replica closed `lost` (its replica cut off from
# the database, not dead), `lost` is kept and the end written beside it (the first end
# only). A SET's expressions see the row as it was; and as the row a concurrent close
# left, if one did (the update is then evaluated again on it): `lost` is never overwritten.
_FINISH = """
UPDATE crond_attempts SET
    finished = CASE WHEN outcome = 'lost' THEN finished ELSE %(finished)s END,
    outcome = CASE WHEN outcome = 'lost' THEN outcome ELSE %(outcome)s END,
    exit_code = CASE WHEN outcome = 'lost' THEN exit_code ELSE %(exit_code)s END,
    duration_s = CASE WHEN outcome = 'lost' THEN duration_s ELSE %(duration_s)s END,
    output = CASE WHEN outcome = 'lost' THEN coalesce(output, %(output)s) ELSE %(output)s END,
    late_finished = CASE WHEN outcome = 'lost' THEN coalesce(late_finished, %(finished)s)
        ELSE late_finished END,
    late_outcome = CASE WHEN outcome = 'lost' THEN coalesce(late_outcome, %(outcome)s)
        ELSE late_outcome END,
    late_exit_code = CASE WHEN outcome = 'lost' AND late_finished IS NULL THEN %(exit_code)s
        ELSE late_exit_code END
WHERE id = %(id)s AND cluster = %(cluster)s AND run_id = coalesce(%(run_id)s, run_id)
    AND job = %(job)s
RETURNING run_id, started, outcome = 'lost' AND late_finished IS NOT NULL, finished
"""


class Runs(Connection):
    """A replica's runs recorded: base.Store's writes of attempts and cursors."""

    history: int  # the attempts kept a job (PostgresStore's)

    def cursors(self) -> dict[str, datetime]:
        rows = self._all(
            "SELECT job, cursor FROM crond_cursors WHERE cluster = %s", (self.cluster,)
        )
        return self._decoded(lambda: {job: utc(c) for job, c in rows})

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
        """Records without a claim: a retry (its run was claimed; of its first attempt's
        kind), or a run that is no slot's."""
        with self._transaction() as cur:
            row_id = self._record_start(cur, job, run_id, slot, attempt, started)
            self._move_cursors(cur, [(job, cursor)])
            return row_id

    def start_many(
        self, starts: Sequence[Start], started: datetime, limits: Mapping[str, int] | None = None
    ) -> list[int]:
        """Records without claims (as SQLite's): replicas use `claim_many`. The starts of
        `limits`' jobs are counted, never refused (one daemon: its planner stops)."""
        with self._transaction() as cur:
            ids = [self._record_start(cur, job, run_id, slot, 1, started)
                   for job, run_id, slot in starts]  # fmt: skip
            self._move_cursors(cur, [(job, slot) for job, _, slot in starts])
            for job, _, _ in starts:
                if limits and job in limits:
                    values = {"cluster": self.cluster, "job": job, "limit": 2**62}
                    cur.execute(_COUNT, values)
            return ids

    def finish(self, row_id: int, **kw: Any) -> None:
        """`end`, its late end unsaid (base.RunRecords.finish)."""
        self.end(row_id, **kw)

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
        release: bool = False,
        chained: Sequence[Chained] = (),
    ) -> datetime | None:
        """An attempt's end; with `release`, its run's last: the locks the run holds are
        given back in the same commit (pg_locks.py), and the `chained` runs it starts are
        recorded in it (pg_chains.py)."""
        with self._transaction() as cur:
            if chained:
                record(cur, self.cluster, self._replica, chained)
            cur.execute(_FINISH, {
                "finished": finished, "outcome": outcome, "exit_code": exit_code,
                "duration_s": duration_s, "output": json.dumps(list(output)), "id": row_id,
                "cluster": self.cluster, "run_id": run_id, "job": job,
            })  # fmt: skip
            row = cur.fetchone()
            if release and (run_id is not None or row is not None):
                cur.execute(RELEASE_RUN, (self.cluster, run_id or row[0]))  # type: ignore[index]
            if row is None:
                return None  # not there (pruned, or another database's row): nothing to close
            if row[2]:
                return utc(row[3])  # closed `lost` before: kept so, the end beside it
            self._summary_finished(cur, row_id, job, row[:2], finished, outcome, exit_code,
                                   duration_s)  # fmt: skip
            cur.execute(
                "DELETE FROM crond_attempts WHERE cluster = %s AND job = %s "
                "AND finished IS NOT NULL AND id <= (SELECT id FROM crond_attempts "
                "WHERE cluster = %s AND job = %s ORDER BY id DESC LIMIT 1 OFFSET %s)",
                (self.cluster, job, self.cluster, job, self.history if keep is None else keep),
            )
        return None

    def close_lost(self, now: datetime) -> list[AttemptRow]:
        """The open attempts of this replica's name, left by its previous process."""
        with self._transaction() as cur:
            cur.execute(CLOSE_LOST, (now, self.cluster, self._replica))
            rows = cur.fetchall()
            self._summaries_lost(cur, rows, now)
            release_own(cur, self.cluster, self._replica)  # its runs' locks, all of them
        return self._decoded(lambda: sorted(map(attempt_of, rows), key=lambda r: r.id))

    def _move_cursors(
        self, cur: psycopg.Cursor[Any], cursors: Sequence[tuple[str, datetime]]
    ) -> None:
        """Cursors forward, never back; in the order of jobs (see claim_many)."""
        latest: dict[str, datetime] = {}
        for job, at in cursors:
            latest[job] = max(at, latest.get(job, at))
        cur.executemany(
            "INSERT INTO crond_cursors (cluster, job, cursor) VALUES (%s, %s, %s) "
            "ON CONFLICT (cluster, job) DO UPDATE SET "
            "cursor = greatest(crond_cursors.cursor, excluded.cursor)",
            [(self.cluster, job, latest[job]) for job in sorted(latest)],
        )

    def _record_start(  # noqa: PLR0917  (the row's columns, in order)
        self,
        cur: psycopg.Cursor[Any],
        job: str,
        run_id: str,
        slot: datetime,
        attempt: int,
        started: datetime,
    ) -> int:
        """A later attempt is of the same kind as its run's first (a backfill's retry is
        the backfill's), read in the insert itself (a first attempt finds none: NULL)."""
        cur.execute(
            "INSERT INTO crond_attempts (cluster, run_id, job, slot, attempt, started, replica, "
            "kind) SELECT %s, %s, %s, %s, %s, %s, %s, (SELECT kind FROM crond_attempts "
            "WHERE cluster = %s AND job = %s AND run_id = %s AND attempt = 1 LIMIT 1) "
            "RETURNING id",
            (self.cluster, run_id, job, slot, attempt, started, self._replica, self.cluster,
             job, run_id),
        )  # fmt: skip
        row_id = int(cur.fetchone()[0])  # type: ignore[index]
        cur.execute(SUMMARY_STARTED, (self.cluster, job, row_id, run_id, iso_utc(slot),
                                       attempt, iso_utc(started), self._replica))  # fmt: skip
        return row_id

    def _summary_finished(  # noqa: PLR0917  (the row's columns, in order)
        self,
        cur: psycopg.Cursor[Any],
        row_id: int,
        job: str,
        row: Sequence[Any],
        finished: datetime,
        outcome: str,
        exit_code: int | None,
        duration_s: float,
    ) -> None:
        """The job's summary shows its newest attempt finished (if it still is the newest),
        and a success as its last success."""
        cur.execute(
            "UPDATE crond_summary SET finished = %s, outcome = %s, exit_code = %s, "
            "duration_s = %s WHERE cluster = %s AND job = %s AND last_id = %s",
            (iso_utc(finished), outcome, exit_code, duration_s, self.cluster, job, row_id),
        )
        if outcome != "success":
            return
        run_id, began = row
        cur.execute(
            "UPDATE crond_summary SET success_run_id = %s, success_started = %s, "
            "success_finished = %s, success_duration_s = %s WHERE cluster = %s AND job = %s",
            (run_id, iso_utc(utc(began)), iso_utc(finished), duration_s, self.cluster, job),
        )


class Claiming(Runs):
    """A replica's claims: a wake's starts, each recorded only if this replica gets its
    slot's claim, and its told slots claimed, in one transaction (base.RunRecords.claim)."""

    def claim_many(
        self,
        starts: Sequence[Start],
        started: datetime,
        *,
        copies: Sequence[str] | None = None,
        exclusive: Collection[str] = (),
        replacing: Collection[str] = (),
    ) -> list[Claim]:
        """`claim` of starts alone."""
        return self.claim(
            starts, (), started, copies=copies, exclusive=exclusive, replacing=replacing
        ).starts

    def claim_only(self, slots: Sequence[tuple[str, datetime]], claimed: datetime) -> list[bool]:
        """`claim` of told slots alone."""
        return self.claim((), slots, claimed).told

    def claim(
        self,
        starts: Sequence[Start],
        told: Sequence[tuple[str, datetime]],
        started: datetime,
        *,
        copies: Sequence[str] | None = None,
        exclusive: Collection[str] = (),
        replacing: Collection[str] = (),
        limits: Mapping[str, int] | None = None,
        locks: Mapping[str, Sequence[Need]] | None = None,
    ) -> Claimed:
        """One wake's claims in one transaction: its starts' and its told slots' (copy "";
        `_ANCHOR` says how `one` and `all` claims of a slot exclude each other). Claims
        are taken in the order of (job, slot, copy), whatever the order given, and
        the summaries and cursors after them in the order of jobs: replicas that race take
        their locks in one order, and never deadlock one another."""
        if copies is None:
            copies = [""] * len(starts)
        if len(copies) != len(starts):
            raise ValueError("claim: one copy a start")
        order = sorted(
            [((job, slot, copies[i]), i) for i, (job, _, slot) in enumerate(starts)]
            + [((job, slot, ""), -1 - i) for i, (job, slot) in enumerate(told)]
        )
        ids: list[Claim] = [None] * len(starts)
        got = [False] * len(told)
        with self._transaction() as cur:
            if locks:  # first of all, in the order of names (pg_locks.py)
                lock_rows(cur, self.cluster, [n for s in starts for n, _ in locks.get(s[0], ())])
            for (job, slot, copy), i in order:
                if i < 0:
                    got[-1 - i] = self._claim_told(cur, job, slot, started)
                    continue
                after = copy.startswith(AFTER)  # a chained run's: by its parent's run id
                values = {
                    "cluster": self.cluster, "job": job, "slot": slot, "copy": copy,
                    "replica": self._replica, "run_id": starts[i][1], "started": started,
                    "exclusive": (not copy or after) and job in exclusive, "after": after,
                }  # fmt: skip
                limit = None if copy or limits is None else limits.get(job)
                needs = locks.get(job, ()) if locks else ()
                ids[i] = self._claim_start(cur, values, limit, needs)
                if after and not isinstance(ids[i], Locked):  # (won, busy or taken)
                    started_chained(cur, self.cluster, job, copy)  # its record is done with
            won = sorted(
                (starts[i], ids[i], copies[i])
                for _, i in order
                if i >= 0 and isinstance(ids[i], int)
            )
            for (job, run_id, slot), row_id, copy in won:
                cur.execute(SUMMARY_STARTED, (self.cluster, job, row_id, run_id,
                    iso_utc(slot), 1, iso_utc(started), self._replica))  # fmt: skip
                if job in replacing and not copy:
                    who = json.dumps({"overlap": "replace", "run_id": run_id})
                    cur.execute(_REPLACE, (who, self._replica, started, self.cluster, job,
                                           self._replica))  # fmt: skip
            if starts:
                self._move_cursors(cur, [(job, slot) for job, _, slot in starts])
        return Claimed(ids, got)

    @staticmethod
    def _claim_start(
        cur: Any, values: dict[str, Any], limit: int | None, needs: Sequence[Need] = ()
    ) -> Claim:
        """One start's claim (and its anchor, for a copy). A won claim takes the locks it
        `needs`, or is undone with its attempt and refused (Locked) when one has no room;
        with `limit` (the job's `max_runs`), it is counted, or undone and DONE when the job
        has had them all."""
        if limit is not None or needs:
            cur.execute("SAVEPOINT crond_count")
        if values["copy"] and not values["after"]:  # (a chained run has no anchor)
            cur.execute(_ANCHOR, values)
        cur.execute(_CLAIM, values)
        claimed, busy, row_id = cur.fetchone()
        if row_id is None:
            return BUSY if claimed and busy else None
        v = values
        locked = needs and take(cur, v["cluster"], v["replica"], v["job"], v["run_id"],
                                v["slot"], needs, v["started"])  # fmt: skip
        if locked:
            cur.execute("ROLLBACK TO SAVEPOINT crond_count")
            return locked
        if limit is None:
            return int(row_id)
        cur.execute(_COUNT, {**values, "limit": limit})
        if cur.fetchone() is not None:
            return int(row_id)
        cur.execute("ROLLBACK TO SAVEPOINT crond_count")
        return DONE

    def _claim_told(self, cur: Any, job: str, slot: datetime, claimed: datetime) -> bool:
        """A claim with no attempt (a slot skipped or missed: the one replica that gets it
        tells of it)."""
        cur.execute(
            "INSERT INTO crond_claims (cluster, job, slot, copy, replica, run_id, "
            "claimed) VALUES (%s, %s, %s, '', %s, '', %s) ON CONFLICT DO NOTHING "
            "RETURNING 1",
            (self.cluster, job, slot, self._replica, claimed),
        )
        return cur.fetchone() is not None
