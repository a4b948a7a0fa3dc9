"""The PostgreSQL store's connection: one connection a store, made again when it breaks,
and every call one short transaction with its own statement timeout; every psycopg error
turned into a StateError with nothing of the URL that could be a secret.

No session state outlives a transaction (no session or advisory lock, no temporary
table, no prepared statement: `prepare_threshold=None`; the timeouts are `SET LOCAL`'s), so
every guarantee of the store holds through a transaction-pooling PgBouncer and a
failover. The server bounds each transaction too, whatever its client does: a lock wait
(LOCK_TIMEOUT) and a transaction left idle (IDLE_TIMEOUT: a replica frozen inside one,
whose locks would hold the others) end it. Also the row decoders the other parts share.
crond/store/postgres.py is the store; docs/state.md what it keeps, docs/replicas.md the
bounds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict

from crond.clock import iso_utc
from crond.config.secrets import show_url
from crond.store.base import AttemptRow, PauseRow, StateError

T = TypeVar("T")

# The longest a message quoted from the server or libpq may be in a StateError.
_MAX_MESSAGE = 300

# Server-side bounds of every transaction (docs/replicas.md), set with the statement
# timeout. A lock wait: longer than a peer's claim transaction ever takes (milliseconds),
# short enough that a claim blocked by a frozen peer is refused (`database`, retried) well
# within the daemon's two seconds. Idle inside a transaction: a client never is but
# between its own statements (milliseconds), so only a stalled process (a GC pause,
# SIGSTOP) is; the server then ends its session and the locks it held go.
LOCK_TIMEOUT = 0.5
IDLE_TIMEOUT = 2.0

ATTEMPTS = (
    "SELECT id, run_id, job, slot, attempt, started, finished, outcome, exit_code, duration_s, "
    "output, replica, late_finished, late_outcome, late_exit_code, kind FROM crond_attempts"
)
PAUSES = "SELECT job, since, until, note, who FROM crond_pauses WHERE cluster = %s"


# A job's summary shows the attempt just recorded (its start) as its newest.
SUMMARY_STARTED = """
INSERT INTO crond_summary (cluster, job, last_id, run_id, slot, attempt, started, replica)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (cluster, job) DO UPDATE SET last_id = excluded.last_id, run_id = excluded.run_id,
    slot = excluded.slot, attempt = excluded.attempt, started = excluded.started,
    replica = excluded.replica, finished = NULL, outcome = NULL, exit_code = NULL,
    duration_s = NULL
"""


class Connection:
    """A store's connection to its database, for one thread (the event loop's), and the
    transactions its calls run in. `read_only`: every transaction is (`crond status`)."""

    def __init__(
        self, url: str, *, cluster: str, replica: str, timeout: float, read_only: bool = False
    ) -> None:
        self._url = url
        self.cluster = cluster
        self._replica = replica
        self.timeout = timeout
        self._read_only = read_only
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self.lock_timeout = min(LOCK_TIMEOUT, timeout)
        self.idle_timeout = IDLE_TIMEOUT

    @property
    def location(self) -> str:
        return f"{show_url(self._url)} (cluster {self.cluster})"

    def _connection(self) -> psycopg.Connection[Any]:
        """The connection, made again when the last one broke (a restarted server, a
        failover): every transaction stands alone, so nothing is lost with it."""
        if self._closed:
            raise StateError(f"{self.location}: the store is closed")
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        self._drop()
        seconds = max(2, round(self.timeout))  # libpq's connect_timeout: whole seconds, >= 2
        name = f"crond {self._replica}" if self._replica else "crond (reading)"
        try:
            self._conn = psycopg.connect(
                self._url,
                autocommit=False,
                prepare_threshold=None,
                connect_timeout=seconds,
                application_name=name[:63],
                # A server gone silent (a partition): noticed by TCP in seconds, not hours.
                keepalives=1,
                keepalives_idle=max(1, seconds),
                keepalives_interval=1,
                keepalives_count=3,
                tcp_user_timeout=seconds * 1000,
            )
            self._conn.read_only = self._read_only  # BEGIN READ ONLY: the server refuses writes
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
                # SET LOCAL's: they end with the transaction, as a pooled server needs (the
                # idle timeout too: the server reads it whenever the session goes idle).
                cur.execute(
                    "SELECT set_config('statement_timeout', %s, true), "
                    "set_config('lock_timeout', %s, true), "
                    "set_config('idle_in_transaction_session_timeout', %s, true)",
                    [str(round(s * 1000)) for s in (self.timeout, self.lock_timeout,
                                                     self.idle_timeout)],
                )  # fmt: skip
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

    def _decoded(self, build: Callable[[], T]) -> T:
        try:
            return build()
        except (TypeError, ValueError, OverflowError, IndexError, AttributeError) as exc:
            raise StateError(f"{self.location}: unexpected data in the store ({exc})") from None

    def _failure(self, exc: psycopg.Error, doing: str | None = None) -> StateError:
        """psycopg's error as the store's: its kind, SQLSTATE and first line, with every
        part of the URL that could be a secret cut out. Tables gone from under the daemon
        are `corrupt`: the daemon then opens the store again, which makes them."""
        diag = getattr(exc, "diag", None)
        primary = getattr(diag, "message_primary", None) if diag is not None else None
        text = scrub(primary or str(exc), self._url)
        code = f" {exc.sqlstate}" if exc.sqlstate else ""
        head = f"{self.location}: {doing}" if doing else self.location
        gone = isinstance(exc, errors.UndefinedTable)
        return StateError(f"{head}: {type(exc).__name__}{code}: {text}", corrupt=gone)

    def close(self) -> None:
        self._closed = True
        self._drop()

    def cut(self) -> None:
        """From any thread: shut the connection's socket down, so that a call waiting on a
        server that does not answer returns at once, the connection broken (the next call
        connects again). docs/design.md, "The store off the loop"."""
        conn = self._conn
        if conn is None or conn.closed:
            return
        with (
            contextlib.suppress(OSError, psycopg.Error),
            socket.socket(fileno=os.dup(conn.pgconn.socket)) as dup,
        ):
            dup.shutdown(socket.SHUT_RDWR)

    def _summaries_lost(self, cur: psycopg.Cursor[Any], rows: list[Any], now: datetime) -> None:
        """The summaries of attempts just closed as `lost` say so."""
        if rows:
            cur.execute(
                "UPDATE crond_summary SET finished = %s, outcome = 'lost' "
                "WHERE cluster = %s AND last_id = ANY(%s)",
                (iso_utc(now), self.cluster, [r[0] for r in rows]),
            )


def patient(cur: psycopg.Cursor[Any]) -> None:
    """For the rest of the transaction, a lock wait is bounded by the statement timeout
    only, not LOCK_TIMEOUT: the waits for a peer's long but live work (a schema upgrade,
    a view published), never a claim's."""
    cur.execute("SELECT set_config('lock_timeout', '0', true)")


def utc(at: datetime) -> datetime:
    """A timestamptz as read (in the session's zone, whatever the server's) in UTC."""
    return at.astimezone(UTC)


def text(value: str) -> str:
    """Text PostgreSQL takes: it refuses the NUL character (SQLite keeps it)."""
    return value.replace("\x00", "\ufffd")


def attempt_of(row: Sequence[Any]) -> AttemptRow:
    """An attempt as `ATTEMPTS` (or a RETURNING of the same columns) selects it."""
    return AttemptRow(
        id=int(row[0]),
        run_id=row[1],
        job=row[2],
        slot=utc(row[3]),
        attempt=row[4],
        started=utc(row[5]),
        finished=None if row[6] is None else utc(row[6]),
        outcome=row[7],
        exit_code=row[8],
        duration_s=row[9],
        output=json.loads(row[10]) if row[10] else [],
        replica=row[11],
        **_late(row[12:15]),
        kind=row[15] if len(row) > 15 else None,  # (a backfill's run: docs/schedules.md)
    )


def _late(row: Sequence[Any]) -> dict[str, Any]:
    """The late end's columns of an attempt's row, when it has them (`_CLOSED` has not)."""
    if not row or row[0] is None:
        return {}
    return {"late_finished": utc(row[0]), "late_outcome": row[1], "late_exit_code": row[2]}


def pause_of(row: Sequence[Any]) -> PauseRow:
    """A pause as `PAUSES` selects it."""
    until = None if row[2] is None else utc(row[2])
    return PauseRow(str(row[0]), utc(row[1]), until, row[3], str(row[4]))


# Cut out wherever they appear: the secrets proper.
_SECRET_KEYS = ("password", "passfile", "sslpassword")
# Cut out only where libpq or the server names them ("role "crond" does not exist",
# `permission denied for database crond`): a role called crond must not cut a socket's
# directory `crond-pg-1a2b` or a host `crond-db.internal` into pieces.
_NAME_KEYS = ("user", "dbname", "service")


def scrub(message: str, url: str) -> str:
    """A message from libpq or the server, its first line, bounded, with the secrets of
    `url` cut out: the URL itself (a conninfo's whole text), the password (and the
    password file's path) wherever they appear; the role, database and service names
    where the message quotes or names them, never inside a host name or a path."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:
        parts = {}
    lines = message.strip().splitlines()
    line = lines[0] if lines else ""
    secrets = {url, *(str(parts[key]) for key in _SECRET_KEYS if parts.get(key))}
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 2:  # one character would cut up every word
            line = line.replace(secret, "…")
    for key in _NAME_KEYS:
        name = parts.get(key)
        if name:
            line = _named(str(name)).sub("…", line)
    if len(line) > _MAX_MESSAGE:
        line = line[:_MAX_MESSAGE] + "…"
    return line


def _named(name: str) -> re.Pattern[str]:
    """`name` where a message names it: in double quotes, or as the word after
    "database", "role" or "user"."""
    word = re.escape(name)
    after = "|".join(rf"(?<=\b{said} )" for said in ("database", "role", "user"))
    return re.compile(rf'(?<="){word}(?=")|(?:{after}){word}(?![\w-]|\.\w)')
