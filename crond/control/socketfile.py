"""The control socket's file: made at its path without following anything planted there,
replaced only when it is a dead daemon's, and removed only while it is still the one
made. crond/control/server.py serves on what this makes.

crond runs as root, so the socket is made with care (docs/operations.md, "Security"):

- its directory is reached as crond/ownership.py reaches the state store's (as root,
  every directory on the way is one only root can change, and the directory itself is
  writable by root alone, even if sticky: whoever can create names there could bind the
  name first), held open, and the socket is created, checked and removed relative to
  that descriptor: no link planted on the way or at the path is ever followed;
- at the path, a socket no daemon answers on (a dead one's) is replaced; a live one, or
  anything that is not a socket (a file, a link), is refused with a message that says so;
- it is bound under a umask that makes it no more open than 0660, then made 0660: the
  daemon's user and group may connect, nobody else can.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path

from crond import ownership

__all__ = ["MODE", "SocketRefused", "bind", "open_parent", "unlink_if"]

MODE = 0o660
_UMASK = 0o117  # never more open than 0660, even for the instant after bind()
_UNIX_PATH_MAX = 107  # sun_path, less its terminating NUL


class SocketRefused(Exception):  # noqa: N818  (a verdict to show, like FileRefused)
    """The socket cannot be made at that path; the message says why and what to do."""


def open_parent(path: Path) -> tuple[int, str]:
    """An O_PATH descriptor of the socket's directory (made 0700 when missing; as root,
    a directory only root can change) and the socket's name in it."""
    parent, name = path.parent, path.name
    if not name or name in (".", ".."):
        raise SocketRefused(f"{path}: not a file name for a socket")
    with contextlib.suppress(FileExistsError, FileNotFoundError):
        parent.mkdir(mode=0o700)  # one level, as the state store's own directory
    try:
        directory = ownership.open_directory(parent, alone=True)
    except OSError as exc:
        raise SocketRefused(f"control socket {path}: {exc.strerror or exc}") from None
    if len(_via(directory, name).encode()) > _UNIX_PATH_MAX:
        os.close(directory)
        raise SocketRefused(f"control socket {path}: the name {name!r} is too long for a socket")
    return directory, name


def _via(directory: int, name: str) -> str:
    """A path to `name` in the held directory that does not go through the directory's
    path again (which someone may have changed since it was checked)."""
    return f"/proc/self/fd/{directory}/{name}"


def bind(path: Path, directory: int, name: str) -> tuple[socket.socket, os.stat_result]:
    """The listening socket, bound at `name`, 0660; and its stat, to know it later."""
    _clear(path, directory, name)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        old = os.umask(_UMASK)
        try:
            sock.bind(_via(directory, name))
        finally:
            os.umask(old)
        made = os.stat(name, dir_fd=directory, follow_symlinks=False)
        os.chmod(name, MODE, dir_fd=directory)
        sock.listen(64)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise SocketRefused(f"control socket {path}: {exc.strerror or exc}") from None
    except BaseException:
        sock.close()
        raise
    return sock, made


def _clear(path: Path, directory: int, name: str) -> None:
    """Nothing at `name`, or a dead daemon's socket (removed). Raises SocketRefused."""
    try:
        st = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketRefused(
            f"control socket {path}: there is {_kind(st.st_mode)} at that path, not a socket, "
            "and crond will not replace it (remove it, or set daemon.control_socket)"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        probe.settimeout(1.0)
        probe.connect(_via(directory, name))
    except ConnectionRefusedError:  # nobody listens: a dead daemon's
        os.unlink(name, dir_fd=directory)
        return
    except OSError as exc:
        raise SocketRefused(f"control socket {path}: {exc.strerror or exc}") from None
    finally:
        probe.close()
    raise SocketRefused(
        f"control socket {path}: another crond is listening on it (give each daemon its own "
        "daemon.control_socket or state_dir)"
    )


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "something"


def unlink_if(directory: int, name: str, made: os.stat_result) -> None:
    """Remove the socket at `name` if it is still the one `bind` made."""
    with contextlib.suppress(OSError):
        st = os.stat(name, dir_fd=directory, follow_symlinks=False)
        if (st.st_dev, st.st_ino) == (made.st_dev, made.st_ino):
            os.unlink(name, dir_fd=directory)
