"""The SQLite store's files on disk: the directory's safety check, the daemon's lock, and a
damaged file moved aside; and the host's boot id, which both stores key `@reboot` by.

One daemon a store: it holds an exclusive flock on `crond.lock` (with its pid in it) while
it runs, so a second daemon pointed at the same directory runs without a store instead of
closing the first one's runs as lost. docs/state.md has the rules.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from crond import ownership
from crond.store.base import StateError

DB_NAME = "crond.sqlite3"
LOCK_NAME = "crond.lock"  # flock'ed by the daemon using the store; holds its pid


def check_directory(directory: Path) -> None:
    """As root: the store's directory and those above it are root's alone (nobody else
    can plant a link where crond creates its lock and SQLite files). Raises StateError."""
    problem = ownership.directory_problem(directory)
    if problem is not None:
        raise StateError(problem)


def take_lock(directory: Path) -> int:
    """The directory (made if needed, mode 0700), locked for this process: the lock file's
    descriptor, to be closed to release it. Raises StateError, saying who holds it."""
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        check_directory(directory)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(directory / LOCK_NAME, flags, 0o600)
    except OSError as exc:
        raise StateError(f"{directory}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StateError(
            f"{directory}: in use by another crond (pid {holder}); give each daemon "
            "its own state_dir"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def check_lock_in_place(directory: Path, lock: int) -> None:
    """Raise StateError (corrupt: to be opened afresh) when the directory was removed or
    replaced under the daemon: the lock file held must still be the one there."""
    mine = os.fstat(lock)
    try:
        there = (directory / LOCK_NAME).lstat()
    except OSError:
        there = None
    if there is None or (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
        raise StateError(
            f"{directory}: removed or replaced while the daemon was using it; "
            "the store is made again there (its history is lost)",
            corrupt=True,
        )


def move_aside(path: Path) -> Path:
    """Keep the evidence of a damaged file under another name, with its -wal and -shm:
    the name it now has."""
    aside = path.with_name(f"{path.name}.corrupt-{os.urandom(4).hex()}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            Path(f"{path}{suffix}").rename(f"{aside}{suffix}")
    return aside


def boot_id() -> str | None:
    """The kernel's id of this boot (changes at every boot), for `@reboot` and for telling
    whether a daemon that wrote a store still runs."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None
