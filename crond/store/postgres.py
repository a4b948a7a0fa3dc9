"""The state store in PostgreSQL, shared by the replicas of a cluster: each slot of each job
starts at most once across all of them.

A replica claims `(cluster, job, slot, copy)` in the same transaction that records the
run's start (`claim_many`); the claims table's primary key is the guard, so of replicas
racing for a slot exactly one commits its claim and runs it, the others get None. No
timer, no session or advisory lock, no temporary table, no prepared statement outlives
its transaction (`prepare_threshold=None`): every guarantee holds through a
transaction-pooling PgBouncer and a failover. Transactions are short, autocommit is off,
and every one sets its own `statement_timeout`, so a stuck database holds the daemon for
seconds, not for ever.

Every psycopg error becomes a StateError whose message never holds the URL's password,
user or database (the URL is shown as `crond.config.secrets.show_url` shows it). Not
chosen by crond.store.locate yet; docs/state.md describes the tables and the claim. The
schema is crond/store/schema_pg.py. psycopg (the `crond[postgres]` extra) is imported
here only.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict

from crond import __version__
from crond.clock import iso_utc
from crond.config.secrets import show_url
from crond.store import schema_pg
from crond.store.base import (
    AttemptRow,
    OutboxRow,
    PauseRow,
    Start,
    StateError,
    StatusRow,
    Summary,
    ViewRow,
)
from crond.store.locate import boot_id

__all__ = ["CLAIM_KEEP", "PostgresStore"]

T = TypeVar("T")

# How long a claim is kept after its slot: longer than any catch-up window a replica could
# still act on, so a slot never loses its claim while some replica might reach it again.
CLAIM_KEEP = timedelta(days=35)
# Claims pruned at most per `checkpoint` (one short transaction, off the start path).
_PRUNE_BATCH = 5000
# The longest a message quoted from the server or libpq may be in a StateError.
_MAX_MESSAGE = 300

_ATTEMPTS = (
    "SELECT id, run_id, job, slot, attempt, started, finished, outcome, exit_code, duration_s, "
    "output, replica FROM crond_attempts"
)
# An attempt as close_lost and close_dead return it: as it was before it was closed.
_CLOSED = (
    "RETURNING id, run_id, job, slot, attempt, started, NULL::timestamptz, NULL::text, "
    "exit_code, duration_s, output, replica"
)
_CLOSE_LOST = (
    "UPDATE crond_attempts SET finished = %s, outcome = 'lost' WHERE cluster = %s "  # noqa: S608
    f"AND replica = %s AND finished IS NULL {_CLOSED}"
)
# The other replicas of the cluster whose last beat is older than a given instant.
_STALE = "SELECT name FROM crond_replicas WHERE cluster = %s AND name <> %s AND last_beat < %s"
_CLOSE_DEAD = (
    "UPDATE crond_attempts SET finished = %s, outcome = 'lost' WHERE cluster = %s "  # noqa: S608
    f"AND finished IS NULL AND replica IN ({_STALE}) {_CLOSED}"
)
_TAKE_OUTBOX = f"UPDATE crond_outbox SET replica = %s WHERE cluster = %s AND replica IN ({_STALE})"  # noqa: S608
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
_VIEW_KEYS = "pos, job, enabled, schedule, next_at, next_text, next_local, next_note"
# One claim, and the attempt it records when it wins, in one statement: the attempt's
# insert selects from the claim's, so a claim another replica holds records nothing.
_CLAIM = """
WITH claim AS (
    INSERT INTO crond_claims (cluster, job, slot, copy, replica, run_id, claimed)
    VALUES (%(cluster)s, %(job)s, %(slot)s, %(copy)s, %(replica)s, %(run_id)s, %(started)s)
    ON CONFLICT DO NOTHING RETURNING 1
)
INSERT INTO crond_attempts (cluster, run_id, job, slot, attempt, started, replica)
SELECT %(cluster)s, %(run_id)s, %(job)s, %(slot)s, 1, %(started)s, %(replica)s FROM claim
RETURNING id
"""
_SUMMARY_STARTED = """
INSERT INTO crond_summary (cluster, job, last_id, run_id, slot, attempt, started, replica)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (cluster, job) DO UPDATE SET last_id = excluded.last_id, run_id = excluded.run_id,
    slot = excluded.slot, attempt = excluded.attempt, started = excluded.started,
    replica = excluded.replica, finished = NULL, outcome = NULL, exit_code = NULL,
    duration_s = NULL
"""


class PostgresStore:
    """The store of one replica of a cluster, in a PostgreSQL database (base.Store and
    base.Replicated). Not thread-safe: use it from one thread (the event loop's)."""

    def __init__(
        self,
        url: str,
        *,
        cluster: str,
        replica: str,
        history: int,
        claim_keep: timedelta,
        timeout: float,
    ) -> None:
        """Use `open`: this makes no connection."""
        self._url = url
        self.cluster = cluster
        self._replica = replica
        self.history = history
        self.claim_keep = claim_keep
        self.timeout = timeout
        self.moved_aside: str | None = None  # a database is never moved aside
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self._started = datetime.now(UTC)
        self._digest: str | None = None  # of the file last published: the heartbeat's

    @classmethod
    def open(
        cls,
        url: str,
        *,
        cluster: str,
        replica: str,
        history: int = 100,
        claim_keep: timedelta = CLAIM_KEEP,
        timeout: float = 5.0,
    ) -> PostgresStore:
        """Connect to the database at `url` (a libpq URL or conninfo) as replica `replica`
        of `cluster`, making or upgrading the tables as needed, and register the replica
        (its first heartbeat). `timeout`: seconds for connecting and for each statement.
        Raises StateError."""
        for what, name in (("cluster", cluster), ("replica", replica)):
            if not name or len(name) > 200 or not name.isprintable():
                raise StateError(f"a {what} name is 1 to 200 printable characters")
        store = cls(
            url, cluster=cluster, replica=replica, history=history, claim_keep=claim_keep,
            timeout=timeout,
        )  # fmt: skip
        try:
            store._make_schema()
            store.beat(store._started)
        except BaseException:
            store.close()
            raise
        return store

    # --- the connection and its transactions -------------------------------------------

    @property
    def location(self) -> str:
        return f"{show_url(self._url)} (cluster {self.cluster})"

    @property
    def replica(self) -> str:
        return self._replica

    def _connection(self) -> psycopg.Connection[Any]:
        """The connection, made again when the last one broke (a restarted server, a
        failover): every transaction stands alone, so nothing is lost with it."""
        if self._closed:
            raise StateError(f"{self.location}: the store is closed")
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        self._drop()
        seconds = max(2, round(self.timeout))  # libpq's connect_timeout: whole seconds, >= 2
        try:
            self._conn = psycopg.connect(
                self._url,
                autocommit=False,
                prepare_threshold=None,
                connect_timeout=seconds,
                application_name=f"crond {self._replica}"[:63],
                # A server gone silent (a partition): noticed by TCP in seconds, not hours.
                keepalives=1,
                keepalives_idle=max(1, seconds),
                keepalives_interval=1,
                keepalives_count=3,
                tcp_user_timeout=seconds * 1000,
            )
        except psycopg.Error as exc:
            raise self._failure(exc, "cannot connect") from None
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor[Any]]:
        """One short transaction (reads too: autocommit is off, and none may stay open).
        On any error it is rolled back, and the error reported as a StateError."""
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                # SET LOCAL's: it ends with the transaction, as a pooled server needs.
                cur.execute(
                    "SELECT set_config('statement_timeout', %s, true)",
                    (str(round(self.timeout * 1000)),),
                )
                yield cur
            conn.commit()
        except BaseException as exc:
            with contextlib.suppress(Exception):
                conn.rollback()
            if isinstance(exc, psycopg.Error):
                raise self._failure(exc) from None
            if isinstance(exc, (TypeError, ValueError, OverflowError, IndexError)):
                raise StateError(f"{self.location}: unexpected data ({exc})") from None
            raise

    def _all(self, query: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._transaction() as cur:
            cur.execute(query, params)
            return cur.fetchall()

    def _failure(self, exc: psycopg.Error, doing: str | None = None) -> StateError:
        """psycopg's error as the store's: its kind, SQLSTATE and first line, with every
        part of the URL that could be a secret cut out. Tables gone from under the daemon
        are `corrupt`: the daemon then opens the store again, which makes them."""
        diag = getattr(exc, "diag", None)
        primary = getattr(diag, "message_primary", None) if diag is not None else None
        text = _scrub(primary or str(exc), self._url)
        code = f" {exc.sqlstate}" if exc.sqlstate else ""
        head = f"{self.location}: {doing}" if doing else self.location
        gone = isinstance(exc, errors.UndefinedTable)
        return StateError(f"{head}: {type(exc).__name__}{code}: {text}", corrupt=gone)

    def close(self) -> None:
        self._closed = True
        self._drop()

    # --- the schema ---------------------------------------------------------------------

    def _make_schema(self) -> None:
        """The tables made, or upgraded, when they are not at this crond's version (under
        the migration lock, taken only then: a replica opening a made database waits for
        nobody)."""
        with self._transaction() as cur:
            version = schema_pg.version_of(cur)
        if version == schema_pg.SCHEMA_VERSION:
            return
        if version is not None:
            schema_pg.check(version, self.location)
        with self._transaction() as cur:
            schema_pg.make(cur, self.location)

    def check_in_place(self) -> None:
        """The tables are still there, at this crond's version (a restore of an older
        dump, say, would have the daemon write where it reads the wrong things)."""
        with self._transaction() as cur:
            cur.execute("SELECT version FROM crond_schema")
            row = cur.fetchone()
        if row is None or row[0] != schema_pg.SCHEMA_VERSION:
            raise StateError(
                f"{self.location}: the schema changed under the daemon ({row})", corrupt=True
            )

    def checkpoint(self) -> None:
        """Claims older than `claim_keep` pruned, a batch at a time."""
        before = datetime.now(UTC) - self.claim_keep
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM crond_claims WHERE ctid = ANY(ARRAY(SELECT ctid FROM crond_claims "
                "WHERE cluster = %s AND slot < %s LIMIT %s))",
                (self.cluster, before, _PRUNE_BATCH),
            )

    # --- reads (crond status, crond history) -------------------------------------------

    def get_meta(self, key: str) -> str | None:
        rows = self._all(
            "SELECT value FROM crond_meta WHERE cluster = %s AND key = %s", (self.cluster, key)
        )
        return str(rows[0][0]) if rows else None

    def last(self, job: str, *, outcome: str | None = None) -> AttemptRow | None:
        query = _ATTEMPTS + " WHERE cluster = %s AND job = %s"
        params: tuple[Any, ...] = (self.cluster, job)
        if outcome is not None:
            query += " AND outcome = %s"
            params += (outcome,)
        rows = self._all(query + " ORDER BY id DESC LIMIT 1", params)
        return self._decoded(lambda: _attempt_of(rows[0]) if rows else None)

    def recent(self, job: str | None, limit: int) -> list[AttemptRow]:
        if job is None:
            rows = self._all(
                _ATTEMPTS + " WHERE cluster = %s ORDER BY id DESC LIMIT %s", (self.cluster, limit)
            )
        else:
            rows = self._all(
                _ATTEMPTS + " WHERE cluster = %s AND job = %s ORDER BY id DESC LIMIT %s",
                (self.cluster, job, limit),
            )
        return self._decoded(lambda: [_attempt_of(r) for r in reversed(rows)])

    def summaries(self) -> dict[str, Summary]:
        rows = self._all(_SUMMARIES, (self.cluster,))
        return self._decoded(lambda: {r[0]: Summary._make(r) for r in rows})

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
        rows = self._all(
            "SELECT job, since, until, note, who FROM crond_pauses WHERE cluster = %s",
            (self.cluster,),
        )
        return self._decoded(lambda: {r[0]: _pause_of(r) for r in rows})

    def _decoded(self, build: Callable[[], T]) -> T:
        try:
            return build()
        except (TypeError, ValueError, OverflowError, IndexError, AttributeError) as exc:
            raise StateError(f"{self.location}: unexpected data in the store ({exc})") from None

    # --- runs ---------------------------------------------------------------------------

    def cursors(self) -> dict[str, datetime]:
        rows = self._all(
            "SELECT job, cursor FROM crond_cursors WHERE cluster = %s", (self.cluster,)
        )
        return self._decoded(lambda: {job: _utc(c) for job, c in rows})

    def save_cursors(self, cursors: Sequence[tuple[str, datetime]]) -> None:
        with self._transaction() as cur:
            self._move_cursors(cur, cursors)

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
        """Records without a claim: a retry (its run was claimed), or a run that is no
        slot's."""
        with self._transaction() as cur:
            row_id = self._record_start(cur, job, run_id, slot, attempt, started)
            self._move_cursors(cur, [(job, cursor)])
            return row_id

    def start_many(self, starts: Sequence[Start], started: datetime) -> list[int]:
        """Records without claims (as SQLite's): replicas use `claim_many`."""
        with self._transaction() as cur:
            ids = [self._record_start(cur, job, run_id, slot, 1, started)
                   for job, run_id, slot in starts]  # fmt: skip
            self._move_cursors(cur, [(job, slot) for job, _, slot in starts])
            return ids

    def claim_many(
        self, starts: Sequence[Start], started: datetime, *, copies: Sequence[str] | None = None
    ) -> list[int | None]:
        """Claims taken in the order of (job, slot, copy), whatever the starts' order, and
        the summaries and cursors after them in the order of jobs: replicas that race
        take their locks in one order, and never deadlock one another."""
        if copies is None:
            copies = [""] * len(starts)
        if len(copies) != len(starts):
            raise ValueError("claim_many: one copy a start")
        order = sorted(range(len(starts)), key=lambda i: (starts[i][0], starts[i][2], copies[i]))
        ids: list[int | None] = [None] * len(starts)
        with self._transaction() as cur:
            for i in order:
                job, run_id, slot = starts[i]
                cur.execute(_CLAIM, {
                    "cluster": self.cluster, "job": job, "slot": slot, "copy": copies[i],
                    "replica": self._replica, "run_id": run_id, "started": started,
                })  # fmt: skip
                row = cur.fetchone()
                ids[i] = None if row is None else int(row[0])
            won = sorted((starts[i], ids[i]) for i in order if ids[i] is not None)
            for (job, run_id, slot), row_id in won:
                cur.execute(_SUMMARY_STARTED, (self.cluster, job, row_id, run_id,
                    iso_utc(slot), 1, iso_utc(started), self._replica))  # fmt: skip
            self._move_cursors(cur, [(job, slot) for job, _, slot in starts])
        return ids

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
    ) -> None:
        with self._transaction() as cur:
            cur.execute(
                "UPDATE crond_attempts SET finished = %s, outcome = %s, exit_code = %s, "
                "duration_s = %s, output = %s WHERE id = %s AND cluster = %s "
                "AND run_id = coalesce(%s, run_id) AND job = %s RETURNING run_id, started",
                (finished, outcome, exit_code, duration_s, json.dumps(list(output)), row_id,
                 self.cluster, run_id, job),
            )  # fmt: skip
            row = cur.fetchone()
            if row is None:
                return  # not there (pruned, or another database's row): nothing to close
            self._summary_finished(cur, row_id, job, row, finished, outcome, exit_code,
                                   duration_s)  # fmt: skip
            cur.execute(
                "DELETE FROM crond_attempts WHERE cluster = %s AND job = %s "
                "AND finished IS NOT NULL AND id <= (SELECT id FROM crond_attempts "
                "WHERE cluster = %s AND job = %s ORDER BY id DESC LIMIT 1 OFFSET %s)",
                (self.cluster, job, self.cluster, job, self.history if keep is None else keep),
            )

    def close_lost(self, now: datetime) -> list[AttemptRow]:
        """The open attempts of this replica's name, left by its previous process."""
        with self._transaction() as cur:
            cur.execute(_CLOSE_LOST, (now, self.cluster, self._replica))
            rows = cur.fetchall()
            self._summaries_lost(cur, rows, now)
        return self._decoded(lambda: sorted(map(_attempt_of, rows), key=lambda r: r.id))

    def beat(self, now: datetime) -> None:
        with self._transaction() as cur:
            cur.execute(
                "INSERT INTO crond_replicas (cluster, name, pid, host, boot_id, started, "
                "last_beat, version, config_digest) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (cluster, name) DO UPDATE SET pid = excluded.pid, "
                "host = excluded.host, boot_id = excluded.boot_id, started = excluded.started, "
                "last_beat = excluded.last_beat, version = excluded.version, "
                "config_digest = excluded.config_digest",
                (self.cluster, self._replica, os.getpid(), socket.gethostname(), boot_id(),
                 self._started, now, __version__, self._digest),
            )  # fmt: skip

    def close_dead(self, now: datetime, timeout: timedelta) -> list[AttemptRow]:
        """One UPDATE of the open rows: a survivor racing this one waits for its row locks,
        then finds them closed (`finished IS NULL` is checked again on the row it waited
        for) and skips them. The dead replicas' notifications not yet delivered are this
        replica's to send from now on."""
        since = now - timeout
        with self._transaction() as cur:
            cur.execute(_CLOSE_DEAD, (now, self.cluster, self.cluster, self._replica, since))
            rows = cur.fetchall()
            self._summaries_lost(cur, rows, now)
            cur.execute(
                _TAKE_OUTBOX, (self._replica, self.cluster, self.cluster, self._replica, since)
            )
        return self._decoded(lambda: sorted(map(_attempt_of, rows), key=lambda r: r.id))

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as cur:
            cur.execute(
                "INSERT INTO crond_meta (cluster, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (cluster, key) DO UPDATE SET value = excluded.value",
                (self.cluster, key, _text(value)),
            )

    # --- notifications not yet delivered -----------------------------------------------

    def outbox_add(self, rows: Sequence[OutboxRow]) -> list[int]:
        ids = []
        with self._transaction() as cur:
            for r in rows:
                cur.execute(
                    "INSERT INTO crond_outbox (cluster, replica, kind, notifier, job, event, "
                    "body, created) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                    (self.cluster, self._replica, r.kind, r.notifier, r.job, r.event,
                     _text(r.body), r.created),
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

    # --- pauses (crond pause, resume) ----------------------------------------------------

    def set_pause(self, row: PauseRow) -> None:
        with self._transaction() as cur:
            cur.execute(
                "INSERT INTO crond_pauses (cluster, job, since, until, note, who) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (cluster, job) DO UPDATE SET "
                "since = excluded.since, until = excluded.until, note = excluded.note, "
                "who = excluded.who",
                (self.cluster, row.job, row.since, row.until,
                 None if row.note is None else _text(row.note), _text(row.by)),
            )  # fmt: skip

    def clear_pause(self, job: str) -> None:
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM crond_pauses WHERE cluster = %s AND job = %s", (self.cluster, job)
            )

    # --- the view -----------------------------------------------------------------------

    def publish_view(self, rows: Iterable[ViewRow], digest: str | None) -> None:
        """Only the rows that differ from the view's are written, as SQLite's."""
        new = list(_values(rows))
        self._digest = digest
        with self._transaction() as cur:
            cur.execute(
                f"SELECT {_VIEW_KEYS} FROM crond_view WHERE cluster = %s",  # noqa: S608
                (self.cluster,),
            )
            old = {row[0]: tuple(row) for row in cur.fetchall()}
            gone = [pos for pos, row in old.items() if pos >= len(new) or new[pos] != row]
            cur.execute(
                "DELETE FROM crond_view WHERE cluster = %s AND pos = ANY(%s)", (self.cluster, gone)
            )
            cur.executemany(
                f"INSERT INTO crond_view (cluster, {_VIEW_KEYS}) "  # noqa: S608
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(self.cluster, *row) for row in new if old.get(row[0]) != row],
            )
            cur.execute(
                "INSERT INTO crond_meta (cluster, key, value) VALUES (%s, 'view_sha256', %s) "
                "ON CONFLICT (cluster, key) DO UPDATE SET value = excluded.value",
                (self.cluster, digest or ""),
            )

    def update_view(
        self, moved: Sequence[ViewRow], cursors: Sequence[tuple[str, datetime]] = ()
    ) -> None:
        with self._transaction() as cur:
            cur.executemany(
                "UPDATE crond_view SET next_at = %s, next_text = %s, next_local = %s, "
                "next_note = %s WHERE cluster = %s AND job = %s",
                [(r.next_at, r.next_text, r.next_local, r.next_note, self.cluster, r.job)
                 for r in moved],
            )  # fmt: skip
            self._move_cursors(cur, cursors)

    # --- the writes' parts ----------------------------------------------------------------

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
        cur.execute(
            "INSERT INTO crond_attempts (cluster, run_id, job, slot, attempt, started, replica) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (self.cluster, run_id, job, slot, attempt, started, self._replica),
        )
        row_id = int(cur.fetchone()[0])  # type: ignore[index]
        cur.execute(_SUMMARY_STARTED, (self.cluster, job, row_id, run_id, iso_utc(slot),
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
            (run_id, iso_utc(_utc(began)), iso_utc(finished), duration_s, self.cluster, job),
        )

    def _summaries_lost(self, cur: psycopg.Cursor[Any], rows: list[Any], now: datetime) -> None:
        if rows:
            cur.execute(
                "UPDATE crond_summary SET finished = %s, outcome = 'lost' "
                "WHERE cluster = %s AND last_id = ANY(%s)",
                (iso_utc(now), self.cluster, [r[0] for r in rows]),
            )


def _utc(at: datetime) -> datetime:
    """A timestamptz as read (in the session's zone, whatever the server's) in UTC."""
    return at.astimezone(UTC)


def _text(value: str) -> str:
    """Text PostgreSQL takes: it refuses the NUL character (SQLite keeps it)."""
    return value.replace("\x00", "\ufffd")


def _attempt_of(row: Sequence[Any]) -> AttemptRow:
    """An attempt as `_ATTEMPTS` (or `_CLOSED`) selects it, as a value."""
    return AttemptRow(
        id=int(row[0]),
        run_id=row[1],
        job=row[2],
        slot=_utc(row[3]),
        attempt=row[4],
        started=_utc(row[5]),
        finished=None if row[6] is None else _utc(row[6]),
        outcome=row[7],
        exit_code=row[8],
        duration_s=row[9],
        output=json.loads(row[10]) if row[10] else [],
        replica=row[11],
    )


def _pause_of(row: Sequence[Any]) -> PauseRow:
    until = None if row[2] is None else _utc(row[2])
    return PauseRow(str(row[0]), _utc(row[1]), until, row[3], str(row[4]))


def _values(rows: Iterable[ViewRow]) -> Iterator[tuple[Any, ...]]:
    """View rows as the view table's rows, numbered in order."""
    for i, r in enumerate(rows):
        yield (i, r.job, bool(r.enabled), r.schedule, r.next_at, r.next_text, r.next_local,
               r.next_note)  # fmt: skip


def _scrub(text: str, url: str) -> str:
    """A message from libpq or the server with the URL and its parts that may be secret
    (password, user, database, a conninfo's whole text) cut out; its first line, bounded."""
    secrets = {url}
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:
        parts = {}
    for key in ("password", "user", "dbname", "passfile", "sslpassword", "service"):
        value = parts.get(key)
        if value:
            secrets.add(str(value))
    lines = text.strip().splitlines()
    line = lines[0] if lines else ""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 2:  # one character would cut up every word
            line = line.replace(secret, "…")
    if len(line) > _MAX_MESSAGE:
        line = line[:_MAX_MESSAGE] + "…"
    return line
