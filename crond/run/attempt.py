"""One attempt of a run, the policy: what is spawned, when it is stopped, what its end
means, and the events that say so.

An `Attempt` spawns its run's command through process.py (the first attempt of a run at
the gate the scheduling loop hands it), then, once the wake's spawn pass is over
(`_settle`), logs `job.started`, pumps the output into `job.output` events (output.py),
watches the exit and arms the timeout. Its end is an outcome, handed to the record of
runs, then logged as `job.finished`. runner.py strings attempts into runs.

- Outcomes: exit 0 → success; exit n > 0 → failed; timed out → timeout (whatever the
  exit status); stopped by crond → killed; ended by a signal crond did not send →
  killed, except the signals a program raises on itself when it crashes (SEGV, BUS, FPE,
  ILL, ABRT, SYS, TRAP) → failed. `exit_code` is the exit status, or minus the signal.
- Timeout and `terminate()`: SIGTERM + SIGCONT to the group, SIGKILL to the group
  `kill_after` later if the main process is still there. `kill()`: SIGKILL at once.
- A start that fails before any process exists (a program not on PATH: 127, like a
  shell; a missing workdir, a `user` that does not exist or needs root, a file that
  cannot be executed: 126) logs `job.started` with `pid: null`, one `job.output` line
  on stderr starting with `crond:` (whatever `output` says: the message is crond's, not
  the job's), and `job.finished` failed. A first attempt its gate refuses (a replica
  frozen between its claim and the spawn, crond/daemon/spawning.py) starts nothing: the
  same events with crond's reason, and `job.finished` killed, with no exit code.
- `duration_s` runs from the spawn to the main process's exit.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final, Protocol

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock
from crond.config.model import Output
from crond.run import process
from crond.run.output import Budget, Pump
from crond.run.spec import RunSpec, which

_CRASH_SIGNALS: Final = frozenset(
    {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT,
     signal.SIGSYS, signal.SIGTRAP}
)  # fmt: skip
_STREAMS: Final[dict[Output, process.Streams]] = {
    Output.LOG: "pipes",
    Output.DISCARD: "null",
    Output.INHERIT: "inherit",
}


class Outcome(StrEnum):
    SUCCESS = "success"
    FAILED = "failed"
    TIMEOUT = "timeout"
    KILLED = "killed"


@dataclass(frozen=True)
class RunResult:
    outcome: Outcome
    # The exit status, or -N when ended by signal N; 127/126 when it could not start.
    exit_code: int | None
    duration_s: float
    attempt: int


class RunContext(Protocol):
    """What an attempt reads of its run (runner.Run is one)."""

    spec: RunSpec
    run_id: str
    slot: datetime
    slot_text: str  # the slot, as CROND_SLOT and the events show it
    clock: Clock
    log: FilteringBoundLogger  # bound to the run's job and run_id
    budget: Budget  # the run's output allowance, shared by its attempts


# Told an attempt's result and its last lines of output, before `job.finished` is logged.
Record = Callable[[RunResult, Sequence[str]], None]


class Attempt:
    """One child process of a run: spawned in __init__; `finish()` waits for its end and
    returns the result. `terminate()` and `kill()` stop it early, and say why."""

    def __init__(
        self,
        run: RunContext,
        number: int,
        *,
        record: Record | None = None,
        gate: Callable[[], None] | None = None,
    ) -> None:
        self.run = run
        self.number = number
        self.record = record
        self.event_loop = asyncio.get_running_loop()
        self.process: process.Process | None = None  # None: it could not start
        # Could not start: (message, exit_code); not to be started (the gate refused): no code.
        self.failure: tuple[str, int | None] | None = None
        self.reason: Outcome | None = None  # set when crond stops it: timeout or killed
        self.pumps: list[Pump] = []
        self.timeout: asyncio.TimerHandle | None = None
        self.settled = False
        self._spawn(gate)
        self.started = self.event_loop.time()  # timeout and duration_s: from the spawn
        self.lag_ms = round((run.clock.now() - run.slot).total_seconds() * 1000, 1)
        self.event_loop.call_soon(self._settle)

    @property
    def pid(self) -> int | None:
        """The main process, until it is reaped."""
        proc = self.process
        return None if proc is None or proc.reaped else proc.pid

    def _spawn(self, gate: Callable[[], None] | None) -> None:
        run, spec = self.run, self.run.spec
        executable = spec.executable or which(spec.argv[0], spec.env)
        if spec.error is not None:
            self.failure = (spec.error, 126)
            return
        if executable is None:
            path = spec.env.get("PATH", os.defpath)
            self.failure = (f"crond: program not found: {spec.argv[0]} (PATH={path})", 127)
            return
        env = dict(spec.env)
        env.update(
            CROND_JOB=spec.job,
            CROND_RUN_ID=run.run_id,
            CROND_SLOT=run.slot_text,
            CROND_ATTEMPT=str(self.number),
        )
        try:
            self.process = process.spawn(
                executable,
                spec.argv,
                env,
                streams=_STREAMS[spec.output],
                kill_after=spec.kill_after,
                cwd=spec.cwd,
                uid=spec.uid,
                gid=spec.gid,
                groups=spec.groups,
                gate=gate,
            )
        except OSError as exc:
            self.failure = _start_failure(exc, executable, spec.cwd)
        except ValueError as exc:  # a NUL or an `=` the OS cannot take: this run fails
            self.failure = (f"crond: cannot start {executable}: {exc}", 126)
        except process.RefusedError as exc:  # crond's own decision: stopped before it began
            self.failure = (str(exc), None)
            self.reason = Outcome.KILLED

    def _settle(self) -> None:
        """Everything of an attempt but the spawn: log `job.started`, then watch the
        pipes, the exit and the timeout. Called soon after the spawn, and by `finish()`
        (whichever comes first does it).

        Deferred because the loop spawns every job due at one wake in one synchronous
        pass, and each spawn waits for the CPU with the children already started: done
        in that pass, this work (a third of the pass's CPU: bench_spawn.py, 200 runs,
        118 → 82 ms) delayed every later job of the wake, and its pidfd was one more
        descriptor for each later spawn to copy. Until it is done a job's output waits in
        its pipe and its exit in its zombie (nothing else reaps it); `lag_ms` and the
        timeout still count from the spawn.
        """
        if self.settled:
            return
        self.settled = True
        run, proc = self.run, self.process
        run.log.info(
            "job.started",
            slot=run.slot_text,
            attempt=self.number,
            pid=None if proc is None else proc.pid,
            lag_ms=self.lag_ms,
        )
        if proc is None:
            return
        for fd, stream in zip(proc.reads, ("stdout", "stderr"), strict=False):
            self.pumps.append(Pump(fd, stream, run.budget))
        proc.reads = []  # the pumps' now
        proc.watch_exit()
        if run.spec.timeout is not None:
            when = self.started + run.spec.timeout
            self.timeout = self.event_loop.call_at(when, self.terminate, Outcome.TIMEOUT)

    def terminate(self, reason: Outcome) -> None:
        """TERM (and CONT) to the group now, KILL after kill_after; the outcome will be
        `reason`, unless the main process had exited already."""
        if self.process is not None and self.process.terminate():
            self.reason = reason

    def kill(self) -> None:
        """SIGKILL to the group now."""
        if self.process is not None and self.process.kill() and self.reason is None:
            self.reason = Outcome.KILLED

    async def finish(self) -> RunResult:
        """Wait for the end (the main process reaped, its group empty, its output read),
        hand the result to the record, log `job.finished`. Cancelled, the process group
        is killed and the main process reaped before this returns."""
        self._settle()
        proc = self.process
        if proc is None:
            return self._not_started()
        try:
            code = await proc.finish()
        finally:
            if self.timeout is not None:
                self.timeout.cancel()
            for pump in list(self.pumps):
                pump.drain()
        assert proc.exited_at is not None
        result = self._result(code, proc.exited_at - self.started)
        self._finished(result)
        return result

    def _result(self, code: int, duration: float) -> RunResult:
        if self.reason is not None:
            outcome = self.reason
        elif code == 0:
            outcome = Outcome.SUCCESS
        elif code < 0 and -code not in _CRASH_SIGNALS:
            outcome = Outcome.KILLED
        else:
            outcome = Outcome.FAILED
        return RunResult(outcome, code, round(duration, 3), self.number)

    def _not_started(self) -> RunResult:
        assert self.failure is not None
        message, code = self.failure
        self.run.log.info("job.output", stream="stderr", line=message)
        result = RunResult(self.reason or Outcome.FAILED, code, 0.0, self.number)
        self._finished(result)
        return result

    def _finished(self, result: RunResult) -> None:
        if self.record is not None:
            self.record(result, list(self.run.budget.tail))
        log = self.run.log
        emit = {
            Outcome.SUCCESS: log.info,
            Outcome.FAILED: log.error,
            Outcome.TIMEOUT: log.error,
            Outcome.KILLED: log.warning,
        }[result.outcome]
        emit(
            "job.finished",
            attempt=result.attempt,
            outcome=result.outcome.value,
            exit_code=result.exit_code,
            duration_s=result.duration_s,
        )


def _start_failure(exc: OSError, executable: str, cwd: str | None) -> tuple[str, int]:
    if cwd is not None and exc.filename == cwd:
        return f"crond: cannot enter workdir {cwd}: {exc.strerror}", 126
    if isinstance(exc, FileNotFoundError):
        return f"crond: program not found: {executable}", 127
    return f"crond: cannot start {executable}: {exc.strerror or exc}", 126
