"""Who is on the other end of a control connection: the credentials the kernel took at
connect (SO_PEERCRED), the user's name (looked up in a thread of its own, bounded, and
remembered a minute) and the caller's supplementary groups (/proc/PID/status), for the
server's check of who may steer (crond/control/server.py) and the events that say who
did what.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import pwd
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Caller", "caller_of", "groups"]

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_MAX_STATUS = 64 * 1024  # bytes of /proc/PID/status read: it is about 1.5 KB


@dataclass(frozen=True)
class Caller:
    """Who is on the other end (SO_PEERCRED, taken at connect)."""

    uid: int
    gid: int
    pid: int
    user: str | None  # from pwd; None when the uid has no name
    on_behalf: str | None = None  # `crond web`'s user it acts for (protocol's "for")

    def by(self) -> dict[str, object]:
        """For the events that say who did what: for a dashboard's user, `user` is
        `web:NAME` and `via` the dashboard's own user (uid and pid stay its own)."""
        if self.on_behalf is not None:
            return {"uid": self.uid, "user": self.on_behalf, "pid": self.pid, "via": self.user}
        return {"uid": self.uid, "user": self.user, "pid": self.pid}


async def caller_of(writer: asyncio.StreamWriter) -> Caller:
    sock = writer.get_extra_info("socket")
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    pid, uid, gid = _PEERCRED.unpack(raw)
    return Caller(uid=uid, gid=gid, pid=pid, user=await _user_name_of(uid))


# NSS may ask a network service (LDAP, sssd) that hangs: user names are looked up in a
# thread of their own (never the default executor, which a reload's read of the file
# needs), for 2 s at most, and remembered a minute.
_NAMES: concurrent.futures.ThreadPoolExecutor | None = None
_NAMES_SEEN: dict[int, tuple[float, str | None]] = {}
_NAME_TTL_S = 60.0


async def _user_name_of(uid: int) -> str | None:
    global _NAMES  # noqa: PLW0603  (one lookup thread for the process, made when first needed)
    now = time.monotonic()
    seen = _NAMES_SEEN.get(uid)
    if seen is not None and now - seen[0] < _NAME_TTL_S:
        return seen[1]
    if _NAMES is None:
        _NAMES = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="crond-nss")
    try:
        looked_up = asyncio.get_running_loop().run_in_executor(_NAMES, _user_name, uid)
        user = await asyncio.wait_for(looked_up, 2.0)
    except TimeoutError:
        return None  # not remembered: the next caller tries again
    if len(_NAMES_SEEN) >= 256:
        _NAMES_SEEN.clear()
    _NAMES_SEEN[uid] = (now, user)
    return user


def _user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def groups(pid: int) -> frozenset[int]:
    """The supplementary groups of process `pid` (none when it cannot be read: gone)."""
    try:
        with Path(f"/proc/{pid}/status").open("rb") as f:
            text = f.read(_MAX_STATUS)
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(b"Groups:"):
            return frozenset(int(g) for g in line[7:].split() if g.isdigit())
    return frozenset()
