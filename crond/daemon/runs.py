"""What the loop drives and what it acts through: a run as it sees one (`RunHandle`;
crond.run.runner.Run is one), the `Gate` that holds a spawn until its slot, `Effects`
(what the loop does to the world: the daemon implements it), and `Pending`, what
`crond trigger` gets for a run of an `overlap: replace` job that must wait for the runs
it replaces to end (docs/control.md).

crond/daemon/loop.py re-exports them: the daemon and the tests name them from there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from crond.config.loaded import LoadedJob
from crond.run.attempt import RunResult
from crond.schedule.actions import Claims, Key
from crond.schedule.rules import Decision, Entry


class RunHandle(Protocol):
    """What the loop needs of a run (runner.Run is one)."""

    run_id: str

    async def drive(self) -> RunResult:
        """The run's work, to its end: the loop awaits it once, in a task of its own."""
        ...

    async def wait(self) -> RunResult:
        """The run's end, for others: cancelling the waiter does not cancel the run."""
        ...

    def stop(self) -> None: ...

    def kill(self) -> None: ...


# Called by a run just before it spawns its process (and by the loop before anything else
# it does for a slot): returns at the slot, not before (crond/daemon/loop.py, Loop._tick).
Gate = Callable[[], None]
Starts = Sequence[tuple[LoadedJob, datetime]]  # the runs one claim records: (job, slot)


# The loop's runs are of one kind: the daemon's are crond.run.runner.Run, the tests' stand-ins.
R = TypeVar("R", bound=RunHandle)


class Effects(Protocol[R]):
    """What the loop does to the world; the daemon's (crond/daemon/lifecycle.py). Each is
    called from the loop's turn: quick (`claim` awaited, with a deadline), and never
    raising for a failure of the world."""

    def launch(self, job: LoadedJob, slot: datetime, gate: Gate | None) -> R:
        """Spawn a run of `job` for `slot` now (passing `gate` just before the spawn)."""

    async def claim(
        self, starts: Starts, told: Sequence[Key], at: datetime, *, counted: bool = False
    ) -> Claims:
        """Record `starts` (started at `at`) before any is spawned, and with replicas claim
        them and the `told` slots, in one round trip: what may not start, what not tell.
        `counted`: the starts are the schedule's (not a trigger's), counted toward their
        jobs' `max_runs`.
        Without replicas it is done at once (a local file); with them it is awaited, at
        most a deadline (crond/daemon/offloop.py), the core locked meanwhile (the loop's)."""

    def beat(self, now: datetime) -> None:
        """Once a heartbeat: the watchdog, the store's checks, the liveness file."""

    def decided(self, job: LoadedJob, decision: Decision) -> None:
        """A slot's decision, after its events are logged (missed, skipped, paused, ...)."""

    def run_started(self, job: LoadedJob, run: R) -> None:
        """A run is going: on the loop's turn after its spawn pass, not inside it."""

    def run_ended(self, job: LoadedJob, run: R, result: RunResult) -> None:
        """A run has ended (its retries spent): `result` is what its `drive()` returned."""

    def resumed(self, job: str, skipped: int) -> None:
        """A pause ran out by itself, having passed over `skipped` slots."""

    def moved(self, entries: list[Entry], cursors: list[Key]) -> None:
        """A wake moved these entries' next fires (and these cursors, no run started)."""


class Pending(Generic[R]):
    """A triggered run of an `overlap: replace` job with runs going: those are stopped
    first, and the run starts once they have all ended. `run_id` is "" until then;
    `started()` says which run it became (None: none, the daemon stopped first, or the
    pending run was stopped); `stop()`/`kill()` before that cancel it."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.run_id = ""
        self.run: R | None = None
        self.cancelled = False
        self._started: asyncio.Future[R | None] = asyncio.get_running_loop().create_future()

    async def started(self) -> R | None:
        return await asyncio.shield(self._started)

    async def wait(self) -> RunResult | None:
        run = await self.started()
        return None if run is None else await run.wait()

    def stop(self) -> None:
        self.cancelled = True
        if self.run is not None:
            self.run.stop()

    def kill(self) -> None:
        self.cancelled = True
        if self.run is not None:
            self.run.kill()

    def settle(self, run: R | None) -> None:
        """The loop's: the run it became (None: it never started)."""
        if not self._started.done():
            self.run = run
            self.run_id = run.run_id if run is not None else ""
            self._started.set_result(run)


class Counts(Mapping[str, int]):
    """How many runs of each job are going, read from the loop's `running` (no copy)."""

    def __init__(self, running: Mapping[str, Sequence[RunHandle]]) -> None:
        self._running = running

    def __getitem__(self, name: str) -> int:
        return len(self._running[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._running)

    def __len__(self) -> int:
        return len(self._running)
