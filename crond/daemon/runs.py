"""What the loop drives: a run as it sees one (`RunHandle`; crond.run.runner.Run is one),
how it has one spawned (`Launch`, passing the `Gate` that holds the spawn until its
slot), and `Pending`, what `crond trigger` gets for a run of an `overlap: replace` job
that must wait for the runs it replaces to end (docs/control.md).

crond/daemon/loop.py re-exports them: the daemon and the tests name them from there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from crond.config.loaded import LoadedJob


class RunHandle(Protocol):
    """What the loop needs of a run (runner.Run is one)."""

    run_id: str

    async def drive(self) -> object:
        """The run's work, to its end: the loop awaits it once, in a task of its own."""
        ...

    async def wait(self) -> object:
        """The run's end, for others: cancelling the waiter does not cancel the run."""
        ...

    def stop(self) -> None: ...

    def kill(self) -> None: ...


# Called by a run just before it spawns its process (and by the loop before anything else
# it does for a slot): returns at the slot, not before (crond/daemon/loop.py, Loop._tick).
Gate = Callable[[], None]


class Launch(Protocol):
    """Spawn a run of `job` for `slot` now (passing `gate` just before the spawn) and
    return it; its work is then the loop's to drive."""

    def __call__(self, job: LoadedJob, slot: datetime, gate: Gate | None = None) -> RunHandle: ...


class Pending:
    """A triggered run of an `overlap: replace` job with runs going: those are stopped
    first, and the run starts once they have all ended. A RunHandle: `run_id` is "" until
    then; `started()` says which run it became (None: none, the daemon stopped first, or
    the pending run was stopped); `stop()`/`kill()` before that cancel it."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.run_id = ""
        self.run: RunHandle | None = None
        self.cancelled = False
        self._started: asyncio.Future[RunHandle | None] = asyncio.get_running_loop().create_future()

    async def started(self) -> RunHandle | None:
        return await asyncio.shield(self._started)

    async def drive(self) -> object:
        raise RuntimeError("a pending run is started and driven by the loop")

    async def wait(self) -> object:
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

    def settle(self, run: RunHandle | None) -> None:
        """The loop's: the run it became (None: it never started)."""
        if not self._started.done():
            self.run = run
            self.run_id = run.run_id if run is not None else ""
            self._started.set_result(run)
