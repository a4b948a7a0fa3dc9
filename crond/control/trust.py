"""Whether the commands may talk to what listens on a control socket, before they send
anything (docs/control.md, "Who the commands talk to"); and what they print of its
answers, escaped.

Anyone who can create names in the socket's directory can bind the name before the
daemon does, and would then see every request and write what it likes to the terminal
of whoever asked. So the commands talk only to a listener (the kernel's SO_PEERCRED:
who bound and listens) that is, like the socket file's owner, one of:

- root;
- the user running the command;
- the owner of the directory holding the socket, when that owner alone can write in it
  and root alone can change every directory above it (crond/ownership.py's walk):
  nobody else can have put the socket there (a daemon run as `crond` in its own
  `/var/lib/crond`).

Otherwise the command refuses, with `Untrusted`, as for a daemon it may not ask.
"""

from __future__ import annotations

import os
import pwd
import socket
import struct
from pathlib import Path
from typing import Any

from crond import ownership
from crond.config.wording import escape

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def untrusted(sock: socket.socket, path: Path) -> str | None:
    """None when the listener on `sock` (connected to `path`) may be told things, else
    why not: one line naming the socket, who listens and owns it, and what to do."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    listener = _PEERCRED.unpack(raw)[1]
    try:
        owner = path.stat().st_uid
    except OSError:  # replaced or gone since the connect: whoever listens is not known
        owner = -1
    me = os.geteuid()
    keeper = ownership.keeper(path.parent)
    trusted = {0, me} | ({keeper} if keeper is not None else set())
    if listener in trusted and owner in trusted:
        return None
    who = f"owned by {_name(owner)}" if owner == listener else _both(owner, listener)
    place = escape(str(path.parent))
    if keeper is None:
        mine = f"and {place} is not a directory its owner alone can write"
    else:
        mine = f"nor {_name(keeper)}, who alone can write in {place}"
    return (
        f"control socket {escape(str(path))} is not to be trusted: {who}, not root, not "
        f"you ({_name(me)}), {mine}; nothing was sent to it (fix: if it is not your "
        "daemon's, remove it and restart the daemon; to steer another user's daemon, run "
        "the command as that user)"
    )


def _both(owner: int, listener: int) -> str:
    owned = "gone" if owner < 0 else f"owned by {_name(owner)}"
    return f"{owned} and listened on by {_name(listener)}"


def _name(uid: int) -> str:
    try:
        return f"{escape(pwd.getpwuid(uid).pw_name)} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def shown(value: Any) -> Any:
    """An answer with every text in it (keys too) escaped as crond/config/wording.py
    escapes (controls, bidi marks), tabs kept: a listener, or a job's output, cannot
    write escape sequences to the terminal of whoever asked."""
    if isinstance(value, str):
        return "\t".join(escape(part) for part in value.split("\t"))
    if isinstance(value, dict):
        return {shown(k): shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v) for v in value]
    return value
