"""The liveness file: proof, rewritten by the scheduling loop itself, that it is alive.

Written atomically (a temporary file in the same directory, then rename), so a reader
never sees half a file. The temporary file has a random name and is created exclusively,
never through a link: in a directory others can write (/tmp), a link planted under a
name crond would use cannot make root write elsewhere; the rename replaces whatever is
at the final name (a planted link included) without following it. `crond health` reads
it and says whether it is fresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from crond import ownership

DEFAULT_PATH = "/run/crond/liveness.json"


def write(path: Path, payload: dict[str, Any]) -> None:
    """Atomically replace `path` with `payload` as JSON. Raises OSError (a directory on
    the way that root may not trust, as root, among others)."""
    data = json.dumps(payload, separators=(",", ":")).encode()
    # Every step is relative to the directory opened once: a directory on the way
    # swapped for a link after this cannot send the file elsewhere.
    parent = ownership.open_directory(path.parent)
    try:
        tmp = _create(path.name, parent)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
            try:
                os.fchmod(fd, 0o644)  # readable by `crond health` whatever the umask
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, path.name, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            raise
    finally:
        os.close(parent)


def _create(name: str, parent: int) -> str:
    """A new empty file with a random name beside `name`, created exclusively, never
    through a link; its name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):  # a name taken (by chance, or planted): draw another
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            os.close(os.open(tmp, flags, 0o644, dir_fd=parent))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(17, "no free temporary name", name)


@dataclass(frozen=True)
class Health:
    ok: bool
    message: str


def stale_after(heartbeat_s: float) -> float:
    """How old the last beat may be before the daemon counts as stale: three heartbeats
    and a second (`crond health`'s default, and /healthz's)."""
    return 3 * heartbeat_s + 1


def check(path: Path, now: datetime, max_age: timedelta | None) -> Health:
    """Fresh when the file exists, parses, and was updated within `max_age`
    (default: three heartbeats as the daemon recorded them, plus one second)."""
    try:
        payload = json.loads(_read_small(path))
        updated = datetime.fromisoformat(str(payload["updated_at"]).replace("Z", "+00:00"))
    except FileNotFoundError:
        return Health(False, f"{path}: no liveness file (is crond running with --liveness-file?)")
    except OSError as exc:
        return Health(False, f"{path}: unreadable liveness file ({exc.strerror or exc})")
    except (ValueError, KeyError, TypeError):  # its text is not shown: it may be anything
        return Health(False, f"{path}: unreadable liveness file (not crond's liveness JSON)")
    if max_age is None:
        beat = payload.get("heartbeat_s")
        seconds = stale_after(beat if isinstance(beat, (int, float)) else 10.0)
        max_age = timedelta(seconds=seconds)
    age = now - updated
    if payload.get("stopped") is True:
        return Health(
            False,
            f"{path}: stopped: the daemon (pid {payload.get('pid')}) stopped cleanly at "
            f"{payload['updated_at']}",
        )
    jobs = payload.get("jobs")
    where = f"pid {payload.get('pid')}, {jobs} job{'' if jobs == 1 else 's'}, "
    where += f"{payload.get('running')} running"
    if age > max_age:
        return Health(
            False,
            f"{path}: stale: updated {age.total_seconds():.1f}s ago "
            f"(max {max_age.total_seconds():g}s); {where}",
        )
    return Health(True, f"{path}: fresh: updated {max(age.total_seconds(), 0):.1f}s ago; {where}")


_MAX_BYTES = 64 * 1024  # a liveness file is a few hundred bytes


def _read_small(path: Path) -> bytes:
    """The file's bytes: a regular file of at most _MAX_BYTES (a FIFO or device in its
    place would block `crond health`, or never end)."""
    # Looked at before it is opened, and never through a link: opening a FIFO or a
    # device has effects of its own (it releases a writer; a watchdog device arms).
    held = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(held)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_BYTES:
            raise ValueError("not a small regular file")
        fd = os.open(f"/proc/self/fd/{held}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(held)
    try:
        return os.read(fd, _MAX_BYTES)
    finally:
        os.close(fd)
