"""One run of a job: spawn, process group, output, timeout, TERM → KILL, always reap.

`spec_for` does once per config load what can be done once (argv, environment, PATH
lookup, user lookup); `start_run` spawns attempt 1 synchronously and returns a `Run`,
whose own task watches the child, stops it on timeout, reaps it and runs the retries.

How a run behaves (the choices, for the docs):

- Each attempt is a new session, so its process group id is its pid. stdin is /dev/null;
  a job gets no descriptor but 0, 1 and 2; SIGPIPE and SIGXFSZ are back to default.
- The environment is the daemon's, then `user`'s HOME/USER/LOGNAME, then the job's `env`,
  then CROND_JOB, CROND_RUN_ID, CROND_SLOT, CROND_ATTEMPT. A program without a `/` is
  looked up on that PATH once per config load (again at each spawn while not found); a
  relative path with a `/` is relative to the workdir.
- `python:` jobs: see bootstrap.py (workdir on sys.path, exit 0 / 1 / SystemExit's code).
- An attempt is over when its main process exits. Whatever is left in its group then gets
  SIGTERM (and SIGCONT), and SIGKILL `kill_after` later if still there, before
  `job.finished` is logged; nothing of an attempt outlives it, and no pipe held open by
  a leftover can hold the runner. A process that left the group (`setsid`) is not ours.
- Timeout and `stop()`: SIGTERM + SIGCONT to the group, SIGKILL to the group `kill_after`
  later if the main process is still there. `kill()`: SIGKILL to the group at once.
- Outcomes: exit 0 → success; exit n > 0 → failed; timed out → timeout (whatever the exit
  status); stopped → killed; ended by a signal crond did not send → killed, except the
  signals a program raises on itself when it crashes (SEGV, BUS, FPE, ILL, ABRT, SYS,
  TRAP) → failed. `exit_code` is the exit status, or minus the signal number.
- Starting can fail before any process exists: a program not on PATH (exit_code 127,
  like a shell), a missing workdir, a `user` that does not exist or needs root, a file that
  cannot be executed (126). The attempt then logs `job.started` with `pid: null`, one
  `job.settings.output` line on stderr starting with `crond:` (whatever `output` says: it is
  crond's message, not the job's), and `job.finished` failed. Retries apply.
- Retries: after failed or timeout, up to `retry.attempts` more attempts, same `run_id`,
  waiting `retry.delay_before(n)` on the monotonic clock. `stop()`/`kill()` during that
  wait ends the run with the last attempt's result; no attempt is started.
- `duration_s` runs from spawn to the main process's exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import pwd
import secrets
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Protocol

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc
from crond.config.loaded import LoadedJob
from crond.config.model import Output, Retry
from crond.run.bootstrap import BOOTSTRAP
from crond.run.child import Attempt, Outcome, RunResult, owned_pids, which
from crond.run.output import Budget

__all__ = [
    "Outcome",
    "Run",
    "RunResult",
    "RunSpec",
    "iso_utc",
    "new_run_id",
    "owned_pids",
    "spec_for",
    "start_run",
]

_LIVE: set[Run] = set()  # strong references: the loop holds tasks only weakly


@dataclass(frozen=True)
class RunSpec:
    """Everything about running a job that is computed once per config load."""

    job: str
    argv: tuple[str, ...]
    env: Mapping[str, str]  # the daemon's environment + the job's env, no CROND_* yet
    cwd: str | None = None
    timeout: float | None = None
    kill_after: float = 10.0
    output: Output = Output.LOG
    retry: Retry = field(default_factory=Retry)
    user: str | None = None
    uid: int | None = None  # set only when the daemon must switch to `user`
    gid: int | None = None
    groups: tuple[int, ...] | None = None
    home: str | None = None
    executable: str | None = None  # argv[0] found on PATH; None: look again at each spawn
    error: str | None = None  # known before spawning: each attempt fails with it (126)


# What a `user:` job keeps of the daemon's environment, and the PATH it gets (cron's).
_KEPT_FOR_USER: Final = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ")
_USER_PATH: Final = "/usr/local/bin:/usr/bin:/bin"


def spec_for(job: LoadedJob, base_env: Mapping[str, str] | None = None) -> RunSpec:
    """The RunSpec of `job`; never raises for a problem of the host (see `error`)."""
    env = dict(os.environ if base_env is None else base_env)
    uid = gid = home = error = None
    groups: tuple[int, ...] | None = None
    if job.settings.user is not None:
        account, error = _account(job.settings.user)
        if account is not None:
            home = account.pw_dir
            # Another user's job starts from a clean environment, as login and cron give
            # it: the daemon's variables (secrets included) are not handed across.
            env = {k: env[k] for k in _KEPT_FOR_USER if k in env}
            env.update(
                PATH=_USER_PATH,
                HOME=home,
                USER=account.pw_name,
                LOGNAME=account.pw_name,
                SHELL=account.pw_shell or "/bin/sh",
            )
            if os.geteuid() == 0:
                uid, gid = account.pw_uid, account.pw_gid
                groups = tuple(os.getgrouplist(account.pw_name, account.pw_gid))
    env.update(job.settings.env)
    argv = _argv(job)
    return RunSpec(
        job=job.name,
        argv=argv,
        env=env,
        cwd=job.settings.workdir,
        timeout=None if job.settings.timeout is None else job.settings.timeout.total_seconds(),
        kill_after=job.settings.kill_after.total_seconds(),
        output=job.settings.output,
        retry=job.settings.retry,
        user=job.settings.user,
        uid=uid,
        gid=gid,
        groups=groups,
        home=home,
        executable=which(argv[0], env),
        error=error,
    )


def _argv(job: LoadedJob) -> tuple[str, ...]:
    if isinstance(job.settings.command, str):
        return ("/bin/sh", "-c", job.settings.command)
    if job.settings.command is not None:
        return tuple(job.settings.command)
    settings = job.settings
    assert settings.python is not None  # config guarantees command or python
    args, kwargs = json.dumps(settings.args or []), json.dumps(settings.kwargs or {})
    return (settings.interpreter or sys.executable, "-c", BOOTSTRAP, settings.python, args, kwargs)


def _account(user: str) -> tuple[pwd.struct_passwd | None, str | None]:
    try:
        account = pwd.getpwnam(user)
    except KeyError:
        return None, f"crond: cannot run as user {user!r}: no such user on this host"
    if os.geteuid() not in (0, account.pw_uid):
        me = pwd.getpwuid(os.geteuid()).pw_name
        return None, (
            f"crond: cannot run as user {user!r}: the daemon runs as {me!r}, and only "
            "root can switch users (run crond as root, or remove `user`)"
        )
    return account, None


def new_run_id(now: datetime | None = None) -> str:
    """16 characters of lowercase Crockford base32: milliseconds since the epoch (45 bits),
    so ids sort by start time, then 35 random bits. Without `now`, all 80 bits are random."""
    stamp = int(now.timestamp() * 1000) if now is not None else secrets.randbits(45)
    stamp &= (1 << 45) - 1  # good until the year 3084
    raw = (stamp << 35) | secrets.randbits(35)
    # The 80 bits 5 at a time, most significant first: base64.b32encode's output without
    # its pure-Python encoder (7.2 → 4.7 µs an id; it is made before the spawn).
    return "".join([_CROCKFORD[(raw >> shift) & 31] for shift in _SHIFTS])


# RFC 4648's base32 alphabet does not sort like the values it stands for; Crockford's does.
_CROCKFORD: Final = "0123456789abcdefghjkmnpqrstvwxyz"
_SHIFTS: Final = tuple(range(75, -1, -5))
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
    run_id: str | None = None,
    clock: Clock,
    log: FilteringBoundLogger,
    recorder: Recorder | None = None,
    gate: Callable[[], None] | None = None,
) -> Run:
    """Spawn attempt 1 of a run now (synchronously) and return the Run supervising it.
    `gate`, if given, is called just before the spawn (everything else is ready then)."""
    rid = run_id or new_run_id(clock.now())
    return Run(spec, slot, rid, clock, log, recorder=recorder, gate=gate)


class Run:
    """One run of a job for one slot: all its attempts (retries keep run_id, attempt
    counts 1, 2, ...). Made by `start_run`; the Run's own task does the rest."""

    def __init__(
        self,
        spec: RunSpec,
        slot: datetime,
        run_id: str,
        clock: Clock,
        log: FilteringBoundLogger,
        *,
        recorder: Recorder | None = None,
        gate: Callable[[], None] | None = None,
    ) -> None:
        if slot.tzinfo is None:
            raise ValueError("slot must be an aware datetime")
        self.spec = spec
        self.job = spec.job
        self.run_id = run_id
        self.slot = slot
        self.clock = clock
        # Every event of a run carries job and run_id. Binding also turns a lazy proxy
        # (structlog.get_logger()) into a real logger once per run, not once per event.
        self.log = log.bind(job=spec.job, run_id=run_id)
        self.slot_text = _slot_text(slot)
        self.budget = Budget(self.log)
        self.recorder = recorder
        self._stopping = False
        self._wake = asyncio.Event()
        self._current: Attempt | None = Attempt(self, 1, gate)
        self._attempt = 1
        name = f"crond-run-{spec.job}-{run_id}"
        self._task = asyncio.get_running_loop().create_task(self._drive(), name=name)
        _LIVE.add(self)

    @property
    def attempt(self) -> int:
        return self._attempt

    @property
    def pid(self) -> int | None:
        """The current attempt's main process, while it is not reaped."""
        return None if self._current is None else self._current.pid

    def done(self) -> bool:
        return self._task.done()

    async def wait(self) -> RunResult:
        """The final attempt's result. Cancelling the caller does not cancel the run."""
        return await asyncio.shield(self._task)

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

    async def _drive(self) -> RunResult:
        try:
            while True:
                assert self._current is not None
                result = await self._current.finish()
                self._current = None
                if (
                    result.outcome in (Outcome.SUCCESS, Outcome.KILLED)
                    or self._stopping
                    or result.attempt > self.spec.retry.attempts
                ):
                    return result
                self._attempt = result.attempt + 1
                delay = self.spec.retry.delay_before(self._attempt).total_seconds()
                self.log.warning("job.retrying", attempt=self._attempt, delay_s=delay)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                if self._stopping:
                    return result
                self._current = Attempt(self, self._attempt)
        finally:
            _LIVE.discard(self)
