"""The ownership rule for a schedules file run by root, as cron and sudo apply it.

A daemon running as root runs whatever its schedules file says, so whoever can change
the file can run commands as root. When crond runs as root it refuses a file that:

- is not owned by root (the daemon's own user);
- is writable by its group or by others (`mode & 0o022`);
- sits in a directory, at any level up to `/`, that is owned by another user, or that
  everyone may write to without the sticky bit: whoever can write a directory can
  replace the file in it, whatever the file's own mode, and can do so between this
  check and the read. (In a sticky directory such as /tmp, only the owner of a file may
  rename or remove it, and the file is root's.)

A group-writable directory is accepted: write access for a group is a deliberate grant,
and that group is then trusted with everything in the directory. The file itself must
not be group-writable, as cron and sudo require. A file that cannot be found is not
this module's business: loading it reports that. Nothing is enforced when the daemon is
not root: its jobs can only do what its own user could do anyway.
"""

from __future__ import annotations

import os
import pwd
import shlex
import stat
from pathlib import Path


def check_schedules_file(path: Path, *, euid: int | None = None) -> str | None:
    """None when `path` is safe for a root daemon to run (or the daemon is not root: `euid`,
    default `os.geteuid()`), else one line naming the file, the problem and the fix."""
    if (os.geteuid() if euid is None else euid) != 0:
        return None
    try:
        st = path.stat()
    except OSError:
        return None  # missing or unreadable: config.load says so, with the usual message
    if st.st_uid != 0:
        return _refuse(path, f"owned by {_owner(st.st_uid)}, not root", f"chown root {_q(path)}")
    if st.st_mode & 0o022:
        return _refuse(
            path,
            f"writable by {_who(st.st_mode)} (mode {_mode(st.st_mode)})",
            f"chmod go-w {_q(path)}",
        )
    for directory in _directories(path):
        problem = _directory_problem(path, directory)
        if problem:
            return problem
    return None


def _directory_problem(path: Path, directory: Path) -> str | None:
    try:
        st = directory.stat()
    except OSError:
        return None
    if st.st_uid != 0:
        return _refuse(
            path,
            f"the directory {directory} is owned by {_owner(st.st_uid)}, who can replace the file",
            f"chown root {_q(directory)}, or move the file",
        )
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return _refuse(
            path,
            f"the directory {directory} is writable by everyone without the sticky bit "
            f"(mode {_mode(st.st_mode)}), so anyone can replace the file",
            f"chmod o-w {_q(directory)}, or move the file",
        )
    return None


def _refuse(path: Path, problem: str, fix: str) -> str:
    return (
        f"{path}: {problem}; crond runs as root and runs only a file that root alone "
        f"can change (fix: {fix})"
    )


def _directories(path: Path) -> list[Path]:
    """Every directory up to `/` above the path as given and above the file it resolves
    to (a symlink's target may live elsewhere), nearest first, each once."""
    seen: dict[Path, None] = {}
    for start in (path.absolute(), path.resolve()):
        for parent in start.parents:
            seen.setdefault(parent)
    return list(seen)


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _who(mode: int) -> str:
    both = mode & stat.S_IWGRP and mode & stat.S_IWOTH
    return "its group and others" if both else "its group" if mode & stat.S_IWGRP else "others"


def _mode(mode: int) -> str:
    return f"{stat.S_IMODE(mode):04o}"


def _q(path: Path) -> str:
    return shlex.quote(str(path))
