"""Where the control socket is: for the daemon (to listen) and for the commands that
steer it (`crond ps`, `trigger`, `kill`, `pause`, `resume`), which must find the same
place from the same file and flags. Cheap to import: the commands use it before (and
mostly instead of) loading the file.

`daemon.control_socket` names it; unset, it is `crond.sock` in the state store's
directory as crond/store/locate.py resolves it (`--state-dir`, `daemon.state_dir`, the
default place), and in the default place when the store is off; `none` turns it off.
"""

from __future__ import annotations

from pathlib import Path

from crond.store import locate

SOCKET_NAME = "crond.sock"
_KEYS = frozenset({"control_socket", "state_dir"})


def resolve(
    configured: str | None, state_dir_flag: str | None, state_dir: str | None
) -> Path | None:
    """The socket's path: `configured` (daemon.control_socket) when set, else in the
    state directory (`state_dir_flag`, else `state_dir`, else the default place); None
    when `configured` is `none`."""
    if configured is not None:
        return None if configured.strip().lower() == "none" else Path(configured).expanduser()
    directory = locate.resolve_dir(state_dir_flag, state_dir) or locate.default_dir()
    return directory / SOCKET_NAME


def fallback(path: Path, configured: str | None, flag: str | None, state_dir: str | None) -> Path:
    """For a user other than root with nothing chosen and no socket where `resolve` says,
    the system daemon's (as `crond status` reads its store: a monitoring user in the
    daemon's group need not say so)."""
    if configured is not None or not locate.looks_at_system(flag, state_dir):
        return path
    if locate.present(path):
        return path
    system = locate.SYSTEM_DIR / SOCKET_NAME
    return system if locate.present(system) else path


def not_there(path: Path, configured: str | None, flag: str | None, state_dir: str | None) -> str:
    """Why no daemon answers at `path` (found by `resolve`, then `fallback`), and what to
    try: for `crond: no crond is running for FILE (...)`."""
    why = f"no socket at {path}"
    closed = locate.present(locate.SYSTEM_DIR / SOCKET_NAME) is None
    if configured is None and locate.looks_at_system(flag, state_dir) and closed:
        why += f"; the system daemon's directory {locate.SYSTEM_DIR} is not readable by you"
    if configured is None and flag is None:
        why += "; if it was started with --state-dir, give the same --state-dir, or --socket"
    return why


def hint(raw: bytes) -> tuple[str | None, str | None] | None:
    """`(daemon.control_socket, daemon.state_dir)` from the file's top-level `daemon:`
    block alone, without loading the file; None when that block has a problem (then the
    file is loaded)."""
    found = locate.daemon_hint(raw, _KEYS)
    return None if found is None else (found["control_socket"], found["state_dir"])
