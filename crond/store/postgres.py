"""The state store in PostgreSQL, shared by the replicas of a cluster: each slot of each job
starts at most once across all of them.

A replica claims `(cluster, job, slot, copy)` in the same transaction that records the
run's start (`claim_many`); the claims table's primary key is the guard, so of replicas
racing for a slot exactly one commits its claim and runs it, the others get None. No
timer, no session or advisory lock, no temporary table, no prepared statement outlives
its transaction: every guarantee holds through a transaction-pooling PgBouncer and a
failover. Transactions are short, autocommit is off, and every one sets its own
`statement_timeout`, so a stuck database holds the daemon for seconds, not for ever.

`PostgresStore` is assembled from parts, each a module: the connection, its transactions
and its errors (`pg_conn`: no message holds the URL's password, user or database), the
reads (`pg_read`), the cluster (`pg_cluster`: a replica's name, heartbeats, dead
replicas, kill requests), the runs and their claims (`pg_write`), the runs claimed and
never started (`pg_abandon`), the pauses and the outbox (`pg_records`); here, opening
it (as a replica, or as a reader that writes nothing), the schema, and the rest of the
writes (the view, the marks, the upkeep). A replica opens it with `daemon.database`
(crond/daemon/lifecycle.py), `crond.store.locate` for reading; docs/state.md describes the
tables, the claim and the replicas' rules. The schema is crond/store/schema_pg.py. psycopg
(the `crond[postgres]` extra) is imported by these modules only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from crond.store import schema_pg
from crond.store.base import StateError, ViewRow
from crond.store.pg_abandon import Abandons
from crond.store.pg_backfills import Backfills
from crond.store.pg_chains import ChainedRows
from crond.store.pg_cluster import ClusterRows
from crond.store.pg_conn import patient, text
from crond.store.pg_follow import TailWrites
from crond.store.pg_read import Reads
from crond.store.pg_records import Outbox, Pauses
from crond.store.pg_write import Claiming

__all__ = ["CLAIM_KEEP", "PostgresStore"]

# How long a claim is kept after its slot: longer than any catch-up window a replica could
# still act on, so a slot never loses its claim while some replica might reach it again.
CLAIM_KEEP = timedelta(days=35)
# How long a replica's row outlives its last heartbeat (its name is free long before).
REPLICA_KEEP = timedelta(days=7)
# Claims pruned at most per `checkpoint` (one short transaction, off the start path).
_PRUNE_BATCH = 5000
_VIEW_KEYS = "pos, job, enabled, schedule, next_at, next_text, next_local, next_note"
# The name a reader's store has: it registers no replica, and writes nothing.
_READER = ""


class PostgresStore(
    Claiming, Abandons, ChainedRows, Backfills, Pauses, Outbox, ClusterRows, TailWrites, Reads
):
    """The store of one replica of a cluster, in a PostgreSQL database (base.Store,
    base.Replicated), or a cluster read by `crond status` (`reader`: base.ClusterReader).
    Its parts, each over the one Connection of pg_conn.py: Claiming and its Runs
    (pg_write.py: claims, starts, ends), Abandons (pg_abandon.py: claims in doubt),
    ChainedRows (pg_chains.py: chained runs not yet started),
    Pauses and Outbox (pg_records.py), ClusterRows (pg_cluster.py: heartbeats, lost
    replicas, kill requests), Reads (pg_read.py: status and history); the view is here.
    Not thread-safe: use it from one thread (the event loop's)."""

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
        """Use `open` or `reader`: this makes no connection."""
        super().__init__(url, cluster=cluster, replica=replica, timeout=timeout)
        self._started = datetime.now(UTC)
        self._digest = None
        self.history = history
        self.claim_keep = claim_keep
        self.moved_aside: str | None = None  # a database is never moved aside

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
        replica_timeout: timedelta = timedelta(seconds=30),
    ) -> PostgresStore:
        """Connect to the database at `url` (a libpq URL or conninfo) as replica `replica`
        of `cluster`, making or upgrading the tables as needed, and register the replica
        (its first heartbeat). `timeout`: seconds for connecting and for each statement;
        `replica_timeout`: how fresh another host's heartbeat of this name must be for it
        to hold the name (pg_cluster). Raises ReplicaTaken while a live process holds the
        name, StateError for the rest."""
        _check_name("cluster", cluster)
        _check_name("replica", replica)
        store = cls(
            url, cluster=cluster, replica=replica, history=history, claim_keep=claim_keep,
            timeout=timeout,
        )  # fmt: skip
        try:
            store._make_schema()
            store._register(replica_timeout)
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def reader(cls, url: str, *, cluster: str, timeout: float = 5.0) -> PostgresStore:
        """The cluster for `crond status` and `history`: every transaction read-only (the
        server refuses a write), no table made, no replica registered. Raises StateError
        when the database has no crond tables, another schema, or no replica of this
        cluster has used it."""
        _check_name("cluster", cluster)
        store = cls(
            url, cluster=cluster, replica=_READER, history=0, claim_keep=CLAIM_KEEP,
            timeout=timeout,
        )  # fmt: skip
        store._read_only = True
        try:
            store.check_readable()
        except BaseException:
            store.close()
            raise
        return store

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
            found = "gone" if row is None else f"now version {row[0]}"
            raise StateError(
                f"{self.location}: the tables changed under the daemon ({found}, this crond "
                f"uses version {schema_pg.SCHEMA_VERSION})",
                corrupt=True,
            )

    def checkpoint(self) -> None:
        """Claims older than `claim_keep` pruned, a batch at a time; kill requests older
        than an hour; replicas silent for a week (each pod of a Deployment ever started
        leaves one; their runs were closed as lost by the others long before)."""
        # Ages by the database's clock (the one every replica's skew is measured against):
        # the daemon reads time only through its Clock, and this is no schedule's.
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM crond_replicas WHERE cluster = %s AND last_beat < now() - %s",
                (self.cluster, REPLICA_KEEP),
            )
            cur.execute(
                "DELETE FROM crond_claims WHERE ctid = ANY(ARRAY(SELECT ctid FROM crond_claims "
                "WHERE cluster = %s AND slot < now() - %s LIMIT %s))",
                (self.cluster, self.claim_keep, _PRUNE_BATCH),
            )
            self._prune_kills(cur)

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as cur:
            cur.execute(
                "INSERT INTO crond_meta (cluster, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (cluster, key) DO UPDATE SET value = excluded.value",
                (self.cluster, key, text(value)),
            )

    # --- the view -----------------------------------------------------------------------

    def publish_view(self, rows: Iterable[ViewRow], digest: str | None) -> None:
        """Only the rows that differ from the view's are written, as SQLite's."""
        new = list(_values(rows))
        self._digest = digest
        with self._transaction() as cur:
            # Replicas publish the one view of their cluster: one at a time (a lock that
            # ends with the transaction, as a pooled server needs; it guards nothing else).
            patient(cur)  # another replica's publish, however many rows, is waited for
            cur.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('crond_view ' || %s, 0))",
                (self.cluster,),
            )
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
        self,
        moved: Sequence[ViewRow],
        cursors: Sequence[tuple[str, datetime]] = (),
        first: Sequence[tuple[str, datetime]] = (),
    ) -> None:
        # Every replica moves the same rows: in the order of jobs, so that two never wait
        # for each other's row locks in a circle (a deadlock, one of them rolled back).
        with self._transaction() as cur:
            cur.executemany(
                "INSERT INTO crond_cursors (cluster, job, cursor) VALUES (%s, %s, %s) "
                "ON CONFLICT (cluster, job) DO NOTHING",
                [(self.cluster, job, at) for job, at in sorted(first)],
            )
            cur.executemany(
                "UPDATE crond_view SET next_at = %s, next_text = %s, next_local = %s, "
                "next_note = %s WHERE cluster = %s AND job = %s",
                [(r.next_at, r.next_text, r.next_local, r.next_note, self.cluster, r.job)
                 for r in sorted(moved, key=lambda r: r.job)],
            )  # fmt: skip
            self._move_cursors(cur, cursors)


def _check_name(what: str, name: str) -> None:
    if not name or len(name) > 200 or not name.isprintable():
        raise StateError(f"a {what} name is 1 to 200 printable characters")


def _values(rows: Iterable[ViewRow]) -> Iterator[tuple[Any, ...]]:
    """View rows as the view table's rows, numbered in order."""
    for i, r in enumerate(rows):
        yield (i, r.job, bool(r.enabled), r.schedule, r.next_at, r.next_text, r.next_local,
               r.next_note)  # fmt: skip
