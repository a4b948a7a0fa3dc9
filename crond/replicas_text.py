"""What `crond replicas` prints of a cluster's replicas (docs/replicas.md, Seeing the
cluster): a table, or one JSON object a replica. A replica is `alive` when its last
heartbeat is fresher than `replica_timeout` by the database's clock, as the replicas
judge one another; `silent` otherwise (stopped, killed, cut off: its row stays until a
replica of that name starts again).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from crond.clock import iso_utc
from crond.config.wording import escape
from crond.store.base import ClusterReader, Reader, ReplicaRow, StateError

_SHORT = 12  # hex digits of a file's sha256 a table shows (as cluster.config_mismatch logs)
_NAME_SHOWN = 64


class Shown(NamedTuple):
    """What the rows are judged against: the database's now, how long a replica may be
    silent, and the sha256 of the file as it is on disk here."""

    now: datetime
    replica_timeout: timedelta
    digest: str


def digest(raw: bytes) -> str:
    """The sha256 of a file's bytes, as a replica reports the file it runs."""
    return hashlib.sha256(raw).hexdigest()


def read(reader: Reader) -> tuple[list[ReplicaRow], datetime]:
    """The replicas, by name, and the database's clock. Raises StateError."""
    if not isinstance(reader, ClusterReader):
        raise StateError(f"{reader.location}: not a cluster's database")
    return reader.replicas(), reader.clock()


def _alive(row: ReplicaRow, shown: Shown) -> bool:
    return row.last_beat > shown.now - shown.replica_timeout


def _file(row: ReplicaRow, shown: Shown) -> str:
    """Whether the replica runs this file: `same`, `other` (its bytes differ: an edit
    not reloaded there, or another file), or `-` (not loaded yet)."""
    if row.config_digest is None:
        return "-"
    return "same" if row.config_digest == shown.digest else "other"


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s ago"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h ago"
    return f"{hours}h{minutes:02d}m ago" if hours else f"{minutes}m{secs:02d}s ago"


def format_table(rows: Sequence[ReplicaRow], shown: Shown) -> str:
    """One line a replica: NAME HOST PID STATE HEARTBEAT VERSION FILE STARTED."""
    if not rows:
        return "no replica has joined this cluster"
    header = ("NAME", "HOST", "PID", "STATE", "HEARTBEAT", "VERSION", "FILE", "STARTED")
    lines = [
        (
            escape(row.name[:_NAME_SHOWN]),
            escape(row.host[:_NAME_SHOWN]),
            str(row.pid),
            "alive" if _alive(row, shown) else "silent",
            _age((shown.now - row.last_beat).total_seconds()),
            escape(row.version[:_NAME_SHOWN]),
            f"{(row.config_digest or '-')[:_SHORT]} {_file(row, shown)}",
            iso_utc(row.started)[:19] + "Z",
        )
        for row in rows
    ]
    table = [header, *lines]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def format_json(rows: Sequence[ReplicaRow], shown: Shown) -> str:
    """One object a replica (nothing for none)."""
    return "\n".join(json.dumps(_as_dict(row, shown)) for row in rows)


def _as_dict(row: ReplicaRow, shown: Shown) -> dict[str, Any]:
    return {
        "name": row.name,
        "host": row.host,
        "pid": row.pid,
        "alive": _alive(row, shown),
        "last_beat": iso_utc(row.last_beat),
        "heartbeat_age_s": round((shown.now - row.last_beat).total_seconds(), 3),
        "started": iso_utc(row.started),
        "version": row.version,
        "config_digest": row.config_digest,
        "same_file": None if row.config_digest is None else row.config_digest == shown.digest,
    }
