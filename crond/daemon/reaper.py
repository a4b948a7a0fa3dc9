"""Orphan reaping for when crond is PID 1 (a container).

Processes whose parent dies are re-parented to PID 1; if PID 1 never waits for them
they stay zombies forever. On every SIGCHLD this reaps the zombie children that the
runner does not own (the runner reaps its own, and must get their exit status).
Never `waitpid(-1)`: that would steal a job's exit status from the runner.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Collection
from pathlib import Path

from crond.run import procfs


def _children() -> list[int]:
    """Our child pids: from /proc/self/task/*/children, else by scanning /proc for them."""
    pids: list[int] = []
    try:
        for task in Path("/proc/self/task").iterdir():
            pids.extend(int(p) for p in (task / "children").read_text().split())
    except (OSError, ValueError):
        me = os.getpid()
        pids = [pid for pid in procfs.pids() if _parent(pid) == me]
    return pids


def _parent(pid: int) -> int:
    stat = procfs.stat(pid)
    return -1 if stat is None else stat.ppid


def _is_zombie(pid: int) -> bool:
    stat = procfs.stat(pid)
    return stat is not None and stat.state == "Z"


def reap_orphans(owned: Collection[int]) -> int:
    """Reap every zombie child not in `owned`; return how many."""
    reaped = 0
    for pid in _children():
        if pid in owned or not _is_zombie(pid):
            continue
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                reaped += 1
        except ChildProcessError:
            continue
    return reaped


def install(
    event_loop: asyncio.AbstractEventLoop, owned: Callable[[], Collection[int]]
) -> Callable[[], None]:
    """Reap orphans on SIGCHLD from now on; returns the function that stops it."""
    event_loop.add_signal_handler(signal.SIGCHLD, lambda: reap_orphans(owned()))

    def uninstall() -> None:
        event_loop.remove_signal_handler(signal.SIGCHLD)

    return uninstall
