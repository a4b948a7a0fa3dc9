"""The SQLite store's schema: its tables, its version, and the upgrades of older ones.

The tables hold data only; what `crond status` prints is made from them in Python
(crond/status.py). An older schema this crond knows is upgraded in place when the daemon
opens the store, keeping history and cursors; a reader (`crond status`, `history`) never
writes, so it says the daemon will do it. A newer or unknown schema is refused, never
misread. docs/state.md says what is kept and how upgrades behave.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crond.store.base import StateError

SCHEMA_VERSION = 3
# Older schemas `upgrade` brings to SCHEMA_VERSION: 1 (the first release with a store) and 2
# (its view held copies of the summaries, and both kept `crond status`'s JSON in generated
# columns maintained by triggers).
UPGRADABLE = frozenset({"1", "2"})
# The oldest SQLite whose SQL this module, crond/store/sqlite.py and sqlite_write.py use:
# the upsert (`INSERT ... ON CONFLICT DO UPDATE`) came in 3.24.0 (2018). Python 3.11
# itself accepts SQLite 3.7.15.
MIN_SQLITE = (3, 24, 0)

# One row a job, so `crond status` reads 10,000 rows, not a million: the newest attempt
# and the last success (kept even when older than the history kept), instants already as
# ISO-8601 text (formatting 50,000 of them was most of status's time).
_SUMMARY_COLUMNS = """(
    job TEXT PRIMARY KEY,
    last_id INTEGER,
    run_id TEXT,
    slot TEXT,
    attempt INTEGER,
    started TEXT,
    finished TEXT,
    outcome TEXT,
    exit_code INTEGER,
    duration_s REAL,
    success_run_id TEXT,
    success_started TEXT,
    success_finished TEXT,
    success_duration_s REAL
)"""
_SUMMARY_NAMES = (
    "job, last_id, run_id, slot, attempt, started, finished, outcome, exit_code, duration_s, "
    "success_run_id, success_started, success_finished, success_duration_s"
)

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cursors (job TEXT PRIMARY KEY, cursor REAL NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    job TEXT NOT NULL,
    slot REAL NOT NULL,
    attempt INTEGER NOT NULL,
    started REAL NOT NULL,
    finished REAL,
    outcome TEXT,
    exit_code INTEGER,
    duration_s REAL,
    output TEXT,
    kind TEXT  -- NULL: a scheduled, triggered or chained run; 'backfill': a backfill's
);
CREATE INDEX IF NOT EXISTS attempts_job ON attempts (job, id);
CREATE INDEX IF NOT EXISTS attempts_open ON attempts (finished) WHERE finished IS NULL;
CREATE TABLE IF NOT EXISTS summary {_SUMMARY_COLUMNS};
-- The running daemon's view of its jobs, for a `crond status` that need not load the
-- file again: written at each load (with the file's sha256 in meta `view_sha256`), next
-- fires updated as they move.
CREATE TABLE IF NOT EXISTS view (
    pos INTEGER PRIMARY KEY,  -- the file's order: the rowid, so reading in order is a scan
    job TEXT NOT NULL UNIQUE,
    enabled INTEGER NOT NULL,
    schedule TEXT NOT NULL,
    next_at REAL,
    next_text TEXT,
    next_local TEXT,
    next_note TEXT
);
-- Whether the view is behind (a stalled daemon): the earliest next fire, without a scan.
CREATE INDEX IF NOT EXISTS view_next ON view (next_at);
-- Notifications not yet delivered (crond/notify/delivery.py), so a restart or a crash
-- loses none. No URL or header is kept: they come from the file when one is sent. A new
-- table needs no new schema version: an older crond ignores it.
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    notifier TEXT NOT NULL,
    job TEXT NOT NULL,
    event TEXT NOT NULL,
    body TEXT NOT NULL,
    created REAL NOT NULL
);
-- Chained runs (docs/workflows.md) not yet started: written in the commit that ends the
-- parent's run, taken away in the commit that records the child's start (or when the
-- child is skipped), so a crash in between starts the child after the restart, once. A
-- new table without a new schema version, as those above.
CREATE TABLE IF NOT EXISTS chained (
    job TEXT NOT NULL,
    parent_run_id TEXT NOT NULL,
    parent_job TEXT NOT NULL,
    outcome TEXT NOT NULL,
    exit_code INTEGER,
    slot REAL NOT NULL,
    PRIMARY KEY (job, parent_run_id)
);
-- Each job's scheduled runs so far (`max_runs`, docs/schedules.md), one row a job,
-- counted in the commit that records the run's start. A new table, no new version.
CREATE TABLE IF NOT EXISTS run_counts (job TEXT PRIMARY KEY, runs INTEGER NOT NULL);
-- Jobs paused by an operator (`crond pause`), one row a job, so a pause outlives a
-- reload, a restart and a crash; the daemon deletes a row when the job is resumed or its
-- `until` passes. `who` is JSON text {"uid", "user", "pid"}: the peer of the control
-- socket that paused it. Also a new table without a new schema version: an older store
-- gains it when the daemon opens it, and a reader of a store without it sees no pauses.
CREATE TABLE IF NOT EXISTS pauses (
    job TEXT PRIMARY KEY,
    since REAL NOT NULL,
    until REAL,
    note TEXT,
    who TEXT NOT NULL
);
-- Backfills (`crond backfill`, docs/schedules.md), one row each, kept after they end.
-- `started` and `last_slot` move in the commit that records a slot's run (its attempt
-- marked kind 'backfill'), so a restart goes on after `last_slot` and never runs a slot
-- twice; the tallies move as runs end. `state`: running, finished or cancelled. A new
-- table without a new schema version (and `attempts.kind` a column an older store gains
-- when the daemon opens it: an older crond names the columns it reads, and ignores it).
CREATE TABLE IF NOT EXISTS backfills (
    id TEXT PRIMARY KEY,
    job TEXT NOT NULL,
    range_from REAL NOT NULL,
    range_to REAL NOT NULL,
    total INTEGER NOT NULL,
    started INTEGER NOT NULL DEFAULT 0,
    last_slot REAL,
    next_slot REAL,  -- the slot going, else the next to start (NULL: none left)
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    created REAL NOT NULL,
    ended REAL,
    who TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS backfills_going ON backfills (state) WHERE state = 'running';
"""

# Schemas 1 and 2 -> 3, in one transaction. The view is derived data, rebuilt at every
# load: dropped (SCHEMA makes it again, empty) and its digest cleared, so no status trusts
# it before the daemon publishes. The summary keeps its rows, without the generated JSON
# columns (a generated column cannot be dropped by ALTER TABLE: the table is copied).
_UPGRADE = f"""
BEGIN;
DROP TRIGGER IF EXISTS summary_INSERT;
DROP TRIGGER IF EXISTS summary_UPDATE;
DROP TABLE IF EXISTS view;
CREATE TABLE summary_v{SCHEMA_VERSION} {_SUMMARY_COLUMNS};
INSERT INTO summary_v{SCHEMA_VERSION} ({_SUMMARY_NAMES}) SELECT {_SUMMARY_NAMES} FROM summary;
DROP TABLE summary;
ALTER TABLE summary_v{SCHEMA_VERSION} RENAME TO summary;
UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema';
UPDATE meta SET value = '' WHERE key = 'view_sha256';
COMMIT;
"""  # noqa: S608  (constant text)


def check_sqlite() -> None:
    """Refuse an SQLite library older than the SQL used here needs, saying so, rather than
    failing later on a statement it cannot parse. Raises StateError."""
    version = sqlite3.sqlite_version_info
    if version < MIN_SQLITE:
        need = ".".join(map(str, MIN_SQLITE))
        have = ".".join(map(str, version))
        raise StateError(
            f"the SQLite library Python uses is {have}; crond's state store needs {need} or "
            "newer (upgrade SQLite, or run without a store: state_dir: none)"
        )


def create(db: sqlite3.Connection) -> None:
    """Make the tables (and columns) that are missing, and say which schema the file has."""
    if "attempts" in _tables(db) and not has_kind(db):
        db.execute("ALTER TABLE attempts ADD COLUMN kind TEXT")  # (see `backfills` above)
    db.executescript(SCHEMA)
    db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))


def upgrade(db: sqlite3.Connection, path: Path) -> None:
    """An older schema this crond knows, brought to SCHEMA_VERSION in place, keeping
    history, cursors and summaries. One way: an older crond then refuses the store."""
    schema = schema_of(db)
    if schema not in UPGRADABLE:
        return
    columns = {r[1] for r in db.execute("PRAGMA table_xinfo(summary)")}
    if schema == "1" and not {"last_json", "success_json"} <= columns:
        # Development builds wrote schema 1 before the summary had all its columns.
        raise StateError(
            f"{path}: written by a development build of crond (schema 1 without the "
            "summaries' JSON); move the file away to start a fresh store"
        )
    db.executescript(_UPGRADE)


def schema_of(db: sqlite3.Connection) -> str | None:
    """The schema a store says it has; None for a new file (no meta table, or no row)."""
    if "meta" not in _tables(db):
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    return None if row is None else str(row[0])


def check(db: sqlite3.Connection, path: Path, *, empty_ok: bool = False) -> None:
    """Refuse a store written by another version of crond's schema (a downgrade, or a file
    that is not crond's): reading it as ours could only go wrong. `empty_ok`: a file with
    no tables at all is a new store."""
    tables = _tables(db)
    if not tables and empty_ok:
        return
    if "meta" not in tables:
        raise StateError(f"{path}: not a crond state store (no meta table)")
    schema = schema_of(db)
    if schema in UPGRADABLE:  # only a reader gets here: the daemon upgraded it first
        raise StateError(
            f"{path}: written by an older crond (schema {schema}); the daemon upgrades it in "
            "place when it starts (history and cursors are kept): restart `crond run`"
        )
    if schema is not None and schema != str(SCHEMA_VERSION):
        raise StateError(
            f"{path}: written by another version of crond (schema {schema}, this one reads "
            f"{SCHEMA_VERSION}); give this daemon another state_dir or move the file away"
        )


def has_kind(db: sqlite3.Connection) -> bool:
    """Whether the store's attempts have their `kind` (a store no daemon of this version
    opened yet has not: its runs are all scheduled ones)."""
    return any(row[1] == "kind" for row in db.execute("PRAGMA table_info(attempts)"))


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
