"""The commands' end of the control socket: send one request, read the replies
(crond/control/protocol.py). Synchronous and small, for the CLI: no asyncio to import
or start for a round trip of a few hundred microseconds.

Every failure to talk to the daemon is one of four exceptions whose message a person
understands: NoDaemon (nothing listens there), Denied (the socket's mode keeps this user
out: who may), Untrusted (who listens may not be crond: nothing is sent, see
crond/control/trust.py), ProtocolError (the daemon broke off, or answered what this
crond cannot read). Whatever an answer says is escaped before anyone prints it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crond.control import protocol, trust

TIMEOUT = 10.0  # seconds for the daemon to answer (each read)
MAX_REPLY_LINE = 1024 * 1024  # bytes: a job's output line is at most 8 KiB; ps of 10,000 runs less


class ClientError(Exception):
    """Talking to the daemon failed; `str()` is the sentence to show."""


class NoDaemon(ClientError):  # noqa: N818  (a state of the world, said as such)
    def __init__(self, path: Path) -> None:
        super().__init__(f"no socket at {path}")
        self.path = path


class Denied(ClientError):  # noqa: N818  (the same)
    """`group`: the group that may steer it too, None when no group could get in (root's,
    or the way to the socket is closed to it)."""

    def __init__(self, path: Path, owner: str, group: str | None) -> None:
        if group is None:
            who = (
                f"only {owner} may steer this crond; to let a group in, see docs/control.md "
                "'Letting operators use it'"
            )
        else:
            who = (
                f"only {owner} and the group {group} may steer this crond (ask to be added "
                f"to group {group})"
            )
        super().__init__(f"permission denied connecting to {path}: {who}")
        self.path = path
        self.owner = owner
        self.group = group


class ProtocolError(ClientError):
    pass


class Untrusted(ClientError):  # noqa: N818  (as NoDaemon)
    """Who listens on the socket may not be told anything (crond/control/trust.py)."""


def request(
    path: Path,
    cmd: str,
    args: dict[str, Any],
    *,
    timeout: float | None = TIMEOUT,
    on_behalf: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Send `cmd` with `args` and yield the replies: the stream lines, then the final one
    (`{"ok": ...}`), after which it ends. `timeout`: for each read (None: wait as long as
    it takes, for `trigger --wait`). `on_behalf`: `web:USER` (crond web's). Raises
    NoDaemon, Denied, ProtocolError."""
    sock = _connect(path, timeout)
    with sock:
        try:
            sock.sendall(protocol.request_line(cmd, args, on_behalf))
        except OSError as exc:
            said = _last_word(sock, path)  # a daemon too busy says so, then hangs up
            if said is None:
                raise ProtocolError(f"the daemon at {path} hung up ({_reason(exc)})") from None
            yield said
            return
        for message in _lines(sock, path):
            yield message
            if "ok" in message:
                return
    raise ProtocolError(f"the daemon at {path} closed the connection without an answer")


def _connect(path: Path, timeout: float | None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
        sock.close()
        raise NoDaemon(path) from None
    except PermissionError:
        sock.close()
        raise _denied(path) from None
    except OSError as exc:
        sock.close()
        raise ProtocolError(f"cannot connect to {path}: {_reason(exc)}") from None
    why = trust.untrusted(sock, path)
    if why is not None:  # before a byte is sent: who listens may not be crond
        sock.close()
        raise Untrusted(why)
    return sock


def _denied(path: Path) -> Denied:
    import grp  # noqa: PLC0415  (only for this message)
    import pwd  # noqa: PLC0415

    try:
        st = path.stat()
    except OSError:  # a directory on the way keeps us out: name that one's
        st = _first_closed(path).stat()
    owner = group = ""
    with contextlib.suppress(KeyError):
        owner = pwd.getpwuid(st.st_uid).pw_name
    with contextlib.suppress(KeyError):
        group = grp.getgrgid(st.st_gid).gr_name
    let_in = _group_reaches(path, st.st_gid)
    who = group or f"gid {st.st_gid}"
    return Denied(path, owner or f"uid {st.st_uid}", who if let_in else None)


def _group_reaches(path: Path, gid: int) -> bool:
    """Whether a member of the group `gid` could connect: not root's group (joining it
    is all but being root), every directory on the way lets the group pass, and the
    socket lets it write. What this user cannot see, behind a closed directory, counts
    as letting it."""
    if gid == 0:
        return False
    for place in (*reversed(path.parents), path):
        try:
            st = place.stat()
        except OSError:
            return True
        mine = st.st_gid == gid
        if place == path:
            bit = stat.S_IWGRP if mine else stat.S_IWOTH
        else:
            bit = stat.S_IXGRP if mine else stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True


def _first_closed(path: Path) -> Path:
    """The first directory on the way to `path` this user cannot pass."""
    for parent in reversed(path.parents):
        if not os.access(parent, os.X_OK):
            return parent
    return path.parent


def _lines(sock: socket.socket, path: Path) -> Iterator[dict[str, Any]]:
    """Each JSON object the daemon sends, until it closes."""
    pending = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise ProtocolError(f"the daemon at {path} did not answer in time") from None
        except OSError as exc:
            raise ProtocolError(f"the daemon at {path} hung up ({_reason(exc)})") from None
        if not chunk:
            if pending.strip():
                yield _decode(pending, path)
            return
        pending += chunk
        *whole, pending = pending.split(b"\n")
        if len(pending) > MAX_REPLY_LINE:
            raise ProtocolError(f"the daemon at {path} sent a line longer than 1 MiB")
        for line in whole:
            if line.strip():
                yield _decode(line, path)


def _last_word(sock: socket.socket, path: Path) -> dict[str, Any] | None:
    """The final answer the daemon sent before it hung up on the request, if any."""
    with contextlib.suppress(ClientError):
        for message in _lines(sock, path):
            if "ok" in message:
                return message
    return None


def _decode(line: bytes, path: Path) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    if not isinstance(message, dict):
        raise ProtocolError(f"the daemon at {path} answered something that is not crond's JSON")
    shown: dict[str, Any] = trust.shown(message)  # the one way an answer comes in
    return shown


def _reason(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()
