"""Paths that root may trust: the schedules file it reads, the directories it writes.

A daemon running as root runs whatever its schedules file says, so whoever can change
the file can run commands as root; and a file root creates in a directory someone else
can write may be a link that person planted. So, when crond runs as root (docs/
operations.md, "Security"):

- The schedules file is reached one path component at a time, from `/`, each directory
  opened without following links and each link read from the directory that holds it,
  and every directory and link on the way (those a symlink chain passes through too)
  must be one only root can change: owned by root, and not writable by its group (an
  ACL's users among them) nor by others, unless the sticky bit is set (as on /tmp, where only the
  owner of an entry may rename or remove it, and every entry on the way is root's). The
  file is then opened once, without following a link, and that same descriptor is
  checked (a regular file, owned by root, not writable by its group or others) and
  read: nothing can be swapped between the check and the read.
- A directory crond writes into (the state store; the control socket's, whose name
  could be bound first) must be root's and writable by root alone, even if sticky, and
  every directory above it as above: nobody else can plant a link in it.

Whatever the user, the file must be a regular file of at most `MAX_BYTES`: a FIFO or
a device would block or never end. Nothing else is enforced when the daemon is not root:
its jobs can only do what its own user could do anyway.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import shlex
import stat
from collections import deque
from pathlib import Path

MAX_BYTES = 4 * 1024 * 1024  # 10,000 jobs take about 0.6 MB; see docs/configuration.md
_MAX_LINKS = 40  # as the kernel's own limit for one path (ELOOP)
_ROOT_ONLY = "crond runs as root and runs only a file that root alone can change"
_DIR_ONLY = "crond runs as root and writes only where root alone can"
_ANOTHER_DIR = "choose another directory"
_ELSEWHERE = "set daemon.control_socket to a path in a directory only root can write"


class FileRefused(Exception):  # noqa: N818  (a verdict to show, not a failure of crond)
    """The schedules file cannot be read, or may not be trusted: `message` says why and
    how to fix it, without the path (which `str()` adds)."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


def read_schedules_file(path: Path, *, enforce: bool = True, euid: int | None = None) -> bytes:
    """The bytes of the schedules file at `path`, read from one descriptor. With
    `enforce` and a root daemon (`euid`, default `os.geteuid()`), only when root alone
    can change the file and every directory and link on the way to it. Raises
    FileRefused, with the reason and the fix."""
    as_root = enforce and _as_root(euid)
    try:
        if as_root:
            parent, name = _walk(path)
            try:
                fd = _open_file(name, parent)
            finally:
                os.close(parent)
        else:
            fd = _open_file(str(path), None)
        try:
            return _read(path, fd, as_root=as_root)
        finally:
            os.close(fd)
    except _Unsafe as exc:
        fix = exc.fixed("move the file")
        raise FileRefused(path, f"{exc}; {_ROOT_ONLY} (fix: {fix})") from None
    except OSError as exc:
        raise FileRefused(path, _os_message(exc)) from None


def directory_problem(path: Path, *, euid: int | None = None) -> str | None:
    """None when a root daemon may create files in the directory `path` (or the daemon
    is not root), else one line naming the directory, the problem and the fix. A
    directory that is missing (root makes it, mode 0700; the caller checks again after)
    or that a file stands in the way of is for the caller's own open to report; one that
    cannot be walked for another reason is refused."""
    problem = _verdict(path, euid)
    if problem is None or isinstance(problem, str):
        return None if problem is None else f"{path}: {problem}"
    return f"{path}: {problem}; {_DIR_ONLY} (fix: {problem.fixed(_ANOTHER_DIR)})"


def socket_problem(path: Path, *, euid: int | None = None) -> str | None:
    """`directory_problem` for the control socket `path`'s directory (anyone who can
    create names there could bind the name first: docs/control.md)."""
    problem = _verdict(path.parent, euid)
    if problem is None or isinstance(problem, str):
        return None if problem is None else f"{path}: {problem}"
    return f"{path}: {problem}; {_DIR_ONLY} (fix: {problem.socket_fix()})"


def _verdict(path: Path, euid: int | None) -> _Unsafe | str | None:
    if not _as_root(euid):
        return None
    try:
        return _directory_problem(_walked_stat(path), Path(path).absolute())
    except _Unsafe as exc:
        return exc
    except (FileNotFoundError, NotADirectoryError):
        return None  # root makes what is missing (and checks again), or the store says
    except OSError as exc:  # cannot be walked: not to be trusted either
        return _os_message(exc)


def keeper(directory: Path) -> int | None:
    """The owner of `directory` (its uid) when that owner alone can write in it and root
    alone can change every directory and link above it; else None (nor when unseen)."""
    try:
        st = _walked_stat(directory)
    except (_Unsafe, OSError):
        return None
    return st.st_uid if stat.S_ISDIR(st.st_mode) and not st.st_mode & 0o022 else None


def _walked_stat(path: Path) -> os.stat_result:
    fd, name = _walk(path)
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def _directory_problem(st: os.stat_result, where: Path) -> _Unsafe | None:
    if not stat.S_ISDIR(st.st_mode):
        return None
    problem = _owner_problem(st, where, "directory")
    if problem is None and st.st_mode & 0o022:
        problem = _write_problem(st, where)
    return problem


def open_directory(path: Path, *, euid: int | None = None, alone: bool = False) -> int:
    """An O_PATH descriptor of the directory `path`, to create files in relative to it.
    As root (`euid`), reached by the walk above: every directory and link on the way,
    the directory itself included, is one only root can change (a sticky one such as
    /tmp too: names created there are random and exclusive); with `alone` (the control
    socket's: a fixed name), writable by root alone even if sticky. Raises OSError, with
    the reason and the fix for one root may not trust."""
    if not _as_root(euid):
        return os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd, _ = _walk(path, into=True)
    except _Unsafe as exc:
        fix = exc.socket_fix() if alone else exc.fixed(_ANOTHER_DIR)
        raise PermissionError(errno.EPERM, f"{exc}; {_DIR_ONLY} (fix: {fix})") from None
    problem = _directory_problem(os.fstat(fd), Path(path).absolute()) if alone else None
    if problem is not None:
        os.close(fd)
        raise PermissionError(errno.EPERM, f"{problem}; {_DIR_ONLY} (fix: {problem.socket_fix()})")
    return fd


def _as_root(euid: int | None) -> bool:
    """Whether the rules apply: the daemon is root (`euid`, default `os.geteuid()`)."""
    return (os.geteuid() if euid is None else euid) == 0


class _Unsafe(Exception):  # noqa: N818  (an internal verdict)
    """What is wrong and the command that mends it; `elsewhere`: the other way out."""

    def __init__(
        self, message: str, fix: str, *, elsewhere: bool = False, shared: bool = False
    ) -> None:
        super().__init__(message)
        self.fix = fix
        self.elsewhere = elsewhere
        self.shared = shared  # a sticky directory others write in (/tmp): not to close

    def socket_fix(self) -> str:  # a shared /tmp is not to be closed: only go elsewhere
        return _ELSEWHERE if self.shared else self.fixed(_ELSEWHERE)

    def fixed(self, other_way: str) -> str:
        return f"{self.fix}, or {other_way}" if self.elsewhere else self.fix


def _walk(path: Path, *, into: bool = False) -> tuple[int, str]:
    """Follow `path` from `/` to its last component: an O_PATH descriptor of the
    directory that holds it (checked, like every directory and link before it) and its
    name there (never a link: a last link is followed too). Raises _Unsafe, or OSError
    (a missing or unreadable directory on the way)."""
    walk = _Walk(path if path.is_absolute() else Path.cwd() / path, into=into)
    try:
        while walk.pending:
            done = walk.step(walk.pending.popleft())
            if done is not None:
                return walk.fd, done
    except BaseException:
        os.close(walk.fd)
        raise
    return walk.fd, "."


class _Walk:
    """Where a walk is: the directory it holds open (checked), and what is left."""

    def __init__(self, path: Path, *, into: bool = False) -> None:
        self.into = into  # enter the last component too (a directory): it is held
        self.pending = deque(path.parts[1:])
        self.fd = _open_dir("/", None)
        self.at = Path("/")
        self.links = 0
        try:
            _check_dir(os.fstat(self.fd), self.at)
        except BaseException:
            os.close(self.fd)
            raise

    def step(self, name: str) -> str | None:
        """Take one component; the last one's name when it is reached."""
        if name in ("", "."):
            return None
        if name == "..":
            self._enter("..", self.at.parent)
            return None
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            if self.pending or self.into:
                raise
            return name  # the caller's open or stat says it is missing
        if stat.S_ISLNK(st.st_mode):
            self._follow(name, st)
            return None
        if not self.pending and not self.into:
            return name
        self._enter(name, self.at / name)
        return None

    def _follow(self, name: str, st: os.stat_result) -> None:
        self.links += 1
        if self.links > _MAX_LINKS:
            raise OSError(errno.ELOOP, "too many levels of symbolic links")
        _check_link(st, self.at / name)
        target = os.readlink(name, dir_fd=self.fd)
        parts = Path(target).parts
        if target.startswith("/"):
            self._enter("/", Path("/"))
            parts = parts[1:]
        self.pending.extendleft(reversed(parts))

    def _enter(self, name: str, where: Path) -> None:
        """The directory `name` (never through a link) becomes the one held, checked."""
        new = _open_dir(name, self.fd)
        os.close(self.fd)
        self.fd, self.at = new, where
        _check_dir(os.fstat(new), where)


def _open_dir(name: str, dir_fd: int | None) -> int:
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(name, flags, dir_fd=dir_fd)


def _open_file(name: str, dir_fd: int | None) -> int:
    """Open for reading without following a link, and without blocking on a FIFO."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if dir_fd is not None:
        flags |= os.O_NOFOLLOW
    return os.open(name, flags, dir_fd=dir_fd)


def _read(path: Path, fd: int, *, as_root: bool) -> bytes:
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise _NotRegularError
    if as_root:
        where = Path(path).absolute()
        problem = _owner_problem(st, where, "file")
        if problem is None and st.st_mode & 0o022:
            problem = _Unsafe(
                f"writable by {_who(st.st_mode)} (mode {_mode(st.st_mode)})",
                f"chmod go-w {_q(path)}",
            )
        if problem is not None:
            raise problem
    if st.st_size > MAX_BYTES:
        raise _TooLargeError(st.st_size)
    chunks, total = [], 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_BYTES:  # it grew while being read
            raise _TooLargeError(total)
    return b"".join(chunks)


class _NotRegularError(OSError):
    pass


class _TooLargeError(OSError):
    def __init__(self, size: int) -> None:
        super().__init__(27, "too large")
        self.size = size


_OS_MESSAGES: dict[type[OSError], str] = {
    _NotRegularError: "not a regular file (a schedules file is read whole: no FIFO or device)",
    FileNotFoundError: "no such file",
    IsADirectoryError: "is a directory, not a file",
    NotADirectoryError: "a part of the path is not a directory",
    PermissionError: "permission denied",
}


def _os_message(exc: OSError) -> str:
    if isinstance(exc, _TooLargeError):
        return (
            f"too large ({exc.size:,} bytes; crond reads a schedules file of at most "
            f"{MAX_BYTES // (1024 * 1024)} MiB)"
        )
    return _OS_MESSAGES.get(type(exc)) or exc.strerror or str(exc)


def _check_dir(st: os.stat_result, where: Path) -> None:
    problem = _owner_problem(st, where, "directory")
    if problem is None and _writable_by_others(st) and not st.st_mode & stat.S_ISVTX:
        problem = _write_problem(st, where)
    if problem is not None:
        raise problem


def _check_link(st: os.stat_result, where: Path) -> None:
    if st.st_uid != 0:
        raise _Unsafe(
            f"the symbolic link {where} on the way to it is owned by {_owner(st.st_uid)}, "
            "who can point it elsewhere",
            f"chown -h root {_q(where)}, or name the file by its real path",
        )


def _owner_problem(st: os.stat_result, where: Path, kind: str) -> _Unsafe | None:
    if st.st_uid == 0:
        return None
    if kind == "file":
        return _Unsafe(f"owned by {_owner(st.st_uid)}, not root", f"chown root {_q(where)}")
    return _Unsafe(
        f"the directory {where} is owned by {_owner(st.st_uid)}, who can replace what is in it",
        f"chown root {_q(where)}",
        elsewhere=True,
    )


def _writable_by_others(st: os.stat_result) -> bool:
    """Writable by someone other than root: others, or a group, whichever (group root's
    too: with a POSIX ACL the group bits are the ACL's mask, and any user it names may
    write)."""
    return bool(st.st_mode & (stat.S_IWOTH | stat.S_IWGRP))


def _write_problem(st: os.stat_result, where: Path) -> _Unsafe:
    who = "everyone" if st.st_mode & stat.S_IWOTH else f"the group {_group(st.st_gid)}"
    sticky = "" if st.st_mode & stat.S_ISVTX else " without the sticky bit"
    return _Unsafe(
        f"the directory {where} is writable by {who}{sticky} (mode {_mode(st.st_mode)}), "
        "who can replace what is in it",
        f"chmod go-w {_q(where)}",
        elsewhere=True,
        shared=bool(st.st_mode & stat.S_ISVTX and st.st_mode & stat.S_IWOTH),
    )


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group(gid: int) -> str:
    import grp  # noqa: PLC0415  (only for a refusal's message)

    with contextlib.suppress(KeyError):
        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    return f"gid {gid}"


def _who(mode: int) -> str:
    both = mode & stat.S_IWGRP and mode & stat.S_IWOTH
    return "its group and others" if both else "its group" if mode & stat.S_IWGRP else "others"


def _mode(mode: int) -> str:
    return f"{stat.S_IMODE(mode):04o}"


def _q(path: Path | str) -> str:
    return shlex.quote(str(path))
