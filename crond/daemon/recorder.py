"""The daemon's policy for its state store: what is written, and when.

A run is never delayed or refused because of the store (what a failing store costs is
crond/daemon/stores.py's `StoreHealth`, which the recorder is). Each wake's starts are
recorded in one commit before the first spawn (`prepare`); each attempt's start and end
as it happens; the cursors, the `@reboot` marks and the jobs' view for `crond status`.

With replicas (`daemon.database`, docs/replicas.md) one rule changes: no run starts
without a claim. `prepare` claims a wake's starts and says which may not start (another
replica holds the claim, or the database did not answer: the loop tries those again);
the end of an attempt a retry follows is held until the next attempt starts, and a run's
end the database did not take is kept to write when it answers again.

The recorder is the runner's Recorder: it turns runs into the plain values the store
takes (crond/store/base.py). docs/state.md has the table of failures and what they do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, cast

from crond.clock import Clock
from crond.config.loaded import LoadedConfig
from crond.config.model import Overlap, Replicas
from crond.daemon.indoubt import InDoubt, ours
from crond.daemon.late import LateEnd, LateEnds
from crond.daemon.offloop import SLOW, OffLoop
from crond.daemon.proof import Proof
from crond.daemon.stores import FAILED, End, Opener
from crond.schedule.actions import Claims, Refusal
from crond.store.base import (
    AttemptRow,
    BackfillRecords,
    Claimed,
    Replicated,
    Start,
    Store,
    ViewRow,
)
from crond.store.rows import Chained

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from crond.run.runner import Run, RunResult


class Told(Protocol):
    """Who the recorder tells of runs' ends (the daemon's, to its notifiers:
    crond/daemon/telling.py)."""

    def ending(self, run: Run, result: RunResult, tail: Sequence[str]) -> None:
        """A run's last attempt ended, its end not yet written: what this makes (the
        notifiers' outbox) is in the store first, so no crash falls between the two."""

    def lost(self, row: AttemptRow) -> None:
        """A run a dead daemon left, just closed as lost (after its `job.lost` event)."""


class StoreRecorder(OffLoop):
    """The runner's Recorder backed by a Store, or by nothing when the store is off
    (`opener` None) or broken; `told` hears of runs' ends and lost runs. Use it from the
    event loop's thread (a cluster's database is called off it: crond/daemon/offloop.py)."""

    def __init__(
        self,
        opener: Opener | None,
        log: FilteringBoundLogger,
        clock: Clock,
        quiet: float = 10.0,
        *,
        replica: str | None = None,
        told: Told | None = None,
    ) -> None:
        lost = None if told is None else told.lost
        super().__init__(opener, log, clock, quiet, replica=replica, on_lost=lost)
        self.proof = Proof(clock)  # with replicas, a claim beats first when stale
        self.history: dict[str, int] = {}  # job -> attempts kept; the store's default else
        self._prepared: dict[str, int] = {}  # run id -> its first attempt's row (`prepare`)
        self.told = told
        # Jobs each replica runs (`replicas: all`): their claims are this replica's copy.
        self.each_replica: frozenset[str] = frozenset()
        # Jobs that run one at a time (`overlap: skip`): with replicas, not claimed while
        # a run of the job goes on another replica.
        self.one_at_a_time: frozenset[str] = frozenset()
        # Jobs whose new run stops the old (`overlap: replace`): with replicas, the other
        # replicas' runs of the job too.
        self.replacing: frozenset[str] = frozenset()
        # With replicas, the end of an attempt a retry follows, by run id: written when the
        # next attempt starts or the run ends, so the run's row stays open while it waits
        # (another replica does not claim an `overlap: skip` job's next slot meanwhile).
        self._held: dict[str, End] = {}
        self.late = LateEnds(log, replica)  # ends written beside `lost`: told once
        self.chains: Callable[[Run, RunResult], list[Chained]] | None = None  # chaining.py
        self.in_doubt = InDoubt()  # with replicas, the claims that got no answer
        self._abandoned: list[str] = []  # their run ids given up, not yet closed

    def configure(self, cfg: LoadedConfig) -> None:
        """What a file just loaded says of its jobs' records: the attempts each keeps, and,
        with replicas, how each job's starts are claimed."""
        self.history = {name: job.settings.history for name, job in cfg.jobs.items()}
        jobs = cfg.jobs.values()
        self.each_replica = frozenset(
            job.name for job in jobs if job.settings.replicas is Replicas.ALL
        )
        self.one_at_a_time = frozenset(
            job.name for job in jobs if job.settings.overlap in {Overlap.SKIP, Overlap.QUEUE}
        )
        self.replacing = frozenset(
            job.name for job in jobs if job.settings.overlap is Overlap.REPLACE
        )

    # --- runs -------------------------------------------------------------------------

    async def prepare(
        self,
        starts: Sequence[Start],
        told: Sequence[tuple[str, datetime]] = (),
        *,
        started: datetime | None = None,
        chained: Sequence[tuple[str, str]] = (),
        limits: Mapping[str, int] | None = None,
        backfills: Mapping[str, str] | None = None,
    ) -> Claims:
        """Record the first attempts of a wake's runs in one commit, before any of them is
        spawned, as started at `started` (default: now); each run's `started` then finds
        its row. With replicas, claim them in that commit, with the `told` slots (skipped,
        missed): the starts that may not start, and why (all of them when the database
        did not answer); the told slots another replica claimed first, and so tells of
        (none when the database did not answer: each replica tells what it saw). Without
        replicas, the records of the `chained` starts, (child, parent's run id), go too;
        `backfills` (run id -> backfill id): the backfills' starts, marked, their progress
        moved in the same commit."""
        at = started or self.clock.now()
        if self.replica is None:
            if starts:
                more = _kw(chained) | ({"backfills": backfills} if backfills else {})
                ids = self.write(lambda store: store.start_many(starts, at, limits, **more))
                for start, row_id in zip(starts, [] if ids is FAILED else ids, strict=False):
                    self._prepared[start.run_id] = row_id
            return Claims()
        mine = [key for key in told if key[0] not in self.each_replica]
        if not starts and not mine:
            return Claims()
        call = _claim(self, starts, mine, at, limits, backfills)
        claimed = await self.proof.claim(self.ask, call, force=bool(starts))
        if claimed is FAILED:
            self.in_doubt.failed(starts)  # each may have committed all the same
            return Claims({(s.job, s.slot): "database" for s in starts})
        # A told slot (skipped, missed) whose start's claim is in doubt: if that claim
        # committed, the slot is this replica's, not a peer's: told here, and the run it
        # may have recorded, never started, given up.
        doubted_told = {key for key in mine if self.in_doubt.run_id(key) is not None}
        for job, slot in doubted_told:
            self._abandoned += self.in_doubt.given_up(job, slot, slot)
        self._abandon()  # what an outage left to close, now that the database answers
        refused: dict[tuple[str, datetime], Refusal] = {}
        doubted = self.in_doubt.doubted(starts, claimed.starts)
        found = await self._ours(doubted)
        if found is None:  # no answer: each still in doubt, tried again as it was
            self.in_doubt.failed(doubted)
            refused.update({(s.job, s.slot): "database" for s in doubted})
        for start, claim in zip(starts, claimed.starts, strict=True):
            if (start.job, start.slot) in refused:
                continue
            claim = (found or {}).get(start.run_id, claim)  # noqa: PLW2901  (its own, in doubt)
            if isinstance(claim, int):
                self._prepared[start.run_id] = claim
            else:
                refused[(start.job, start.slot)] = "taken" if claim is None else claim  # busy, done
        answers = zip(mine, claimed.told, strict=True)
        quiet = {key for key, ours in answers if not ours and key not in doubted_told}
        return Claims(refused, quiet)

    def missed(self, job: str, first: datetime, last: datetime) -> None:
        """`job`'s starts from `first` to `last` were missed. With replicas, those whose
        claim is in doubt may have committed it: the run it recorded, never started, is
        closed in the database (off the loop; tried again after a failure), or it would
        hold the job "busy" there (crond/daemon/indoubt.py)."""
        if self.replica is None:
            return
        self._abandoned += self.in_doubt.given_up(job, first, last)
        self._abandon()

    def _abandon(self) -> None:
        if not self._abandoned:
            return
        ids, self._abandoned = self._abandoned, []

        def back(result: object) -> None:
            if result is FAILED:
                self._abandoned += ids  # the next claim the database answers tries again

        self.send(lambda store: cast(Replicated, store).abandon(ids), then=back)

    async def _ours(self, doubted: Sequence[Start]) -> dict[str, int] | None:
        """Those of `doubted` this replica's claim took after all (crond/daemon/indoubt.py);
        None: the database did not answer."""
        if not doubted:
            return {}
        runs = await self.ask(lambda store: cast(Replicated, store).open_runs(), force=True)
        return None if runs is FAILED else ours(doubted, runs, self.replica or "")

    def started(self, run: Run, attempt: int) -> object:
        if self._held:
            self.run_ended(run.run_id)  # the attempt before, which waited for this one
        if attempt == 1 and self._prepared:
            prepared = self._prepared.pop(run.run_id, None)
            if prepared is not None:
                return prepared

        def start(store: Store) -> int:
            return store.start(
                run.job,
                run_id=run.run_id,
                slot=run.slot,
                attempt=attempt,
                started=self.clock.now(),
                cursor=run.slot,
            )

        if not self.off_loop:
            return self.write(start)
        row = _Row()  # with replicas, written off the loop: its id is known there
        self.send(lambda store: row.found(start(store)))
        return row

    def finished(self, token: object, run: Run, result: RunResult, tail: Sequence[str]) -> None:
        if self.told is not None and run.ends_with(result):
            self.told.ending(run, result, tail)
        if not isinstance(token, (int, _Row)):
            return
        write_end = self._write_end
        if self.replica is not None and not run.ends_with(result):
            write_end = functools.partial(self._held.__setitem__, run.run_id)
        now = self.clock.now()  # not when it is written: that may be later (held, away)

        chained = self.chains(run, result) if self.chains and run.ends_with(result) else []
        more = _kw(chained if self.replica is None else [])  # in the end's commit

        def end(store: Store) -> LateEnd | None:
            row = _row_of(token)  # None: its start was never written
            lost_at = None if row is None else store.end(
                row, job=run.job, run_id=run.run_id, finished=now,
                outcome=result.outcome.value, exit_code=result.exit_code,
                duration_s=result.duration_s, output=tail, keep=self.history.get(run.job), **more,
            )  # fmt: skip
            return None if lost_at is None else LateEnd(run, result, lost_at)

        write_end(end)

    def _written(self, said: object) -> None:
        if isinstance(said, LateEnd):
            self.late.told(said)

    def run_ended(self, run_id: str) -> None:
        """`run_id`'s last attempt ended (it may have been stopped while it waited for a
        retry): the end of an attempt held back is written now."""
        held = self._held.pop(run_id, None)
        if held is not None:
            self._write_end(held)

    # --- what the daemon keeps besides runs -------------------------------------------

    async def kept(self) -> tuple[dict[str, datetime], dict[str, int]]:
        """What the previous daemon left for the schedule, in one call (with replicas
        awaited off the loop): the cursors, and the scheduled runs each job has had
        (`max_runs`); none when the store did not answer."""
        got = await self.ask(lambda store: (store.cursors(), store.run_counts()), deadline=SLOW)
        return ({}, {}) if got is FAILED else got

    def publish_view(self, rows: Iterable[ViewRow], digest: str | None) -> None:
        listed = list(rows)
        self.send(lambda store: store.publish_view(listed, digest))

    def update_view(
        self, moved: Sequence[ViewRow], cursors: Sequence[tuple[str, datetime]]
    ) -> None:
        """After a wake: next fires that moved, and cursors that moved with no run started
        (slots missed or skipped: a restart must not take them for downtime)."""
        if moved or cursors:
            self.send(lambda store: store.update_view(moved, cursors))


class _Row:
    """An attempt's row written off the loop (with replicas): its id, once written (None:
    not yet, or its write failed). Its end, written after it on the same thread, finds it."""

    id: int | None = None

    def found(self, row_id: int) -> None:
        self.id = row_id


def _claim(  # noqa: PLR0917  (prepare's values)
    rec: StoreRecorder,
    starts: Sequence[Start],
    mine: Sequence[tuple[str, datetime]],
    at: datetime,
    limits: Mapping[str, int] | None,
    backfills: Mapping[str, str] | None,
) -> Callable[[Store], Claimed]:
    """A wake's claims as one call of the store (`Store.claim`); a backfill's start (it
    comes alone) by its backfill's copy of the slot (`claim_backfill`), which holds it
    while a run of its job goes anywhere unless the job's overlap is `allow`."""
    if backfills:
        exclusive = rec.one_at_a_time | rec.replacing
        return lambda store: Claimed(
            cast(BackfillRecords, store).claim_backfill(starts, backfills, at, exclusive=exclusive),
            [],
        )
    copies = [rec.replica or "" if s.job in rec.each_replica else "" for s in starts]
    return lambda store: store.claim(
        starts, mine, at, copies=copies, exclusive=rec.one_at_a_time,
        replacing=rec.replacing, limits=limits,
    )  # fmt: skip


def _kw(chained: Sequence[object]) -> dict[str, Any]:
    """The SQLite store's `chained` argument, when there is one (docs/workflows.md)."""
    return {"chained": chained} if chained else {}


def _row_of(token: object) -> int | None:
    return token.id if isinstance(token, _Row) else token if isinstance(token, int) else None
