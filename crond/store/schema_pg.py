"""The PostgreSQL store's schema: its tables, its version, and how a database gets them.

One database may hold several clusters (replicas sharing slots under one name): every
table carries the cluster in its key, so two clusters never see each other's rows. The
tables are prefixed `crond_` so that they can live beside an application's. The claim of
a slot is a row of `crond_claims`, whose primary key `(cluster, job, slot, copy)` is the
whole guard: of the replicas that insert the same key only one commits it; a slot's
`replicas: all` claims share its key of copy "" too (`each`, below: docs/state.md).

The tables are made at the first open and the schema is versioned (`crond_schema`, one
row). A later crond upgrades an older version in place under a transaction-scoped
advisory lock, so of replicas starting together one does it and the others wait, then see
it done; a newer version is refused, never misread.
"""

from __future__ import annotations

from typing import Any

from crond.store.base import StateError

SCHEMA_VERSION = 8
# Kill requests (`crond kill` reaching every replica): new in schema 2.
_KILLS = (
    """CREATE TABLE IF NOT EXISTS crond_kills (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        cluster text NOT NULL,
        target text NOT NULL,  -- a job's name or a run id
        who text NOT NULL,  -- JSON text: who asked
        replica text NOT NULL,  -- the replica that took the request
        requested timestamptz NOT NULL
    )""",
    # The poll's index: the requests after the last one seen, and the newest id.
    "CREATE INDEX IF NOT EXISTS crond_kills_cluster ON crond_kills (cluster, id)",
)
# Who ended each job's last pause (`crond resume` through one replica, logged with its
# `by` by the others): new in schema 3. One row a job, replaced by the next resume.
_RESUMES = (
    """CREATE TABLE IF NOT EXISTS crond_resumes (
        cluster text NOT NULL,
        job text NOT NULL,
        since timestamptz NOT NULL,  -- the `since` of the pause it ended
        who text NOT NULL,  -- JSON text: who asked
        resumed timestamptz NOT NULL,
        PRIMARY KEY (cluster, job)
    )""",
)
# New in schema 4 (docs/replicas.md). The end of an attempt already closed `lost`, kept
# beside it. And the claims of a slot whatever each replica's file says of the job: a
# `replicas: all` claim first inserts (or finds) its slot's row of copy "" marked `each`
# (no run of its own: the anchor), so a `one` claim (copy "") of the slot conflicts with
# it, and an `all` claim with a `one` claim: a slot runs once, or once a replica, never
# both. The anchors of the `all` claims made before are added.
_LATE_AND_EACH = (
    """ALTER TABLE crond_attempts ADD COLUMN IF NOT EXISTS late_finished timestamptz,
        ADD COLUMN IF NOT EXISTS late_outcome text,
        ADD COLUMN IF NOT EXISTS late_exit_code integer""",
    "ALTER TABLE crond_claims ADD COLUMN IF NOT EXISTS each boolean NOT NULL DEFAULT false",
    """INSERT INTO crond_claims (cluster, job, slot, copy, replica, run_id, claimed, each)
        SELECT DISTINCT ON (cluster, job, slot) cluster, job, slot, '', replica, '',
            claimed, true
        FROM crond_claims WHERE copy <> '' ORDER BY cluster, job, slot, claimed
        ON CONFLICT DO NOTHING""",
)
# New in schema 5 (docs/schedules.md, `max_runs`): each job's scheduled runs so far, one
# row a job, counted in the transaction that claims the run: a claim past the job's
# `max_runs` is refused, whichever replica asks.
_RUN_COUNTS = (
    """CREATE TABLE IF NOT EXISTS crond_run_counts (
        cluster text NOT NULL,
        job text NOT NULL,
        runs bigint NOT NULL,
        PRIMARY KEY (cluster, job)
    )""",
)
# New in schema 6 (docs/web.md, the dashboard): each replica's clock skew as its last
# heartbeat measured it, kept with its heartbeat; and the runs a dashboard watches, with
# the output tail the replica running each writes (crond/store/pg_follow.py).
_WEB = (
    "ALTER TABLE crond_replicas ADD COLUMN IF NOT EXISTS clock_skew_s double precision",
    """CREATE TABLE IF NOT EXISTS crond_follows (
        cluster text NOT NULL,
        run_id text NOT NULL,
        until timestamptz NOT NULL,  -- the database's clock: asked for until then
        lines text,  -- JSON: the last lines, [[stream, line], ...]
        seen bigint NOT NULL DEFAULT 0,  -- lines seen in all
        ended boolean NOT NULL DEFAULT false,
        written timestamptz,
        PRIMARY KEY (cluster, run_id)
    )""",
)
# New in schema 7 (docs/schedules.md, "Backfill"): backfills, one row each, kept after
# they end; at most one running a job in a cluster (the partial unique index). A slot's
# run is claimed by a row of crond_claims of copy 'backfill:ID' (its backfill's, apart
# from the slot's scheduled claim of copy ""), in the transaction that records its
# attempt (`kind` 'backfill') and moves the backfill's progress.
_BACKFILLS = (
    """CREATE TABLE IF NOT EXISTS crond_backfills (
        cluster text NOT NULL,
        id text NOT NULL,
        job text NOT NULL,
        range_from timestamptz NOT NULL,
        range_to timestamptz NOT NULL,
        total integer NOT NULL,
        started integer NOT NULL DEFAULT 0,
        last_slot timestamptz,
        next_slot timestamptz,
        succeeded integer NOT NULL DEFAULT 0,
        failed integer NOT NULL DEFAULT 0,
        state text NOT NULL,  -- running, finished, cancelled
        created timestamptz NOT NULL,
        ended timestamptz,
        who text NOT NULL,  -- JSON text: who asked
        PRIMARY KEY (cluster, id)
    )""",
    """CREATE UNIQUE INDEX IF NOT EXISTS crond_backfills_going ON crond_backfills
        (cluster, job) WHERE state = 'running'""",
    "ALTER TABLE crond_attempts ADD COLUMN IF NOT EXISTS kind text",
)
# New in schema 8 (docs/workflows.md, "With replicas"): the named locks. A lock's row is
# locked (FOR UPDATE, in the order of names) by each claim that needs it, so its holders
# are counted by one claim at a time; a run's holds are rows of crond_lock_holds, taken in
# the transaction that claims its slot and deleted at its run's end, or when its replica
# is found dead or its runs are closed lost (crond/store/pg_locks.py). And the chained
# runs (docs/workflows.md): one row a child's run a parent's end starts, inserted in the
# commit of that end, deleted in the commit that claims the child's run (copy
# 'after:PARENT_RUN_ID': once, whichever replica) or when it is dropped; `replica` the one
# to start it, whose rows a survivor takes over when it is found dead (crond/store/pg_chains.py).
_LOCKS = (
    """CREATE TABLE IF NOT EXISTS crond_locks (
        cluster text NOT NULL,
        name text NOT NULL,
        PRIMARY KEY (cluster, name)
    )""",
    """CREATE TABLE IF NOT EXISTS crond_lock_holds (
        cluster text NOT NULL,
        name text NOT NULL,
        run_id text NOT NULL,
        job text NOT NULL,
        slot timestamptz NOT NULL,
        replica text NOT NULL,
        taken timestamptz NOT NULL,
        PRIMARY KEY (cluster, name, run_id)
    )""",
    "CREATE INDEX IF NOT EXISTS crond_lock_holds_run ON crond_lock_holds (cluster, run_id)",
    """CREATE INDEX IF NOT EXISTS crond_lock_holds_replica ON crond_lock_holds
        (cluster, replica)""",
    """CREATE TABLE IF NOT EXISTS crond_chained (
        cluster text NOT NULL,
        job text NOT NULL,
        parent_run_id text NOT NULL,
        parent_job text NOT NULL,
        outcome text NOT NULL,
        exit_code integer,
        slot timestamptz NOT NULL,
        replica text NOT NULL,
        PRIMARY KEY (cluster, job, parent_run_id)
    )""",
)
# version -> the statements that bring it to version + 1.
UPGRADES: dict[int, tuple[str, ...]] = {
    1: _KILLS,
    2: _RESUMES,
    3: _LATE_AND_EACH,
    4: _RUN_COUNTS,
    5: _WEB,
    6: _BACKFILLS,
    7: _LOCKS,
}
# The transaction-scoped advisory lock the creation and upgrades run under (any constant
# of our own: "crond" in ASCII). Only the migration takes it; claims never do.
MIGRATION_LOCK = 0x63726F6E64

TABLES = (
    # The schema's version: one row (`one` is always true).
    """CREATE TABLE IF NOT EXISTS crond_schema (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        version integer NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS crond_meta (
        cluster text NOT NULL,
        key text NOT NULL,
        value text NOT NULL,
        PRIMARY KEY (cluster, key)
    )""",
    """CREATE TABLE IF NOT EXISTS crond_cursors (
        cluster text NOT NULL,
        job text NOT NULL,
        cursor timestamptz NOT NULL,
        PRIMARY KEY (cluster, job)
    )""",
    """CREATE TABLE IF NOT EXISTS crond_attempts (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        cluster text NOT NULL,
        run_id text NOT NULL,
        job text NOT NULL,
        slot timestamptz NOT NULL,
        attempt integer NOT NULL,
        started timestamptz NOT NULL,
        finished timestamptz,
        outcome text,
        exit_code integer,
        duration_s double precision,
        output text,
        replica text NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS crond_attempts_job ON crond_attempts (cluster, job, id)",
    "CREATE INDEX IF NOT EXISTS crond_attempts_cluster ON crond_attempts (cluster, id)",
    # The open attempts of a replica: close_lost and close_dead, without a scan.
    """CREATE INDEX IF NOT EXISTS crond_attempts_open ON crond_attempts (cluster, replica)
        WHERE finished IS NULL""",
    # One row a slot run: the claim. `copy` is "" for a job one replica runs, the
    # replica's name for one each replica runs. Kept after the attempt's row is pruned
    # (the claim outlives the history), until `checkpoint` prunes it by its age.
    """CREATE TABLE IF NOT EXISTS crond_claims (
        cluster text NOT NULL,
        job text NOT NULL,
        slot timestamptz NOT NULL,
        copy text NOT NULL,
        replica text NOT NULL,  -- the replica that won it
        run_id text NOT NULL,
        claimed timestamptz NOT NULL,
        PRIMARY KEY (cluster, job, slot, copy)
    )""",
    "CREATE INDEX IF NOT EXISTS crond_claims_slot ON crond_claims (cluster, slot)",
    # As SQLite's summary: one row a job, instants as ISO-8601 text (clock.iso_utc).
    """CREATE TABLE IF NOT EXISTS crond_summary (
        cluster text NOT NULL,
        job text NOT NULL,
        last_id bigint,
        run_id text,
        slot text,
        attempt integer,
        started text,
        finished text,
        outcome text,
        exit_code integer,
        duration_s double precision,
        success_run_id text,
        success_started text,
        success_finished text,
        success_duration_s double precision,
        replica text,
        PRIMARY KEY (cluster, job)
    )""",
    """CREATE TABLE IF NOT EXISTS crond_view (
        cluster text NOT NULL,
        pos integer NOT NULL,
        job text NOT NULL,
        enabled boolean NOT NULL,
        schedule text NOT NULL,
        next_at double precision,
        next_text text,
        next_local text,
        next_note text,
        PRIMARY KEY (cluster, pos),
        UNIQUE (cluster, job)
    )""",
    "CREATE INDEX IF NOT EXISTS crond_view_next ON crond_view (cluster, next_at)",
    # Notifications not yet delivered, each held by one replica (the one that made it, or
    # the survivor that took over a dead one's): no notification is sent twice.
    """CREATE TABLE IF NOT EXISTS crond_outbox (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        cluster text NOT NULL,
        replica text NOT NULL,
        kind text NOT NULL,
        notifier text NOT NULL,
        job text NOT NULL,
        event text NOT NULL,
        body text NOT NULL,
        created double precision NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS crond_outbox_replica ON crond_outbox (cluster, replica, id)",
    """CREATE TABLE IF NOT EXISTS crond_pauses (
        cluster text NOT NULL,
        job text NOT NULL,
        since timestamptz NOT NULL,
        until timestamptz,
        note text,
        who text NOT NULL,
        PRIMARY KEY (cluster, job)
    )""",
    # The replicas' heartbeats: one row a replica name.
    """CREATE TABLE IF NOT EXISTS crond_replicas (
        cluster text NOT NULL,
        name text NOT NULL,
        pid integer NOT NULL,
        host text NOT NULL,
        boot_id text,
        started timestamptz NOT NULL,
        last_beat timestamptz NOT NULL,
        version text NOT NULL,
        config_digest text,
        PRIMARY KEY (cluster, name)
    )""",
    *_KILLS,
    *_RESUMES,
    *_LATE_AND_EACH,
    *_RUN_COUNTS,
    *_WEB,
    *_BACKFILLS,
    *_LOCKS,
)


def version_of(cur: Any) -> int | None:
    """The version the database says it has; None when it has no `crond_schema` table or
    no row (`cur`: a psycopg cursor, inside a transaction)."""
    # The catalog read as a table, with the statement's snapshot: `to_regclass` looks in
    # the catalog cache, which may not show yet a table another opener just committed.
    cur.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables "
        "WHERE schemaname = current_schema() AND tablename = 'crond_schema')"
    )
    if not cur.fetchone()[0]:
        return None
    cur.execute("SELECT version FROM crond_schema")
    row = cur.fetchone()
    return None if row is None else int(row[0])


def make(cur: Any, where: str) -> None:
    """Make the tables, or upgrade them, to SCHEMA_VERSION, in the caller's transaction,
    under the migration lock (held to its end). Raises StateError for a newer schema, or
    an older one this crond cannot upgrade."""
    # Another opener's upgrade is waited for, however slow (as pg_conn.patient).
    cur.execute("SELECT set_config('lock_timeout', '0', true)")
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
    version = version_of(cur)
    if version is None:
        for statement in TABLES:
            cur.execute(statement)
        cur.execute("INSERT INTO crond_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
        return
    check(version, where)
    while version < SCHEMA_VERSION:
        for statement in UPGRADES[version]:
            cur.execute(statement)
        version += 1
        cur.execute("UPDATE crond_schema SET version = %s", (version,))


def check(version: int, where: str) -> None:
    """Refuse a schema this crond does not read, nor know how to upgrade."""
    if version > SCHEMA_VERSION:
        raise StateError(
            f"{where}: written by a newer crond (schema {version}, this one reads "
            f"{SCHEMA_VERSION}); upgrade this replica, or give it another database"
        )
    if version < SCHEMA_VERSION and any(v not in UPGRADES for v in range(version, SCHEMA_VERSION)):
        raise StateError(f"{where}: schema {version} is too old for this crond to upgrade")
