"""The liveness file: proof, rewritten by the scheduling loop itself, that it is alive.

Written atomically (a temporary file in the same directory, then rename), so a reader
never sees half a file. `crond health` reads it and says whether it is fresh.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

DEFAULT_PATH = "/run/crond/liveness.json"


def write(path: Path, payload: dict[str, Any]) -> None:
    """Atomically replace `path` with `payload` as JSON. Raises OSError."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = json.dumps(payload, separators=(",", ":")).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    try:
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Health:
    ok: bool
    message: str


def check(path: Path, now: datetime, max_age: timedelta | None) -> Health:
    """Fresh when the file exists, parses, and was updated within `max_age`
    (default: three heartbeats as the daemon recorded them, plus one second)."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        updated = datetime.fromisoformat(str(payload["updated_at"]).replace("Z", "+00:00"))
    except FileNotFoundError:
        return Health(False, f"{path}: no liveness file (is crond running with --liveness-file?)")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Health(False, f"{path}: unreadable liveness file ({exc})")
    if max_age is None:
        beat = payload.get("heartbeat_s")
        seconds = 3 * beat + 1 if isinstance(beat, (int, float)) else 31.0
        max_age = timedelta(seconds=seconds)
    age = now - updated
    where = (
        f"pid {payload.get('pid')}, {payload.get('jobs')} jobs, {payload.get('running')} running"
    )
    if age > max_age:
        return Health(
            False,
            f"{path}: stale: updated {age.total_seconds():.1f}s ago "
            f"(max {max_age.total_seconds():g}s); {where}",
        )
    return Health(True, f"{path}: fresh: updated {max(age.total_seconds(), 0):.1f}s ago; {where}")
