"""The state store's seam (crond/store/base.py), its runs: what the scheduling loop and the
runner record of a run (its start with the job's cursor, its claims with replicas, its
end, the runs a dead daemon left open), and of a backfill's runs (crond/daemon/backfilling.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from crond.store.rows import AttemptRow, BackfillRow, Claim, Claimed, Start


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
        locks: Mapping[str, Sequence[tuple[str, int]]] | None = None,
    ) -> Claimed:
        """One wake's claims, in one commit. `limits` (job -> its `max_runs`): each won
        claim of such a job is counted in the commit, or refused as DONE (nothing of it
        recorded) when the job has had them all. `locks` (job -> its locks, name and
        capacity): each won claim of such a job takes them all in the commit, or is
        refused as Locked (nothing of it recorded) when one has no room (docs/workflows.md,
        "With replicas"); the run's last attempt's `end(..., release=True)` gives them
        back. `start_many` with a claim of each start's
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
        release: bool = False,
    ) -> datetime | None:
        """`finish`, saying whether the end was late: None, but for an attempt another
        replica had already closed as `lost` (its replica was cut off, not dead): then its
        end is kept beside `lost` (AttemptRow.late_*), never over it, and the instant it
        was closed `lost` is returned, for the daemon to tell of (`job.late_end`). A
        store of one daemon has no late end (its lost runs are a dead process's). With
        `release` (the run's last attempt), the locks its claim took are given back."""
        ...

    def close_lost(self, now: datetime) -> list[AttemptRow]:
        """Attempts left open by a daemon that died: closed as outcome `lost`."""
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
        locks: Mapping[str, Sequence[tuple[str, int]]] | None = None,
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
