"""One attempt of a run: a child process in its own session, watched, stopped and reaped.

`Attempt` spawns the main process (posix_spawn, or Popen for a workdir or a user), learns
of its exit through a pidfd, stops its process group on timeout or request (SIGTERM and
SIGCONT, SIGKILL `kill_after` later), cleans up what the main process left in its group,
and logs `job.started` and `job.finished`. runner.py strings attempts into runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Final

from crond.config.model import Output
from crond.run.output import Pump, Watch

if TYPE_CHECKING:
    from crond.run.runner import Run

# After SIGKILL a process is gone in microseconds unless stuck in the kernel (D state);
# this long, then the runner stops waiting for its group.
_KILL_WAIT: Final = 5.0
_POLL_EXIT: Final = 0.02  # only without pidfd (Linux < 5.3)
_DEFAULT_SIGNALS: Final = (signal.SIGPIPE, signal.SIGXFSZ)  # ignored by Python
_CRASH_SIGNALS: Final = frozenset(
    {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT,
     signal.SIGSYS, signal.SIGTRAP}
)  # fmt: skip
_OWNED: set[int] = set()  # pids spawned and not yet reaped


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


def which(program: str, env: Mapping[str, str]) -> str | None:
    if "/" in program:  # a path: exec'd as is, relative to the workdir
        return program
    return shutil.which(program, path=env.get("PATH", os.defpath))


def owned_pids() -> frozenset[int]:
    """Pids the runner spawned and has not reaped yet. A PID-1 reaper must leave these
    alone (and must never call waitpid(-1)). Call it from the event loop's thread."""
    return frozenset(_OWNED)


class Attempt:
    """One child process: spawned in __init__, then `finish()` watches, stops and reaps."""

    def __init__(self, run: Run, number: int, gate: Callable[[], None] | None = None) -> None:
        self.run = run
        self.gate = gate  # called just before the spawn (the slot's instant: see Loop._tick)
        self.number = number
        self.loop = asyncio.get_running_loop()
        self.child: int | None = None  # the main process's pid, once spawned
        self.popen: subprocess.Popen[bytes] | None = None  # only on the Popen path
        self.returncode: int | None = None
        self.failure: tuple[str, int] | None = None  # could not start: (message, exit_code)
        self.pumps: list[Pump] = []
        self.exited: asyncio.Future[None] = self.loop.create_future()
        self.pidfd = -1
        self.timers: list[asyncio.TimerHandle] = []
        self.poller: asyncio.TimerHandle | None = None  # only without pidfd
        self.reason: Outcome | None = None  # set when crond stops it: timeout or killed
        self.term_at: float | None = None
        self.kill_at: float | None = None
        self.reaped = self.over = False
        self.reads: list[int] = []  # the output pipes' read ends, until settled into pumps
        self.settled = False
        run.budget.tail.clear()
        self.token = run.recorder.started(run, number) if run.recorder else None
        self._spawn()
        self.started = self.ended = self.loop.time()  # timeout and duration_s: from the spawn
        self.lag_ms = round((run.clock.now() - run.slot).total_seconds() * 1000, 1)
        self.loop.call_soon(self._settle)

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
        run = self.run
        run.log.info(
            "job.started",
            slot=run.slot_text,
            attempt=self.number,
            pid=self.child,
            lag_ms=self.lag_ms,
        )
        if self.child is None:
            return
        for fd, stream in zip(self.reads, ("stdout", "stderr"), strict=False):
            self.pumps.append(Pump(fd, stream, run.budget))
        self.reads = []
        self._watch_exit()
        if run.spec.timeout is not None:
            when = self.started + run.spec.timeout
            self.timers.append(self.loop.call_at(when, self.terminate, Outcome.TIMEOUT))

    @property
    def pid(self) -> int | None:
        return None if self.reaped else self.child

    def _spawn(self) -> None:
        spec = self.run.spec
        executable = spec.executable or which(spec.argv[0], spec.env)
        if spec.error is not None:
            self.failure = (spec.error, 126)
        elif executable is None:
            path = spec.env.get("PATH", os.defpath)
            self.failure = (f"crond: program not found: {spec.argv[0]} (PATH={path})", 127)
        else:
            try:
                self.child = self._start(executable)
            except OSError as exc:
                self.failure = _start_failure(exc, executable, spec.cwd)
                return
            _OWNED.add(self.child)

    def _start(self, executable: str) -> int:
        run, spec = self.run, self.run.spec
        env = dict(spec.env)
        env.update(
            CROND_JOB=spec.job,
            CROND_RUN_ID=run.run_id,
            CROND_SLOT=run.slot_text,
            CROND_ATTEMPT=str(self.number),
        )
        _seal_inherited_fds()
        ours: list[int] = []  # read ends, kept
        theirs: list[int] = []  # write ends, closed here once the child has them
        try:
            if spec.output is Output.LOG:
                for _ in range(2):
                    read_end, write_end = os.pipe()
                    ours.append(read_end)
                    theirs.append(write_end)
                stdio = (_devnull(), *theirs)
            elif spec.output is Output.DISCARD:
                stdio = (_devnull(), _devnull(), _devnull())
            else:  # inherit: the daemon's own stdout and stderr
                stdio = (_devnull(), 1, 2)
            pid = self._exec(executable, env, stdio)
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        self.reads = ours
        return pid

    def _exec(self, executable: str, env: dict[str, str], stdio: tuple[int, ...]) -> int:
        """Spawn the main process in a new session with `stdio` as its fds 0, 1, 2.

        posix_spawn (vfork + exec, all in C) costs half of what Popen does, so it is the
        path of every job without `workdir` or `user`, which it cannot do; those go
        through Popen. Both reset SIGPIPE and SIGXFSZ, which Python ignores, to default.
        Descriptors: see _seal_inherited_fds.
        """
        spec = self.run.spec
        moves = [(os.POSIX_SPAWN_DUP2, fd, to) for to, fd in enumerate(stdio) if fd != to]
        if self.gate is not None:
            self.gate()
        # A source among 0-2 (a daemon started with stdin closed) could be overwritten by
        # an earlier move; Popen sorts that out.
        if spec.cwd is None and spec.uid is None and all(move[1] > 2 for move in moves):
            return os.posix_spawn(
                executable,
                spec.argv,
                env,
                file_actions=moves,
                setsid=True,
                setsigdef=_DEFAULT_SIGNALS,
                setsigmask=(),
            )
        self.popen = subprocess.Popen(
            spec.argv,
            executable=executable,
            stdin=stdio[0],
            stdout=stdio[1],
            stderr=stdio[2],
            cwd=spec.cwd,
            env=env,
            start_new_session=True,
            close_fds=False,
            user=spec.uid,
            group=spec.gid,
            extra_groups=spec.groups,
        )
        return self.popen.pid

    def _watch_exit(self) -> None:
        """Learn of the exit without reaping: the zombie keeps the pgid ours to signal."""
        assert self.child is not None
        try:
            self.pidfd = os.pidfd_open(self.child)
        except OSError:  # a kernel before 5.3: poll instead
            self._poll_exit()
        else:
            Watch.add(self.pidfd, self._on_exit)

    def _on_exit(self) -> None:
        self._close_pidfd()
        if not self.exited.done():
            self.exited.set_result(None)

    def _poll_exit(self) -> None:
        assert self.child is not None
        if self.exited.done():
            return
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        if os.waitid(os.P_PID, self.child, flags) is None:
            self.poller = self.loop.call_later(_POLL_EXIT, self._poll_exit)
        else:
            self.exited.set_result(None)

    def _close_pidfd(self) -> None:
        if self.pidfd >= 0:
            Watch.remove(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = -1

    def terminate(self, reason: Outcome) -> None:
        """TERM (and CONT) to the group now, KILL after kill_after."""
        if self.child is None or self.exited.done() or self.term_at is not None:
            return
        self.reason = reason
        self.term_at = self.loop.time()
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)
        self.timers.append(self.loop.call_later(self.run.spec.kill_after, self.kill))

    def kill(self) -> None:
        """SIGKILL to the group now."""
        if self.child is None or self.over:
            return
        if self.reason is None and not self.exited.done():
            self.reason = Outcome.KILLED
        self.kill_at = self.loop.time()
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        # Safe from pid reuse: before the reap the zombie holds the pgid; after it,
        # this is only called while the group still has members.
        assert self.child is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.child, sig)

    async def finish(self) -> RunResult:
        """Wait for the main process, clear its group, reap, log `job.finished`."""
        self._settle()
        if self.child is None:
            return self._not_started()
        try:
            await self.exited
            self.ended = self.loop.time()
            if self.term_at is None:  # exited by itself: leftovers get TERM now
                self.term_at = self.ended
                self._signal(signal.SIGTERM)
                self._signal(signal.SIGCONT)
            self._reap()
            await self._clear_group(self.child)
            self.over = True
        finally:
            self._release()
        result = self._result(self.returncode)
        self._log_finished(result)
        return result

    def _reap(self) -> None:
        assert self.child is not None
        pid, status = os.waitpid(self.child, os.WNOHANG)
        if pid == 0:  # not exited after all (cancelled): never leave it behind
            self._signal(signal.SIGKILL)
            pid, status = os.waitpid(self.child, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        if self.popen is not None:  # reaped here, not by Popen: tell it
            self.popen.returncode = self.returncode
        self.reaped = True
        _OWNED.discard(self.child)

    async def _clear_group(self, pgid: int) -> None:
        """Wait for the group to empty; SIGKILL what is left kill_after after the TERM."""
        assert self.term_at is not None
        deadline = self.term_at + self.run.spec.kill_after
        pause = 0.001
        while _group_alive(pgid):
            now = self.loop.time()
            if self.kill_at is None and now >= deadline:
                self.kill()
            elif self.kill_at is not None and now >= self.kill_at + _KILL_WAIT:
                return  # stuck in the kernel; nothing more a signal can do
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _release(self) -> None:
        """Always runs: timers off, the child reaped (also when cancelled), pipes drained."""
        for timer in [*self.timers, self.poller]:
            if timer is not None:
                timer.cancel()
        self._close_pidfd()
        if not self.over:  # cancelled (e.g. the loop is shutting down): kill it all now
            if not self.reaped:
                self.kill()
                self._reap()
            elif self.child is not None and _group_alive(self.child):
                self.kill()
        self.over = True
        for pump in list(self.pumps):
            pump.drain()

    def _result(self, code: int | None) -> RunResult:
        if self.reason is not None:
            outcome = self.reason
        elif code == 0:
            outcome = Outcome.SUCCESS
        elif code is not None and code < 0 and -code not in _CRASH_SIGNALS:
            outcome = Outcome.KILLED
        else:
            outcome = Outcome.FAILED
        duration = round(self.ended - self.started, 3)
        return RunResult(outcome, code, duration, self.number)

    def _not_started(self) -> RunResult:
        assert self.failure is not None
        message, code = self.failure
        run = self.run
        run.log.info("job.output", stream="stderr", line=message)
        result = RunResult(Outcome.FAILED, code, 0.0, self.number)
        self._log_finished(result)
        return result

    def _log_finished(self, result: RunResult) -> None:
        run = self.run
        if run.recorder is not None:
            run.recorder.finished(self.token, run, result, list(run.budget.tail))
        log = run.log
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


@functools.cache
def _seal_inherited_fds() -> None:
    """Mark every descriptor the daemon inherited (3 and up) close-on-exec, once.

    Python opens its own descriptors non-inheritable (PEP 446), so after this no job can
    inherit one it should not see, and the runner spawns with `close_fds=False`: with
    `close_fds=True` each spawn closes every open descriptor one by one in the child, and
    a burst of 1,000 runs holds 3,000 of them (two pipes and a pidfd each), which made
    spawning twice as slow as a bare loop.
    """
    try:
        fds = [int(entry.name) for entry in Path("/proc/self/fd").iterdir()]
    except OSError:  # no /proc: fall back to the common range
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own descriptor is gone
                os.set_inheritable(fd, False)


@functools.cache
def _devnull() -> int:
    """/dev/null, opened once and kept for the daemon's lifetime (not per spawn)."""
    return os.open(os.devnull, os.O_RDWR)


def _group_alive(pgid: int) -> bool:
    """Does process group `pgid` have a member that is not a zombie?"""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # members we may not signal: nothing we could do anyway
        return False
    # Zombies count for kill(); orphans wait for init (maybe us, as PID 1) to reap them.
    try:
        with os.scandir("/proc") as entries:
            return any(_is_live_member(entry, pgid) for entry in entries)
    except FileNotFoundError:  # no /proc: trust kill()
        return True


def _is_live_member(entry: os.DirEntry[str], pgid: int) -> bool:
    if not entry.name.isdigit():
        return False
    try:
        stat = Path(entry.path, "stat").read_bytes()
    except OSError:
        return False
    # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
    state, _ppid, pgrp = stat[stat.rfind(b")") + 2 :].split(maxsplit=3)[:3]
    return int(pgrp) == pgid and state not in (b"Z", b"X")
