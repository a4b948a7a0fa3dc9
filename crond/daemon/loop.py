"""The scheduling loop: the shell around the scheduling core (crond/schedule/core.py).

It sleeps until the core's `wake_at` (never longer than a heartbeat) and re-reads the
clock after every wake. A wake asks the core what is due (`propose`), asks the daemon
once to record and claim its starts (`Effects.claim`), and carries out what the core
settles on, in order, through `Effects`: the rules are the core's, the doing is here.
`Effects.beat` is called once a heartbeat, so a stuck loop lets the liveness file and
the watchdog go stale. Runs are the loop's (crond/daemon/going.py): none outlives it.

With replicas the claims are awaited (at most a deadline: crond/daemon/offloop.py). While
a wake awaits them nothing else may change the core under it: `lock` is held by a wake
from `propose` to the end of its actions, and taken by whatever else changes the core —
a reload's swap, a pause or resume (asked, or polled from the cluster), a trigger, the
start of a replacement. Without replicas nothing is awaited and the lock is never
contended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Generic

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, sleep_until_woken
from crond.config.loaded import LoadedJob
from crond.daemon import events
from crond.daemon.going import Going
from crond.daemon.runs import Effects, Gate, Pending, R, RunHandle
from crond.schedule.actions import (
    NO_CLAIMS,
    Action,
    LockWait,
    Queued,
    Replace,
    Resumed,
    Start,
    Tell,
)
from crond.schedule.core import TRIGGER_REFUSED, Core
from crond.schedule.heap import ConfigDiff

Resume = Mapping[str, datetime] | None  # the cursors a previous daemon left
Runs = Mapping[str, int] | None  # the scheduled runs each job has had (`max_runs`)

__all__ = ["ConfigDiff", "Effects", "Gate", "Loop", "Pending", "RunHandle"]


class Loop(Generic[R]):
    def __init__(
        self, *, clock: Clock, log: FilteringBoundLogger, effects: Effects[R], heartbeat: timedelta
    ) -> None:
        self.clock = clock
        self.log = log
        self.effects = effects
        self.heartbeat = heartbeat  # the daemon sets it at each load
        self.core = Core()
        self.going: Going[R] = Going(effects, self._ended)
        self.running = self.going.by_job  # the runs going, by job
        self.idle = self.going.idle  # set while no run is going
        self._soon: list[tuple[LoadedJob, datetime, Gate | None]] = []
        self._wake = asyncio.Event()
        self._stopping = False
        self.lock = asyncio.Lock()  # the core's, while a wake or a change holds it
        # The daemon's backfills (crond/daemon/backfilling.py): their slots started at
        # the end of each wake.
        self.backfill: Callable[[datetime], Awaitable[None]] | None = None

    def load(
        self, jobs: Mapping[str, LoadedJob], resume: Resume = None, runs: Runs = None
    ) -> ConfigDiff:
        """Swap in a new set of jobs (`Core.load`); running runs are never interrupted."""
        self._wake.set()
        return self.core.load(jobs, self.clock.now(), resume, runs)

    def limit(self, max_running: int | None) -> None:
        """The daemon's limit of runs going at once (None: none); set at each load."""
        self.core.queue.limit = max_running
        self._wake.set()  # a higher limit lets queued runs start now

    # --- steering: pause, resume, trigger, kill --------------------------------------

    def pause(self, name: str, until: datetime | None) -> None:
        """Pass over `name`'s slots until `until` (None: until resumed; the rules:
        crond/schedule/pauses.py)."""
        self.core.pauses.pause(name, until)
        self._wake.set()  # its end is a new instant to wake at

    @property
    def stopping(self) -> bool:
        return self._stopping

    def wake(self) -> None:
        """Wake now (a backfill was begun: its first slot may start)."""
        self._wake.set()

    def resume(self, name: str) -> int | None:
        """End `name`'s pause: the slots it passed over; None if it was not paused."""
        skipped = self.core.pauses.resume(name)
        self._wake.set()
        return skipped

    async def trigger(self, name: str) -> R | Pending[R] | str:
        """Start a run of `name` now, as a scheduled one would start (`Core.trigger`), or
        say in one sentence why not. With `overlap: replace` and runs going, those are
        stopped and a `Pending` is returned."""
        async with self.lock:
            return await _triggered(self, name)

    def kill(self, target: str) -> list[R]:
        """Stop the runs of job `target`, or the run `target` (crond/daemon/going.py)."""
        return self.going.kill(target)

    # --- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule until `stop()`, then keep beating until every run has ended."""
        async with asyncio.TaskGroup() as tasks:
            self.going.tasks = tasks
            next_beat = self.clock.monotonic()
            while not (self._stopping and not self.running):
                now = self.clock.now()
                # The beat before the tick: claims it awaits (a hung database: up to a
                # second each wake) never hold the liveness file back.
                if self.clock.monotonic() >= next_beat:
                    self.effects.beat(now)
                    next_beat = self.clock.monotonic() + self.heartbeat.total_seconds()
                if not self._stopping:
                    async with self.lock:
                        await self._tick(now)
                await self._sleep(self.clock.now(), next_beat - self.clock.monotonic())

    def start_soon(self, job: LoadedJob, slot: datetime, before: Gate | None = None) -> None:
        """Start a run of `job` for `slot` at the next wake, whatever its schedule says
        (`@reboot` jobs); `before` is called just before (a run that never starts, the
        daemon stopped first, is not recorded as started)."""
        self._soon.append((job, slot, before))
        self._wake.set()

    def stop(self) -> None:
        """Start no new run from now on."""
        self._stopping = True
        self._wake.set()

    async def _sleep(self, now: datetime, beat_in: float) -> None:
        # Stopping, nothing more starts: nothing but the beat may wake the loop (a slot
        # that fell due would spin a core until the last run ended).
        target = now + timedelta(seconds=max(0.0, beat_in))
        if not self._stopping and (wake := self.core.wake_at(self.clock.lead)) is not None:
            target = min(target, wake)
        await sleep_until_woken(self.clock, target, self._wake)

    async def _tick(self, now: datetime) -> None:
        soon, self._soon = self._soon, []
        for job, slot, before in soon:
            if before is not None:
                before()
            self.going.start(job, slot)
        # Slots up to `lead` ahead are decided and recorded now, as of the latest of them
        # (`at`), and spawned at it: the gate blocks until `at` before the first spawn or
        # event of theirs; nothing runs in between, so what is decided for `at` holds at
        # `at`. crond's own `lag_ms` (bench/bench_lag.py): 2.7 ms, 0.4 with lead and gate.
        proposal = self.core.propose(now, self.clock.lead, self.going.counts)
        claims = NO_CLAIMS
        if proposal.starts or proposal.told:  # all of them, before any is spawned
            claims = await self.effects.claim(
                proposal.starts, proposal.told, proposal.at, counted=True
            )
        gate = events.gate(self.clock, proposal.at) if proposal.at > now else None
        await self._carry_out(self.core.settle(proposal, claims), gate)
        if gate is not None:
            gate()  # nothing was spawned (skipped, or could not start): still not before `at`
        if self.backfill is not None:
            await self.backfill(now)

    async def _carry_out(self, actions: list[Action], gate: Gate | None = None) -> None:
        """The core's actions, in order (`gated` ones not before the wake's instant)."""
        for action in actions:
            if gate is not None and action.at_slot:
                gate()  # what is logged, or stopped, of a slot is so at the slot
            if isinstance(action, Start):
                self.going.start(action.job, action.slot, gate if action.gated else None)
            elif isinstance(action, Tell):
                await self._tell(action)
            elif isinstance(action, Replace):
                self._replace(action.job, action.slot)
            elif isinstance(action, Queued | LockWait):
                events.log_wait(self.log, action)
            elif isinstance(action, Resumed):
                self.effects.resumed(action.job, action.skipped)
            else:
                self.effects.moved(action.entries, action.cursors)

    async def _tell(self, tell: Tell) -> None:
        if tell.check is not None:
            claims = await self.effects.claim([], [tell.check], self.clock.now())
            if tell.check in claims.quiet:
                return  # another replica tells of it
        events.log_decision(self.log, tell.job, tell.decision)
        self.effects.decided(tell.job, tell.decision)

    def _replace(self, job: LoadedJob, slot: datetime, pending: Pending[R] | None = None) -> None:
        """Stop `job`'s runs now; once they have ended, claim and start `slot`."""
        counted = pending is None  # a trigger's is not counted toward `max_runs`
        then = lambda: self._claimed(job, slot, counted=counted)  # noqa: E731  (read where it is passed)
        self.going.replace(job.name, pending, then, stopping=lambda: self._stopping)

    async def _claimed(self, job: LoadedJob, slot: datetime, *, counted: bool) -> R | None:
        """`job` started for `slot` now if its claim is not refused (else as refused)."""
        async with self.lock:
            now = self.clock.now()
            claims = await self.effects.claim([(job, slot)], [], now, counted=counted)
            reason = claims.refused.get((job.name, slot))
            if reason is None:
                return self.going.start(job, slot)
            await self._carry_out(self.core.refused(job, slot, reason, now))
        self._wake.set()  # a waiting start is a new instant to wake at
        return None

    def _ended(self, name: str, slot: datetime) -> None:
        """A run ended: its locks are given back; a draining loop may now end, a queued
        run, one waiting for its job, for a lock, or its chained runs may start."""
        core = self.core
        released = core.locks.release(name, slot)
        waiting = bool(core.queue or core.backlog or (released and core.locks) or core.chains)
        waiting = waiting or bool(core.backfills)
        if not self.running or waiting:
            self._wake.set()


async def _triggered(loop: Loop[R], name: str) -> R | Pending[R] | str:
    """`Loop.trigger`, the loop's lock held: the core's actions for it carried out, then
    its start claimed (with replicas, against the other replicas) and begun, or its
    runs replaced. A refused claim gives back the locks the core took for it."""
    if loop.stopping or loop.going.tasks is None:
        return "the daemon is stopping" if loop.stopping else "the daemon is not running"
    now = loop.clock.now()
    actions = loop.core.trigger(name, now, loop.going.counts)
    if isinstance(actions, str):
        return actions
    *first, last = actions
    await loop._carry_out(first)
    if isinstance(last, Replace):
        pending: Pending[R] = Pending(name)
        loop._replace(last.job, last.slot, pending)
        return pending
    assert isinstance(last, Start)
    claims = await loop.effects.claim([(last.job, now)], [], now)
    reason = claims.refused.get((name, now))
    if reason is not None:
        loop.core.locks.release(name, now)
        return TRIGGER_REFUSED[reason].format(name=name)
    return loop.going.start(last.job, now)
