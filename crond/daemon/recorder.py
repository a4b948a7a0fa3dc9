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
from crond.daemon.late import LateEnd, LateEnds
from crond.daemon.offloop import SLOW
from crond.daemon.replicaclaims import ReplicaClaims
from crond.daemon.stores import FAILED, Opener
from crond.schedule.actions import Claims
from crond.store.base import (
    AttemptRow,
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


class StoreRecorder(ReplicaClaims):
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
        self.history: dict[str, int] = {}  # job -> attempts kept; the store's default else
        self.told = told
        # With replicas, the end of an attempt a retry follows, by run id: written when the
        # next attempt starts or the run ends, so the run's row stays open while it waits
        # (another replica does not claim an `overlap: skip` job's next slot meanwhile).
        self._held: dict[str, Callable[..., object]] = {}  # (End, given `release`)
        self.late = LateEnds(log, replica)  # ends written beside `lost`: told once
        self.chains: Callable[[Run, RunResult], list[Chained]] | None = None  # chaining.py

    def configure(self, cfg: LoadedConfig) -> None:
        """What a file just loaded says of its jobs' records: the attempts each keeps, and,
        with replicas, how each job's starts are claimed."""
        self.history = {name: job.settings.history for name, job in cfg.jobs.items()}
        self.configure_claims(cfg)

    # --- runs -------------------------------------------------------------------------

    async def prepare(
        self,
        starts: Sequence[Start],
        told: Sequence[tuple[str, datetime]] = (),
        *,
        started: datetime | None = None,
        chained: Mapping[str, str] | None = None,
        limits: Mapping[str, int] | None = None,
        backfills: Mapping[str, str] | None = None,
    ) -> Claims:
        """Record the first attempts of a wake's runs in one commit, before any of them is
        spawned, as started at `started` (default: now); each run's `started` then finds
        its row. With replicas, claim them in that commit, with the `told` slots (skipped,
        missed): the starts that may not start, and why (all of them when the database
        did not answer); the told slots another replica claimed first, and so tells of
        (none when the database did not answer: each replica tells what it saw). Without
        replicas, the records of the `chained` starts (run id -> parent's run id) go too
        (with replicas, each is claimed by its parent's run id and its record goes with it);
        `backfills` (run id -> backfill id): the backfills' starts, marked, their progress
        moved in the same commit."""
        at = started or self.clock.now()
        if self.replica is None:
            if starts:
                parents = chained or {}
                of = [(s.job, parents[s.run_id]) for s in starts if s.run_id in parents]
                more = _kw(of) | ({"backfills": backfills} if backfills else {})
                ids = self.write(lambda store: store.start_many(starts, at, limits, **more))
                for start, row_id in zip(starts, [] if ids is FAILED else ids, strict=False):
                    self._prepared[start.run_id] = row_id
            return Claims()
        return await self.claim(
            starts, told, at, limits=limits, backfills=backfills, chained=chained
        )

    def started(self, run: Run, attempt: int) -> object:
        if self._held:  # the attempt before, which waited for this one
            self.run_ended(run.run_id, last=False)
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
        more = _kw(chained)  # in the end's commit

        def end(store: Store, release: bool = True) -> LateEnd | None:
            """With replicas, the run's last end (`release`) gives its locks back."""
            row = _row_of(token)  # None: its start was never written
            if row is None and release and self.replica is not None:
                cast(Replicated, store).release_locks(run.run_id)  # (held since its claim)
            last = {"release": release} if self.replica is not None else {}
            lost_at = None if row is None else store.end(
                row, job=run.job, run_id=run.run_id, finished=now,
                outcome=result.outcome.value, exit_code=result.exit_code,
                duration_s=result.duration_s, output=tail, keep=self.history.get(run.job),
                **more, **last,
            )  # fmt: skip
            return None if lost_at is None else LateEnd(run, result, lost_at)

        write_end(end)

    def _written(self, said: object) -> None:
        if isinstance(said, LateEnd):
            self.late.told(said)

    def run_ended(self, run_id: str, *, last: bool = True) -> None:
        """`run_id`'s last attempt ended (it may have been stopped while it waited for a
        retry), or its next began (not `last`): the end of an attempt held back is written
        now, with the run's locks given back if it was the last."""
        held = self._held.pop(run_id, None)
        if held is not None:
            self._write_end(functools.partial(held, release=last))

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
        self,
        moved: Sequence[ViewRow],
        cursors: Sequence[tuple[str, datetime]],
        first: Sequence[tuple[str, datetime]] = (),
    ) -> None:
        """After a wake: next fires that moved, and cursors that moved with no run started
        (slots missed or skipped: a restart must not take them for downtime); after a
        load, `first`: the cursors of jobs first seen, where they have none."""
        if moved or cursors or first:
            self.send(lambda store: store.update_view(moved, cursors, first))


class _Row:
    """An attempt's row written off the loop (with replicas): its id, once written (None:
    not yet, or its write failed). Its end, written after it on the same thread, finds it."""

    id: int | None = None

    def found(self, row_id: int) -> None:
        self.id = row_id


def _kw(chained: Sequence[object]) -> dict[str, Any]:
    """The store's `chained` argument, when there is one (docs/workflows.md)."""
    return {"chained": chained} if chained else {}


def _row_of(token: object) -> int | None:
    return token.id if isinstance(token, _Row) else token if isinstance(token, int) else None
