"""The state store's seam: what the daemon and the CLI ask of a store, by concern; the
plain values that cross it are crond/store/rows.py's (re-exported here).

`Reader` is what `crond status` and `crond history` read. The daemon's `Store` is four
concerns: `RunRecords` (a run's start, committed before its spawn with the job's cursor;
its finish; the runs a dead daemon left open; with replicas, the claims of a wake),
`PauseRecords` (the pauses operators set), `OutboxRecords` (notifications not yet
delivered) and `Upkeep` (the daemon's view of its jobs for status, its marks, the
heartbeat's checks). `Replicated` adds what replicas sharing one database need: their
heartbeats and kill requests (`ClusterRecords`). Each concern is a module of its own:
`base_runs` (runs and cursors, backfills), `base_records` (pauses, outbox, upkeep),
`base_cluster` (replicas); here, the reads and the stores they make up.

`crond.store.sqlite` is one daemon's (one SQLite file in the state directory), opened by
`crond.store.locate`. `crond.store.postgres` is several replicas' sharing one PostgreSQL
database (the daemon opens it with `daemon.database`; `locate` for reading). docs/state.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from crond.store.base_cluster import ClusterRecords
from crond.store.base_records import OutboxRecords, PauseRecords, Upkeep
from crond.store.base_runs import BackfillRecords, RunRecords
from crond.store.rows import (
    BUSY,
    DONE,
    EVERY,
    FAILED_OUTCOMES,
    AttemptRow,
    BackfillRow,
    Claim,
    Claimed,
    KillRow,
    Locked,
    LockHolder,
    NextFire,
    Only,
    OutboxRow,
    PauseRow,
    PerReplica,
    Poll,
    ReplicaRow,
    ReplicaTaken,
    Start,
    StateError,
    StatusRow,
    Summary,
    ViewRow,
    status_row,
    view_row,
)

# The values of crond/store/rows.py, and the concerns of base_runs.py, base_records.py and
# base_cluster.py, are re-exported: callers name them from here.
__all__ = [
    "BUSY",
    "DONE",
    "EVERY",
    "FAILED_OUTCOMES",
    "AttemptRow",
    "BackfillRecords",
    "BackfillRow",
    "Claim",
    "Claimed",
    "ClusterReader",
    "ClusterRecords",
    "KillRow",
    "LockHolder",
    "Locked",
    "NextFire",
    "Only",
    "OutboxRecords",
    "OutboxRow",
    "PauseRecords",
    "PauseRow",
    "PerReplica",
    "Poll",
    "Reader",
    "ReplicaRow",
    "ReplicaTaken",
    "Replicated",
    "RunRecords",
    "Start",
    "StateError",
    "StatusRow",
    "Store",
    "Summary",
    "Upkeep",
    "ViewRow",
    "status_row",
    "view_row",
]


class Reader(Protocol):
    """A store opened for reading: `crond status` and `crond history`, while the daemon
    writes. Every method raises StateError when the store fails."""

    @property
    def location(self) -> str:
        """Where the store is (a file's path), as messages and events name it."""
        ...

    def get_meta(self, key: str) -> str | None: ...

    def metas(self, prefix: str) -> dict[str, str]:
        """Every meta value whose key begins with `prefix`, by key (one read)."""
        ...

    def last(self, job: str, *, outcome: str | None = None) -> AttemptRow | None:
        """The job's newest attempt (with that outcome), if any is kept."""
        ...

    def recent(self, job: str | None, limit: int, only: Only = EVERY) -> list[AttemptRow]:
        """The newest `limit` attempts (of `job`, or of every job) that `only` keeps,
        oldest first."""
        ...

    def summaries(self) -> dict[str, Summary]:
        """Every job's summary, by name (jobs no longer in the file too)."""
        ...

    def run_counts(self) -> dict[str, int]:
        """Each job's scheduled runs counted so far (`max_runs`), by name."""
        ...

    def status_rows(self) -> list[StatusRow]:
        """The daemon's view of its jobs, in the file's order, each with its summary."""
        ...

    def view_is_behind(self, oldest: float) -> bool:
        """Whether some next fire in the view is before `oldest` (epoch seconds): the
        daemon that keeps the view is stalled or stopped."""
        ...

    def pauses(self) -> dict[str, PauseRow]:
        """Every pause kept, by job (expired ones too, until the daemon clears them)."""
        ...

    def close(self) -> None: ...


class Store(Reader, RunRecords, PauseRecords, OutboxRecords, Upkeep, Protocol):
    """A store opened by the daemon, for writing; one daemon a store (it is locked)."""


@runtime_checkable
class ClusterReader(Reader, Protocol):
    """A store replicas share, as status, history and ps read it: its replicas by name,
    their open attempts, the database's clock, each job's newest attempt's replica."""

    def replicas(self) -> list[ReplicaRow]: ...
    def open_runs(self) -> list[AttemptRow]: ...
    def clock(self) -> datetime: ...
    def newest_replicas(self) -> dict[str, str]: ...
    def per_replica(self, jobs: Sequence[str]) -> dict[str, dict[str, PerReplica]]:
        """Of each of `jobs`, by replica: its newest attempt and newest success there."""
        ...


class Replicated(Store, ClusterReader, ClusterRecords, Protocol):
    """A store shared by several replicas (crond.store.postgres): each says it is alive
    (`beat`), and a survivor closes the runs of a replica that stopped saying so."""
