"""A command notifier: a program run with the body on its stdin (docs/alerting.md).

A string runs through `sh -c`, a list as it is. The program gets crond's environment
plus CROND_EVENT, CROND_JOB, CROND_RUN_ID, CROND_OUTCOME, CROND_EXIT_CODE and
CROND_TEXT; its output is discarded (it may echo a secret, so it is never logged). It
starts a session of its own, so that its whole process group can be killed: at the
deadline everything in it gets SIGKILL, and whatever it left behind when it ended too.
Exit 0 is delivered; anything else is worth another try.

`run_child` also runs an Apprise send's process (via_apprise.py), its stdout read to a
cap. Their pids are the daemon's while they run: `owned_pids()` tells the PID-1 reaper
(crond/daemon/reaper.py) to leave them to asyncio, which waits for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Final

from crond.notify.errors import SendError

_REAP_WAIT: Final = 5.0  # after SIGKILL; longer only for a process stuck in the kernel
_OWNED: set[int] = set()  # notifier commands started and not reaped yet
_REAPERS: set[asyncio.Task[None]] = set()  # waits for commands whose try was cancelled


def owned_pids() -> set[int]:
    """Pids of notifier commands still running (call it from the event loop's thread)."""
    return set(_OWNED)


def argv_of(target: str | tuple[str, ...]) -> tuple[str, ...]:
    return ("/bin/sh", "-c", target) if isinstance(target, str) else tuple(target)


# crond's own database settings are not a notifier's (docs/replicas.md).
_NOT_PASSED = frozenset({"CROND_DATABASE_URL", "CROND_REPLICA"})
# The variables the file takes by `${NAME}` (notifiers, headers, pings, the database):
# substituted where the file uses them, so no command needs them from its environment
# (one notifier's token is not another's); set at each load (crond/daemon/telling.py).
_withheld: frozenset[str] = frozenset()


def withhold(names: frozenset[str]) -> None:
    """Pass none of `names` to a notifier's process from now on."""
    global _withheld  # noqa: PLW0603  (the process's own environment is global too)
    _withheld = names


def notifier_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _NOT_PASSED and k not in _withheld}


async def run_command(
    target: str | tuple[str, ...], stdin: bytes, extra_env: Mapping[str, str], timeout: float
) -> None:
    """Run the notifier's command once; return on exit 0, else raise SendError. Its
    process group is killed at `timeout`, and after it ended (leftovers)."""
    try:
        code, _ = await run_child(
            argv_of(target), stdin, {**notifier_environ(), **extra_env}, timeout
        )
    except TimeoutError:
        raise SendError(f"timed out after {timeout:g}s") from None
    if code != 0:
        raise SendError(exit_text(code))


def exit_text(code: int) -> str:
    return f"exit {code}" if code > 0 else f"signal {-code}"


async def run_child(
    argv: Sequence[str],
    stdin: bytes,
    env: Mapping[str, str],
    timeout: float,
    *,
    out_cap: int = 0,
    cwd: str | None = None,
) -> tuple[int, bytes]:
    """Run `argv` once in a session of its own, `stdin` fed to it: (its exit status, at
    most `out_cap` + 1 bytes of its stdout; none read when `out_cap` is 0). Past
    `out_cap` bytes nothing more is read: the group is killed. TimeoutError at
    `timeout`; its group is killed then, and after it ended (leftovers). Raises
    SendError when it cannot start."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if out_cap else subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=dict(env),
            cwd=cwd,
        )
    except (OSError, ValueError) as exc:  # not found, not executable, a NUL in an argument
        raise SendError(f"cannot start: {type(exc).__name__}") from None
    _OWNED.add(proc.pid)
    try:
        async with asyncio.timeout(timeout):
            await _feed(proc, stdin)
            out = await _read_capped(proc, out_cap)
            code = await proc.wait()
    except TimeoutError:
        _kill_group(proc.pid)
        with contextlib.suppress(TimeoutError):  # SIGKILL: gone in microseconds
            async with asyncio.timeout(_REAP_WAIT):
                await proc.wait()
        raise
    finally:
        _kill_group(proc.pid)  # leftovers (or everything, when cancelled)
        _release(proc)
    return code, out


async def _read_capped(proc: asyncio.subprocess.Process, cap: int) -> bytes:
    """Its stdout to EOF, or its first `cap` + 1 bytes (then the group is killed)."""
    if not cap:
        return b""
    assert proc.stdout is not None
    out = bytearray()
    while len(out) <= cap:
        chunk = await proc.stdout.read(cap + 1 - len(out))
        if not chunk:
            break
        out += chunk
    if len(out) > cap:
        _kill_group(proc.pid)
    return bytes(out)


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    """The body on stdin, then EOF; a program that does not read it is not an error."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
    proc.stdin.close()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _release(proc: asyncio.subprocess.Process) -> None:
    """The pid is no longer owned once reaped; when the try was cancelled before that,
    a task waits for it (it was just sent SIGKILL: microseconds)."""
    if proc.returncode is not None:
        _OWNED.discard(proc.pid)
        return

    async def reap() -> None:
        try:
            await proc.wait()
        finally:
            _OWNED.discard(proc.pid)

    task = asyncio.get_running_loop().create_task(reap())
    _REAPERS.add(task)
    task.add_done_callback(_REAPERS.discard)
