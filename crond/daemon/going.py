"""The runs the loop has started (crond/daemon/loop.py): each spawned through the daemon's
`Effects.launch` and driven to its end in a task of the loop's TaskGroup, so no run
outlives the loop; counted by job for the scheduling core; stopped on demand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from typing import Any, Generic

from crond.config.loaded import LoadedJob
from crond.daemon.runs import Counts, Effects, Gate, Pending, R


class Going(Generic[R]):
    """The runs going, by job. `ended` is called after each run's end, with its job's name
    and its slot (the loop gives back its locks and wakes)."""

    def __init__(self, effects: Effects[R], ended: Callable[[str, datetime], None]) -> None:
        self.effects = effects
        self.ended = ended
        self.by_job: dict[str, list[R]] = {}
        self.counts = Counts(self.by_job)  # how many of each job: the core reads these
        self.idle = asyncio.Event()  # set while no run is going
        self.idle.set()
        self.tasks: asyncio.TaskGroup | None = None  # the loop's, while it runs

    def count(self) -> int:
        return sum(len(runs) for runs in self.by_job.values())

    def all(self) -> list[R]:
        return [run for runs in self.by_job.values() for run in runs]

    def start(self, job: LoadedJob, slot: datetime, gate: Gate | None = None) -> R:
        run = self.effects.launch(job, slot, gate)  # spawned now; the rest is a task of ours
        self.by_job.setdefault(job.name, []).append(run)
        self.idle.clear()
        self.own(self._drive(job, slot, run))
        return run

    def kill(self, target: str) -> list[R]:
        """Stop the runs of job `target`, or the run whose run_id is `target`, as a
        timeout does (outcome killed, no retry): those runs; [] when none is going."""
        runs = self.by_job.get(target)
        chosen = list(runs) if runs else [r for r in self.all() if r.run_id == target]
        for run in chosen:
            run.stop()
        return chosen

    def stop(self, name: str) -> list[R]:
        """Stop `name`'s runs (to be replaced): those runs."""
        old = list(self.by_job.get(name, ()))
        for run in old:
            run.stop()
        return old

    def replace(
        self,
        name: str,
        pending: Pending[R] | None,
        then: Callable[[], Awaitable[R | None]],
        *,
        stopping: Callable[[], bool],
    ) -> None:
        """Stop `name`'s runs now; once they have all ended, `then` starts their
        replacement (and `pending`, a trigger's, is settled with what it started)."""
        old = self.stop(name)
        self.own(self._then(name, old, pending, then, stopping))

    async def _then(
        self,
        name: str,
        old: list[R],
        pending: Pending[R] | None,
        then: Callable[[], Awaitable[R | None]],
        stopping: Callable[[], bool],
    ) -> None:
        new = None
        try:
            if await self._replaced(name, old, pending, stopping):
                new = await then()
        finally:
            if pending is not None:
                pending.settle(new)

    async def _replaced(
        self, name: str, old: list[R], pending: Pending[R] | None, stopping: Callable[[], bool]
    ) -> bool:
        """Wait until the stopped runs `old` of `name` have all ended: whether their
        replacement may start now (not if the daemon is stopping, or the pending run was
        cancelled). Another replacement may have started meanwhile (two triggers, or a
        trigger and a scheduled slot, waiting on the same runs): it is stopped in turn, so
        one run of the job goes at a time, the newest."""
        ended: list[R] = []
        while old:
            await asyncio.gather(*(run.wait() for run in old))
            ended += old
            if stopping() or (pending is not None and pending.cancelled):
                return False
            old = [r for r in self.by_job.get(name, ()) if r not in ended]
            for run in old:
                run.stop()
        return True

    async def _drive(self, job: LoadedJob, slot: datetime, run: R) -> None:
        """A run's work, then its place given up (also when cancelled); the daemon is told
        of its start (here: after the wake's spawn pass) and its end."""
        try:
            self.effects.run_started(job, run)
            result = await run.drive()
            self.effects.run_ended(job, run, result)
        finally:
            runs = self.by_job.get(job.name, [])
            if run in runs:
                runs.remove(run)
            if not runs:
                self.by_job.pop(job.name, None)
            if not self.by_job:
                self.idle.set()
            self.ended(job.name, slot)

    def own(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self.tasks is not None, "runs start only inside Loop.run"
        self.tasks.create_task(coro)
