"""A daemon's look, before it starts, at its control socket (docs/control.md): a live crond
listening there is another daemon on the same state directory (or `control_socket`), and
this one refuses to start. Otherwise both would run, this one without a socket nobody
could steer it through, and a replica would register itself under a name of its own and
claim slots.

A socket nobody listens on (a daemon killed with `-9` left it) is no refusal: the control
server replaces it. Nor is anything else found there: the server says what is wrong
with it (`control.failed`) and the daemon runs on without a socket.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_PROBE_TIMEOUT = 1.0  # seconds: a live daemon accepts at once (its backlog is 64)


def refusal(path: Path | None) -> tuple[str, int | None] | None:
    """Why this daemon may not start, and the other daemon's pid (None: unknown), when a
    live crond listens on `path` (None: `control_socket: none`); None when none does."""
    if path is None:
        return None
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        probe.settimeout(_PROBE_TIMEOUT)
        probe.connect(str(path))
        pid = _listener_pid(probe)
    except OSError:  # nothing there, nobody listening, or not ours to reach
        return None
    finally:
        probe.close()
    who = "another crond" if pid is None else f"another crond (pid {pid})"
    return (
        f"control socket {path}: {who} is listening on it: stop that one, or give each "
        "daemon its own state directory (--state-dir, daemon.state_dir) or "
        "daemon.control_socket",
        pid,
    )


def _listener_pid(connected: socket.socket) -> int | None:
    """The pid of the process that listens at the other end (the kernel's credentials of
    the listening socket: SO_PEERCRED on the connecting side)."""
    try:
        raw = connected.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except OSError:
        return None
    pid = _PEERCRED.unpack(raw)[0]
    return pid if pid > 0 else None
