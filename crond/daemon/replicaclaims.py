"""How a replica's starts are claimed (docs/replicas.md): the recorder's part that, with
replicas, turns a wake's starts into one claim of the cluster's database, and its answer
into what the core takes (`Claims`: crond/schedule/actions.py). A claim may be refused
(another replica holds the slot, the job is busy or done elsewhere, a lock is full) or
get no answer (then it is in doubt: crond/daemon/indoubt.py, and this part closes the
runs of those given up). StoreRecorder (recorder.py) builds on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, cast

from crond.clock import Clock
from crond.config.loaded import LoadedConfig
from crond.config.model import Overlap, Replicas
from crond.daemon.indoubt import InDoubt, ours
from crond.daemon.offloop import OffLoop
from crond.daemon.proof import Proof
from crond.daemon.stores import FAILED, Opener
from crond.schedule.actions import Claims, Key, LockedBy, Refusal
from crond.store.base import (
    AttemptRow,
    BackfillRecords,
    Claimed,
    Locked,
    Replicated,
    Start,
    Store,
)
from crond.store.rows import AFTER

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger


class ReplicaClaims(OffLoop):
    """OffLoop that claims a replica's starts (`claim`), keeps what a loaded file says of
    how each job is claimed (`configure_claims`), and gives up the claims in doubt whose
    starts were missed (`missed`)."""

    def __init__(
        self,
        opener: Opener | None,
        log: FilteringBoundLogger,
        clock: Clock,
        quiet: float = 10.0,
        *,
        replica: str | None = None,
        on_lost: Callable[[AttemptRow], None] | None = None,
    ) -> None:
        super().__init__(opener, log, clock, quiet, replica=replica, on_lost=on_lost)
        self.proof = Proof(clock)  # with replicas, a claim beats first when stale
        self._prepared: dict[str, int] = {}  # run id -> its first attempt's row
        # Jobs each replica runs (`replicas: all`): their claims are this replica's copy.
        self.each_replica: frozenset[str] = frozenset()
        # Jobs that run one at a time (`overlap: skip`): with replicas, not claimed while
        # a run of the job goes on another replica.
        self.one_at_a_time: frozenset[str] = frozenset()
        # Jobs whose new run stops the old (`overlap: replace`): with replicas, the other
        # replicas' runs of the job too.
        self.replacing: frozenset[str] = frozenset()
        # Each job's locks and their capacities: with replicas, taken with its claims.
        self.locks: dict[str, tuple[tuple[str, int], ...]] = {}
        self.in_doubt = InDoubt()  # with replicas, the claims that got no answer
        self._abandoned: list[str] = []  # their run ids given up, not yet closed

    def configure_claims(self, cfg: LoadedConfig) -> None:
        """What a file just loaded says of how each job's starts are claimed."""
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
        capacity = cfg.config.locks
        self.locks = {
            job.name: tuple((n, capacity[n]) for n in job.settings.locks if n in capacity)
            for job in jobs
            if job.settings.locks
        }

    async def claim(
        self,
        starts: Sequence[Start],
        told: Sequence[tuple[str, datetime]],
        at: datetime,
        *,
        limits: Mapping[str, int] | None = None,
        backfills: Mapping[str, str] | None = None,
        chained: Mapping[str, str] | None = None,
    ) -> Claims:
        """With replicas, `prepare`'s claims: a wake's starts and told slots (those of a
        job each replica runs are each replica's to tell) in one call of the store, and
        what came of them. A `chained` start (run id -> its parent's run id) is claimed
        by its parent's run id, whatever its slot."""
        mine = [key for key in told if key[0] not in self.each_replica]
        if not starts and not mine:
            return Claims()
        call = _claim(self, starts, mine, at, limits, backfills, chained or {})
        claimed = await self.proof.claim(self.ask, call, force=bool(starts))
        if claimed is FAILED:
            self.in_doubt.failed(starts)  # each may have committed all the same
            return Claims({(s.job, s.slot): "database" for s in starts})
        return await self._answers(starts, mine, claimed)

    async def _answers(
        self, starts: Sequence[Start], mine: Sequence[Key], claimed: Claimed
    ) -> Claims:
        """The store's answer to a wake's claims, as the core takes it: the starts that
        may not start and why (those in doubt looked up first), the told slots a peer
        tells of, and the locks that refused starts."""
        # A told slot (skipped, missed) whose start's claim is in doubt: if that claim
        # committed, the slot is this replica's, not a peer's: told here, and the run it
        # may have recorded, never started, given up.
        doubted_told = {key for key in mine if self.in_doubt.run_id(key) is not None}
        for job, slot in doubted_told:
            self._abandoned += self.in_doubt.given_up(job, slot, slot)
        self._abandon()  # what an outage left to close, now that the database answers
        refused: dict[Key, Refusal] = {}
        locked: dict[Key, LockedBy] = {}
        doubted = self.in_doubt.doubted(starts, claimed.starts)
        found = await self._ours(doubted)
        if found is None:  # no answer: each still in doubt, tried again as it was
            self.in_doubt.failed(doubted)
            refused.update({(s.job, s.slot): "database" for s in doubted})
        for start, claim in zip(starts, claimed.starts, strict=True):
            if (start.job, start.slot) in refused:
                continue
            claim = (found or {}).get(start.run_id, claim)  # noqa: PLW2901  (its own, in doubt)
            key = (start.job, start.slot)
            if isinstance(claim, int):
                self._prepared[start.run_id] = claim
            elif isinstance(claim, Locked):
                refused[key] = "lock"
                locked[key] = (claim.lock, tuple((h.job, h.slot) for h in claim.holders))
            else:
                refused[key] = "taken" if claim is None else claim  # busy, done
        answers = zip(mine, claimed.told, strict=True)
        quiet = {key for key, ours in answers if not ours and key not in doubted_told}
        return Claims(refused, quiet, locked)

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


def _claim(  # noqa: PLR0917  (claim's values)
    rec: ReplicaClaims,
    starts: Sequence[Start],
    mine: Sequence[tuple[str, datetime]],
    at: datetime,
    limits: Mapping[str, int] | None,
    backfills: Mapping[str, str] | None,
    chained: Mapping[str, str],
) -> Callable[[Store], Claimed]:
    """A wake's claims as one call of the store (`Store.claim`); a backfill's start (it
    comes alone) by its backfill's copy of the slot (`claim_backfill`), which holds it
    while a run of its job goes anywhere unless the job's overlap is `allow`."""
    if backfills:
        exclusive = rec.one_at_a_time | rec.replacing
        return lambda store: Claimed(
            cast(BackfillRecords, store).claim_backfill(
                starts, backfills, at, exclusive=exclusive, locks=rec.locks
            ),
            [],
        )
    copies = [
        AFTER + chained[s.run_id] if s.run_id in chained
        else rec.replica or "" if s.job in rec.each_replica else ""
        for s in starts
    ]  # fmt: skip
    return lambda store: store.claim(
        starts, mine, at, copies=copies, exclusive=rec.one_at_a_time,
        replacing=rec.replacing, limits=limits, locks=rec.locks,
    )  # fmt: skip
