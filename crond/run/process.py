"""A job's process as the kernel sees it: spawned in a session of its own, its exit
watched, its process group signalled (TERM and CONT, then KILL), emptied and reaped.

The mechanism only. What an exit means (the outcome), the events, the timeout and the
record of runs are attempt.py's; nothing here logs. Each trick that serves the speed of
spawning is here once, with the bench figure it was measured by (bench/bench_spawn.py;
docs/performance.md tells the story):

- posix_spawn rather than Popen where it can (`_exec`);
- the daemon's inherited descriptors sealed once, so no spawn has to close them
  (`_seal_inherited_fds`), and /dev/null opened once (`_devnull`);
- the exit learnt through a pidfd in the shared epoll (watch.py), set up only by
  `watch_exit()`, which attempt.py calls after the spawn pass (see `Attempt._settle`).

A job's process group: each main process starts a new session, so its pgid is its pid.
Once the main process exits, whatever is left in its group gets SIGTERM (and SIGCONT, so
a stopped one can act on it), and SIGKILL `kill_after` later if still there. A process
that left the group (`setsid`) is not the job's any more and is left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, Literal

from crond.run import procfs
from crond.run.watch import Watch

# After SIGKILL a process is gone in microseconds unless stuck in the kernel (D state);
# this long, then the runner stops waiting for its group.
_KILL_WAIT: Final = 5.0
_POLL_EXIT: Final = 0.02  # only without pidfd (Linux < 5.3)
_DEFAULT_SIGNALS: Final = (signal.SIGPIPE, signal.SIGXFSZ)  # ignored by Python
_OWNED: set[int] = set()  # pids spawned and not yet reaped

# A job's stdout and stderr: two pipes to read, /dev/null, or the daemon's own.
Streams = Literal["pipes", "null", "inherit"]


def owned_pids() -> frozenset[int]:
    """Pids the runner spawned and has not reaped yet. A PID-1 reaper must leave these
    alone (and must never call waitpid(-1)). Call it from the event loop's thread."""
    return frozenset(_OWNED)


class RefusedError(Exception):
    """Raised by a spawn's gate: the process is not to be created (the message says why)."""


def spawn(
    executable: str,
    argv: tuple[str, ...],
    env: Mapping[str, str],
    *,
    streams: Streams,
    kill_after: float,
    cwd: str | None = None,
    uid: int | None = None,
    gid: int | None = None,
    groups: Sequence[int] | None = None,
    gate: Callable[[], None] | None = None,
) -> Process:
    """Start `argv` in a new session, stdin from /dev/null, stdout and stderr as `streams`
    says (with "pipes", their read ends are the Process's `reads`), and return it. `gate`,
    if given, is called just before the process is created, when all else is ready; it
    may raise RefusedError. Raises OSError when it cannot start (the pipes are closed again
    then)."""
    _seal_inherited_fds()
    reads: list[int] = []  # kept: the Process's
    writes: list[int] = []  # the child's ends, closed here once it has them
    try:
        if streams == "pipes":
            for _ in range(2):
                read_end, write_end = os.pipe()
                reads.append(read_end)
                writes.append(write_end)
            stdio = (_devnull(), *writes)
        elif streams == "null":
            stdio = (_devnull(), _devnull(), _devnull())
        else:
            stdio = (_devnull(), 1, 2)
        pid, popen = _exec(
            executable, argv, env, stdio, cwd=cwd, uid=uid, gid=gid, groups=groups, gate=gate
        )
    except BaseException:
        for fd in reads:
            os.close(fd)
        raise
    finally:
        for fd in writes:
            os.close(fd)
    _OWNED.add(pid)
    return Process(pid, popen, reads, kill_after)


def _exec(
    executable: str,
    argv: tuple[str, ...],
    env: Mapping[str, str],
    stdio: tuple[int, ...],
    *,
    cwd: str | None,
    uid: int | None,
    gid: int | None,
    groups: Sequence[int] | None,
    gate: Callable[[], None] | None,
) -> tuple[int, subprocess.Popen[bytes] | None]:
    """Create the process in a new session with `stdio` as its fds 0, 1, 2.

    posix_spawn (vfork + exec, all in C) is the cheaper call: 0.15 ms against Popen's
    0.20 for /bin/true with two pipes (median of 400, 2 vCPUs), the part of
    bench_spawn.py's single spawn and burst that is crond's own. It is the path of every
    job without `workdir` or `user`, which it cannot do; those go through Popen. Both
    reset SIGPIPE and SIGXFSZ, which Python ignores, to default. Descriptors: see
    _seal_inherited_fds.
    """
    moves = [(os.POSIX_SPAWN_DUP2, fd, to) for to, fd in enumerate(stdio) if fd != to]
    # A source among 0-2 (a daemon started with stdin closed) could be overwritten by
    # an earlier move; Popen sorts that out.
    fast = cwd is None and uid is None and all(move[1] > 2 for move in moves)
    if gate is not None:
        gate()  # returns at the slot, not before: see Loop._tick (crond/daemon/loop.py)
    if fast:
        pid = os.posix_spawn(
            executable,
            argv,
            env,
            file_actions=moves,
            setsid=True,
            setsigdef=_DEFAULT_SIGNALS,
            setsigmask=(),
        )
        return pid, None
    popen = subprocess.Popen(
        argv,
        executable=executable,
        stdin=stdio[0],
        stdout=stdio[1],
        stderr=stdio[2],
        cwd=cwd,
        env=env,
        start_new_session=True,
        close_fds=False,
        user=uid,
        group=gid,
        extra_groups=groups,
    )
    return popen.pid, popen


class Process:
    """A spawned main process and its group, until it is reaped and the group is empty.

    `watch_exit()` learns of the exit (a pidfd, else polling) without reaping: until
    `finish()` reaps, the zombie keeps the pgid ours to signal. `terminate()` and
    `kill()` signal the group; `finish()` waits, reaps, clears the group, and always
    releases: cancelled, it kills and reaps whatever is left.
    """

    def __init__(
        self, pid: int, popen: subprocess.Popen[bytes] | None, reads: list[int], kill_after: float
    ) -> None:
        self.event_loop = asyncio.get_running_loop()
        self.pid = pid  # the main process, also the group's id
        self.popen = popen  # only on the Popen path
        self.reads = reads  # the output pipes' read ends, for the caller to take
        self.kill_after = kill_after
        self.exited: asyncio.Future[None] = self.event_loop.create_future()
        self.exited_at: float | None = None  # event loop time the exit was seen
        self.returncode: int | None = None  # the exit status, or -N when ended by signal N
        self.term_at: float | None = None
        self.kill_at: float | None = None
        self.reaped = self.over = False
        self._pidfd = -1
        self._kill_timer: asyncio.TimerHandle | None = None  # the KILL after a TERM
        self._poller: asyncio.TimerHandle | None = None  # only without pidfd

    def watch_exit(self) -> None:
        """From now on, `exited` is set when the main process exits (it is not reaped)."""
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # a kernel before 5.3: poll instead
            self._poll_exit()
        else:
            Watch.add(self._pidfd, self._on_exit)

    def _on_exit(self) -> None:
        self._close_pidfd()
        if not self.exited.done():
            self.exited.set_result(None)

    def _poll_exit(self) -> None:
        if self.exited.done():
            return
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        if os.waitid(os.P_PID, self.pid, flags) is None:
            self._poller = self.event_loop.call_later(_POLL_EXIT, self._poll_exit)
        else:
            self.exited.set_result(None)

    def _close_pidfd(self) -> None:
        if self._pidfd >= 0:
            Watch.remove(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    def terminate(self) -> bool:
        """SIGTERM and SIGCONT to the group now, SIGKILL `kill_after` later. False, and
        nothing sent, once the main process has exited, or after the first call."""
        if self.exited.done() or self.term_at is not None:
            return False
        self.term_at = self.event_loop.time()
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)
        self._kill_timer = self.event_loop.call_later(self.kill_after, self.kill)
        return True

    def kill(self) -> bool:
        """SIGKILL to the group now (nothing once finished). True when the main process
        had not exited yet: this is what ends it."""
        if self.over:
            return False
        self.kill_at = self.event_loop.time()
        self._signal(signal.SIGKILL)
        return not self.exited.done()

    def _signal(self, sig: int) -> None:
        # Safe from pid reuse: before the reap the zombie holds the pgid; after it,
        # this is only called while the group still has members.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    async def finish(self) -> int:
        """Wait for the main process to exit, send what it left in its group SIGTERM,
        reap it, wait for the group to empty; its exit status (-N: ended by signal N)."""
        try:
            await self.exited
            self.exited_at = self.event_loop.time()
            if self.term_at is None:  # exited by itself: leftovers get TERM now
                self.term_at = self.exited_at
                self._signal(signal.SIGTERM)
                self._signal(signal.SIGCONT)
            self._reap()
            await self._clear_group()
            self.over = True
        finally:
            self.release()
        assert self.returncode is not None
        return self.returncode

    def _reap(self) -> None:
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:  # not exited after all (cancelled): never leave it behind
            self._signal(signal.SIGKILL)
            pid, status = os.waitpid(self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        if self.popen is not None:  # reaped here, not by Popen: tell it
            self.popen.returncode = self.returncode
        self.reaped = True
        _OWNED.discard(self.pid)

    async def _clear_group(self) -> None:
        """Wait for the group to empty; SIGKILL what is left kill_after after the TERM."""
        assert self.term_at is not None
        deadline = self.term_at + self.kill_after
        pause = 0.001
        while group_alive(self.pid):
            now = self.event_loop.time()
            if self.kill_at is None and now >= deadline:
                self.kill()
            elif self.kill_at is not None and now >= self.kill_at + _KILL_WAIT:
                return  # stuck in the kernel; nothing more a signal can do
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)

    def release(self) -> None:
        """Timers off, the pidfd closed; unless finished (cancelled: the event loop is
        shutting down), SIGKILL to the group and the main process reaped now."""
        for timer in (self._kill_timer, self._poller):
            if timer is not None:
                timer.cancel()
        self._close_pidfd()
        if not self.over:
            if not self.reaped:
                self.kill()
                self._reap()
            elif group_alive(self.pid):
                self.kill()
        self.over = True


def group_alive(pgid: int) -> bool:
    """Does process group `pgid` have a member that is not a zombie?"""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # members we may not signal: nothing we could do anyway
        return False
    # Zombies count for kill(); orphans wait for init (maybe us, as PID 1) to reap them.
    try:
        pids = procfs.pids()
    except OSError:  # no /proc: trust kill()
        return True
    for pid in pids:
        stat = procfs.stat(pid)
        if stat is not None and stat.pgrp == pgid and stat.live:
            return True
    return False


@functools.cache
def _seal_inherited_fds() -> None:
    """Mark every descriptor the daemon inherited (3 and up) close-on-exec, once.

    Python opens its own descriptors non-inheritable (PEP 446), so after this no job can
    inherit one it should not see, and the runner spawns with `close_fds=False`: with
    `close_fds=True` each spawn closes every open descriptor one by one in the child, and
    a burst of 1,000 runs holds 3,000 of them (two pipes and a pidfd each), which made
    bench_spawn.py's burst twice as slow as its bare loop.
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
