"""What /proc says of a process: its state, its parent and its process group.

The one reader of /proc/PID/stat, for the two parts of crond that look at processes it
did not spawn itself: the runner, waiting for what a job left in its process group to
go (process.py), and the PID-1 reaper, looking for zombie orphans (daemon/reaper.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class Stat(NamedTuple):
    """The fields of /proc/PID/stat that crond reads."""

    state: str  # R running, S sleeping, D in the kernel, T stopped, Z zombie, X dead, ...
    ppid: int
    pgrp: int

    @property
    def live(self) -> bool:
        """Neither a zombie (exited, waiting for its parent to reap it) nor dead."""
        return self.state not in ("Z", "X")


def stat(pid: int) -> Stat | None:
    """Process `pid`'s state, parent and group; None when there is no such process (or
    no /proc)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ...": comm is the program's name, which may hold spaces
    # and parentheses of its own, so the fields start after the last ")".
    fields = raw[raw.rfind(b")") + 2 :].split(maxsplit=3)
    try:
        return Stat(fields[0].decode("ascii"), int(fields[1]), int(fields[2]))
    except (IndexError, ValueError):  # not the format above: nothing to go by
        return None


def pids() -> list[int]:
    """The pid of every process (of this pid namespace). Raises OSError without /proc."""
    with os.scandir("/proc") as entries:
        return [int(entry.name) for entry in entries if entry.name.isdigit()]
