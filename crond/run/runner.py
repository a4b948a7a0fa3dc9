"""One run of a job: its attempts under one run_id, strung together with retries.

A `Run` spawns attempt 1 when it is made, synchronously: the scheduling loop makes the
runs of a wake in one pass before their slot, and the first spawn waits at the gate it
is handed until the slot. Its work from then on, `drive()` (wait for each attempt's end,
retry), is a coroutine its owner runs in a task of its own TaskGroup: the scheduling
loop's for the daemon (`Loop._start`), `crond run-job`'s for one run. `start_run` makes
a run and hands its work to a TaskGroup in one call.

- Retries: after failed or timeout, up to `retry.attempts` more attempts, same `run_id`,
  waiting `retry.delay_before(n)` on the run's clock (at most that long, whatever the
  wall clock does). A killed attempt is never
  retried; `stop()`/`kill()` during the wait ends the run with the last attempt's
  result, and no attempt is started.
- `stop()`: as for a timeout (TERM, KILL `kill_after` later), outcome killed. `kill()`:
  SIGKILL now.

The parts: spec.py (what to run, once per load), attempt.py (one attempt: its events and
outcome), process.py (the process and its group), output.py (the pipes into events).
What callers use of them is re-exported here.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Final, Protocol

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc, sleep_until_woken
from crond.run.attempt import Attempt, Outcome, Record, RunResult
from crond.run.output import Budget
from crond.run.process import owned_pids
from crond.run.spec import RunSpec, spec_for

__all__ = [
    "Outcome",
    "Recorder",
    "Run",
    "RunResult",
    "RunSpec",
    "iso_utc",
    "new_run_id",
    "owned_pids",
    "spec_for",
    "start_run",
]


def new_run_id(now: datetime | None = None) -> str:
    """A UUID in the version 7 layout (RFC 9562): milliseconds since the epoch (48 bits),
    so ids sort by start time, then 74 random bits. `now`: the instant (default: the
    system clock). Services that take a run id as a UUID (healthchecks.io's `rid`) take
    it as it is."""
    ms = int((now.timestamp() if now is not None else time.time()) * 1000) & _MS_MASK
    raw = (ms << 80) | _VERSION_7 | (secrets.randbits(12) << 64) | _VARIANT | secrets.randbits(62)
    # Formatted by hand: uuid.UUID(int=...) costs twice as much, and this is made before
    # the spawn.
    h = f"{raw:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_MS_MASK: Final = (1 << 48) - 1
_VERSION_7: Final = 0x7 << 76
_VARIANT: Final = 0b10 << 62
# Every run of one wake has the same slot: its text is computed once.
_slot_text: Final = functools.lru_cache(maxsize=64)(iso_utc)


class Recorder(Protocol):
    """Who keeps the record of attempts (the state store). `started` is called before
    each attempt's child is spawned; what it returns comes back to `finished`."""

    def started(self, run: Run, attempt: int) -> object: ...

    def finished(self, token: object, run: Run, result: RunResult, tail: Sequence[str]) -> None: ...


def start_run(
    spec: RunSpec,
    slot: datetime,
    *,
    tasks: asyncio.TaskGroup,
    run_id: str | None = None,
    clock: Clock,
    log: FilteringBoundLogger,
    recorder: Recorder | None = None,
    gate: Callable[[], None] | None = None,
) -> Run:
    """Spawn attempt 1 of a run now (synchronously) and drive the rest of it in a task of
    `tasks`, whose owner sees it fail or end. `gate`, if given, is called just before the
    spawn (everything else is ready then)."""
    run = Run(spec, slot, run_id=run_id, clock=clock, log=log, recorder=recorder, gate=gate)
    tasks.create_task(run.drive(), name=f"crond-run-{spec.job}-{run.run_id}")
    return run


class Run:
    """One run of a job for one slot: all its attempts (retries keep run_id, attempt
    counts 1, 2, ...). Made with attempt 1 spawned; `drive()` does the rest."""

    def __init__(
        self,
        spec: RunSpec,
        slot: datetime,
        *,
        run_id: str | None = None,
        clock: Clock,
        log: FilteringBoundLogger,
        recorder: Recorder | None = None,
        gate: Callable[[], None] | None = None,
    ) -> None:
        if slot.tzinfo is None:
            raise ValueError("slot must be an aware datetime")
        self.spec = spec
        self.job = spec.job
        self.run_id = run_id or new_run_id(clock.now())
        self.slot = slot
        self.clock = clock
        # Every event of a run carries job and run_id. Binding also turns a lazy proxy
        # (structlog.get_logger()) into a real logger once per run, not once per event.
        self.log = log.bind(job=spec.job, run_id=self.run_id)
        self.slot_text = _slot_text(slot)
        self.budget = Budget(self.log)
        self.recorder = recorder
        self._stopping = False
        self._wake = asyncio.Event()
        self._result: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()
        self._driven = False
        self._attempt = 1
        self._current: Attempt | None = self._start_attempt(1, gate)
        self.lag_ms = self._current.lag_ms  # the first attempt's: its spawn minus the slot

    @property
    def attempt(self) -> int:
        return self._attempt

    @property
    def pid(self) -> int | None:
        """The current attempt's main process, while it is not reaped."""
        return None if self._current is None else self._current.pid

    def done(self) -> bool:
        return self._result.done()

    async def wait(self) -> RunResult:
        """The final attempt's result. Cancelling the caller does not cancel the run."""
        return await asyncio.shield(self._result)

    def stop(self) -> None:
        """Stop as for a timeout (TERM, KILL after kill_after), outcome killed, no more
        retries. Idempotent."""
        self._stopping = True
        self._wake.set()
        if self._current is not None:
            self._current.terminate(Outcome.KILLED)

    def kill(self) -> None:
        """SIGKILL the current attempt's group now; no more retries."""
        self._stopping = True
        self._wake.set()
        if self._current is not None:
            self._current.kill()

    async def drive(self) -> RunResult:
        """The run's work after its first spawn, to its end; its owner awaits it once, in
        a task of its TaskGroup. Cancelled (the event loop shutting down), it kills the
        current attempt's process group and reaps it before it ends."""
        if self._driven:
            raise RuntimeError(f"run {self.run_id} is already driven")
        self._driven = True
        try:
            result = await self._attempts()
        except asyncio.CancelledError:
            self._result.cancel()  # its waiters are cancelled too
            raise
        except Exception as exc:
            self._result.set_exception(exc)
            raise
        self._result.set_result(result)
        return result

    def ends_with(self, result: RunResult) -> bool:
        """Whether the attempt that ended with `result` is the run's last: it succeeded or
        was killed, the run is being stopped, or its retries are spent."""
        return (
            result.outcome in (Outcome.SUCCESS, Outcome.KILLED)
            or self._stopping
            or result.attempt > self.spec.retry.attempts
        )

    async def _attempts(self) -> RunResult:
        while True:
            assert self._current is not None
            result = await self._current.finish()
            self._current = None
            if self.ends_with(result):
                return result
            self._attempt = result.attempt + 1
            delay = self.spec.retry.delay_before(self._attempt).total_seconds()
            self.log.warning("job.retrying", attempt=self._attempt, delay_s=delay)
            wait_until = self.clock.now() + timedelta(seconds=delay)
            await sleep_until_woken(self.clock, wait_until, self._wake)  # stop() wakes it
            if self._stopping:
                return result
            self._current = self._start_attempt(self._attempt)

    def _start_attempt(self, number: int, gate: Callable[[], None] | None = None) -> Attempt:
        """Attempt `number`, spawned now; the record hears of it first."""
        self.budget.tail.clear()
        record: Record | None = None
        if self.recorder is not None:
            token = self.recorder.started(self, number)
            record = functools.partial(self.recorder.finished, token, self)
        return Attempt(self, number, record=record, gate=gate)
