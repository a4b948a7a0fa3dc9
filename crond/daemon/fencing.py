"""A replica cut off from its cluster's database (docs/replicas.md, "Fencing", and "What
each failure does"), beside the heartbeat.

The others take a replica for dead once its heartbeat row is `replica_timeout` old, and
then close its runs as lost and claim its jobs' next slots. With `daemon.fencing: stop`
a replica that has not proved itself alive (crond/daemon/proof.py) for `replica_timeout`
less one heartbeat — on its own monotonic clock, from when its last successful beat was
sent — stops its runs first, as `crond kill` does (SIGTERM, SIGKILL after `kill_after`;
outcome `killed`), and logs `cluster.fenced`: so an `overlap: skip` job, a `max_running`
and a job's locks hold across a partition. With `keep` (the default) its runs go on.

A replica whose first proof after such a silence finds runs of its own closed `lost` by
another replica says so, once: `cluster.declared_dead`, naming them (their ends, when
they come, are written beside `lost`: `job.late_end`, crond/daemon/recorder.py). A
replica frozen (SIGSTOP, a paused VM) cannot act while frozen: it fences as it wakes,
before its first claim.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, cast

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, Timer, iso_utc
from crond.daemon.loop import Loop
from crond.daemon.proof import Proof
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED
from crond.run import runner
from crond.store.base import AttemptRow, Only, Replicated

if TYPE_CHECKING:
    from crond.config.loaded import LoadedConfig

ASKED = 1000  # runs looked up at most after a silence (the oldest first)


class Fencing:
    """A replica's runs stopped when it cannot prove itself alive (`stop`), and what it
    says when it finds it was taken for dead."""

    def __init__(
        self,
        *,
        log: FilteringBoundLogger,
        clock: Clock,
        loop: Loop[runner.Run],
        recorder: StoreRecorder,
        proof: Proof,
    ) -> None:
        self.log = log
        self.clock = clock
        self.loop = loop
        self.recorder = recorder
        self.proof = proof
        self.replica = recorder.replica or ""
        self.mode = "keep"  # daemon.fencing, set at each load
        self._timer: Timer | None = None
        self._fenced: list[runner.Run] = []  # the runs stopped in this silence
        self._looking: asyncio.Task[None] | None = None  # the declared-dead look
        self._going: list[str] = []  # the run ids going at the last proof
        proof.watchers.append(self._proved)

    def configure(self, cfg: LoadedConfig) -> None:
        self.mode = cfg.daemon.fencing
        self._arm()

    def _arm(self) -> None:
        """The timer, at the last proof plus the threshold (none before a first proof)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        silent = self.proof.silent_for()
        if silent is None:
            return
        left = max(0.0, self.proof.fence_after() - silent)
        self._timer = self.clock.call_at(self.clock.now() + timedelta(seconds=left), self._due)

    def _due(self) -> None:
        self._timer = None
        silent = self.proof.silent_for()
        if silent is None:
            return
        if silent < self.proof.fence_after():
            self._arm()  # a proof came meanwhile
            return
        if self.mode == "stop" and not self._fenced:
            self._fence(silent)

    def _fence(self, silent: float) -> None:
        """Stop every run going here, as `crond kill` does; `cluster.fenced` names them."""
        runs = [run for run in self.loop.going.all() if not run.done()]
        if not runs:
            return
        for run in runs:
            run.stop()
        self._fenced = runs
        self.log.error(
            "cluster.fenced", replica=self.replica, silent_s=round(silent, 3),
            replica_timeout_s=self.proof.timeout, runs=[_named(run) for run in runs],
        )  # fmt: skip

    def _proved(self, silence: float) -> None:
        """A proof came, after `silence` seconds without one: after a long one, the runs
        going are stopped first (`stop`: before the claim it came with starts anything),
        and whether the others took this replica for dead is looked up."""
        if silence >= self.proof.fence_after():
            if self.mode == "stop" and not self._fenced:
                self._fence(silence)
            # Those going when the silence began (some may have ended in it), and since.
            ids = dict.fromkeys([*self._going, *(run.run_id for run in self._fenced)])
            ids.update(dict.fromkeys(run.run_id for run in self.loop.going.all()))
            if ids and (self._looking is None or self._looking.done()):
                self._looking = asyncio.ensure_future(self._declared(list(ids)[:ASKED]))
        self._going = [run.run_id for run in self.loop.going.all()][:ASKED]
        self._fenced = []
        self._arm()

    async def _declared(self, ids: list[str]) -> None:
        """`cluster.declared_dead` once, naming the runs of `ids` another replica closed
        as lost while this one was silent (`lost` stays, whatever end came since)."""

        def look(store: Replicated) -> list[AttemptRow]:
            found = []
            for run_id in ids:
                found += store.recent(None, 1, Only(run_id=run_id))
            return found

        rows = await self.recorder.ask(lambda store: look(cast(Replicated, store)), force=True)
        lost = [] if rows is FAILED else [row for row in rows if row.outcome == "lost"]
        if not lost:
            return
        self.log.warning(
            "cluster.declared_dead", replica=self.replica,
            runs=[
                {"job": row.job, "run_id": row.run_id, "slot": iso_utc(row.slot),
                 "lost_at": None if row.finished is None else iso_utc(row.finished)}
                for row in lost
            ],
        )  # fmt: skip


def _named(run: runner.Run) -> dict[str, object]:
    return {"job": run.job, "run_id": run.run_id, "slot": iso_utc(run.slot)}
