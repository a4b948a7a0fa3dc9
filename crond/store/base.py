"""The state store's seam: what the daemon and the CLI ask of a store, by concern; the
plain values that cross it are crond/store/rows.py's (re-exported here).

`Reader` is what `crond status` and `crond history` read. The daemon's `Store` is four
concerns: `RunRecords` (a run's start, committed before its spawn with the job's cursor;
its finish; the runs a dead daemon left open; with replicas, the claims of a wake),
`PauseRecords` (the pauses operators set), `OutboxRecords` (notifications not yet
delivered) and `Upkeep` (the daemon's view of its jobs for status, its marks, the
heartbeat's checks). `Replicated` adds what replicas sharing one database need: their
heartbeats and kill requests.

`crond.store.sqlite` is one daemon's (one SQLite file in the state directory), opened by
`crond.store.locate`. `crond.store.postgres` is several replicas' sharing one PostgreSQL
database (the daemon opens it with `daemon.database`; `locate` for reading). docs/state.md.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

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

# The values of crond/store/rows.py are re-exported: callers name them from here.
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
    "KillRow",
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


class RunRecords(Protocol):
    """Runs and cursors: what the scheduling loop and the runner record."""

    def cursors(self) -> dict[str, datetime]:
        """Each job's cursor: the instant up to which its slots have been dealt with."""
        ...

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
        """Record an attempt as started and move the job's cursor, in one commit, before
        the spawn. Returns a token for `finish`."""
        ...

    def start_many(
        self, starts: Sequence[Start], started: datetime, limits: Mapping[str, int] | None = None
    ) -> list[int]:
        """`start` for the first attempts of one wake's runs, in one commit. Returns
        their tokens, in order. Claims nothing: replicas sharing a store use
        `claim_many`. `limits`: the jobs whose starts count toward their `max_runs` (by
        name: the limit), counted in the same commit (one daemon: its planner stops)."""
        ...

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
    ) -> Claimed:
        """One wake's claims, in one commit. `limits` (job -> its `max_runs`): each won
        claim of such a job is counted in the commit, or refused as DONE (nothing of it
        recorded) when the job has had them all. `start_many` with a claim of each start's
        `(job, slot, copy)` (`copies`, in the starts' order; None: "" for each) that also
        moves every start's cursor. Per start, its token; or None when another replica
        holds the claim: then nothing is recorded for it, and it must not run; or BUSY for
        a job of `exclusive` (`overlap: skip`) claimed with copy "" while an attempt of it
        is unfinished on any replica: the claim is kept (the slot is dealt with: skipped,
        by this replica) and nothing else recorded. A job of `replacing` (`overlap:
        replace`) claimed with copy "" asks the other replicas to stop its runs (kill
        requests). And a claim of each `told` `(job, slot)` that will not run (skipped,
        missed): whether this replica got it, and so is the one to tell of it. A store of
        one daemon wins every claim (SQLite's is `start_many`: its daemon's own planner
        knows its runs)."""
        ...

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
        """Close an attempt (a token that is not there any more is ignored) and keep the
        job's newest `keep` attempts (default: the store's). An attempt already closed
        `lost` stays so: `end` says when."""
        ...

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
    ) -> datetime | None:
        """`finish`, saying whether the end was late: None, but for an attempt another
        replica had already closed as `lost` (its replica was cut off, not dead): then its
        end is kept beside `lost` (AttemptRow.late_*), never over it, and the instant it
        was closed `lost` is returned, for the daemon to tell of (`job.late_end`). A
        store of one daemon has no late end (its lost runs are a dead process's)."""
        ...

    def close_lost(self, now: datetime) -> list[AttemptRow]:
        """Attempts left open by a daemon that died: closed as outcome `lost`."""
        ...


class PauseRecords(Protocol):
    """The pauses operators set (`crond pause`), kept across restarts."""

    def set_pause(self, row: PauseRow) -> None:
        """Keep a job's pause, replacing the one it had, in one commit."""
        ...

    def clear_pause(self, job: str) -> None:
        """Forget a job's pause (none is no error), in one commit."""
        ...

    def set_pauses(self, rows: Sequence[PauseRow]) -> None:
        """`set_pause` of each row, all in one commit (`crond pause --all`)."""
        ...

    def clear_pauses(self, jobs: Sequence[str]) -> None:
        """`clear_pause` of each job, all in one commit (`crond resume --all`)."""
        ...


class OutboxRecords(Protocol):
    """Notifications kept until delivered or given up (crond/notify/delivery.py)."""

    def outbox_add(self, rows: Sequence[OutboxRow]) -> list[int]:
        """Keep notifications to deliver (their `id` is ignored), in one commit; their ids."""
        ...

    def outbox_pending(self, limit: int) -> list[OutboxRow]:
        """The oldest `limit` notifications not yet delivered nor given up."""
        ...

    def outbox_done(self, ids: Sequence[int]) -> None:
        """Forget notifications delivered or given up, in one commit."""
        ...


class Upkeep(Protocol):
    """The daemon's view of its jobs for `crond status`, its marks (`@reboot`'s boot,
    the streaks of notifications), and the heartbeat's checks."""

    @property
    def moved_aside(self) -> str | None:
        """Where opening it put a damaged store (kept as evidence), if it did."""
        ...

    def set_meta(self, key: str, value: str) -> None: ...

    def publish_view(self, rows: Iterable[ViewRow], digest: str | None) -> None:
        """Make the view a freshly loaded file's jobs. `digest`: the sha256 of the
        file's bytes (None: unknown, and no status will trust the view)."""
        ...

    def update_view(
        self, moved: Sequence[ViewRow], cursors: Sequence[tuple[str, datetime]] = ()
    ) -> None:
        """Next fires that moved, and cursors that moved with no run started."""
        ...

    def check_in_place(self) -> None:
        """Raise StateError (corrupt) when the store was removed or replaced under the
        daemon: its writes would go where nobody looks."""
        ...

    def checkpoint(self) -> None:
        """Housekeeping the daemon's heartbeat does, off the start path."""
        ...


@runtime_checkable
class BackfillRecords(Protocol):
    """Backfills (`crond backfill`, docs/schedules.md): their ranges and progress. A
    backfill's slot moves its progress in the commit that records its run's start
    (`start_many`'s `backfills`: run id -> backfill id)."""

    def backfill_add(self, row: BackfillRow) -> bool:
        """Keep a new backfill; False when one of its job is already running (with
        replicas: begun on another replica)."""
        ...

    def backfill_counted(self, backfill_id: str, success: bool, next_slot: datetime | None) -> None:
        """One more of the backfill's runs ended (`success` or not); the next slot it
        starts (None: none left)."""
        ...

    def claim_backfill(
        self,
        starts: Sequence[Start],
        backfills: Mapping[str, str],
        started: datetime,
        *,
        exclusive: Collection[str] = (),
    ) -> list[Claim]:
        """With replicas: claim each backfill start (run id -> its backfill in
        `backfills`) by its backfill's own copy of the slot, record its attempt (kind
        `backfill`) and move the backfill's progress, in one transaction. Per start, its
        token; None when another replica holds the claim (it runs the slot); BUSY when
        its job is of `exclusive` and an attempt of it is unfinished on any replica
        (nothing is recorded: it is tried again); DONE when the backfill is no longer
        running (ended through another replica)."""
        ...

    def backfill_end(self, backfill_id: str, state: str, ended: datetime) -> None:
        """The backfill finished or was cancelled (`state`)."""
        ...

    def backfills(self, *, going: bool) -> list[BackfillRow]:
        """The backfills kept, oldest first (`going`: those still running only)."""
        ...


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


class Replicated(Store, ClusterReader, Protocol):
    """A store shared by several replicas (crond.store.postgres): each says it is alive
    (`beat`), and a survivor closes the runs of a replica that stopped saying so."""

    @property
    def replica(self) -> str:
        """This replica's name: its attempts and claims (`replicas: all`) carry it."""
        ...

    def beat(self, now: datetime, skew: float | None = None) -> datetime:
        """This replica is alive at `now` (kept with its pid, host, boot, version and file's
        digest, and `skew`, its clock's skew the last beat measured; None keeps the one
        kept), in one commit; the database's clock then (`cluster.clock_skew`)."""
        ...

    def write_tails(
        self, tails: Sequence[tuple[str, Sequence[tuple[str, str]], int, bool]]
    ) -> None:
        """The output tails of watched runs (pg_follow.py): each (run_id, its last lines
        as (stream, line), the lines seen in all, whether its attempt ended)."""
        ...

    def close_dead(self, now: datetime, timeout: timedelta) -> list[AttemptRow]:
        """The open attempts of the other replicas whose last beat is older than
        `timeout`, closed as `lost` in one commit; when survivors race, each attempt is
        closed (and returned) by one of them only."""
        ...

    def abandon(self, run_ids: Sequence[str]) -> int:
        """Runs this replica claimed and never started (a claim in doubt, its start then
        missed) removed in one commit, their claims kept (the slot was told missed): none
        holds its job busy, each summary shows the attempt before, and a `max_runs` count
        is given back; how many were open."""
        ...

    # A KillRow kept for every replica to see, its id; and `Poll` in one transaction.
    def request_kill(self, target: str, by: str, now: datetime) -> int: ...
    def poll(self, after: int) -> Poll: ...

    def resume(self, job: str, by: str, now: datetime) -> None:
        """`clear_pause` by `by` (JSON): who ended it is kept an hour for `resumed_by`."""
        ...

    def resumed_by(self, job: str, since: datetime) -> str | None:
        """Who resumed the job's pause that began at `since` (JSON), if a resume ended it."""
        ...

    def resume_many(self, jobs: Sequence[str], by: str, now: datetime) -> None:
        """`resume` of each job, all in one commit."""
        ...
