"""The runs waiting for locks as `crond ps` shows them (docs/workflows.md): each with its
slot, the first of its locks without room and the runs holding it; and what the daemon
keeps of its locks in the state store for `crond status` (`kept`)."""

from __future__ import annotations

import json
from typing import Any

from crond.clock import iso_utc
from crond.schedule.locks import Locks


def lock_waits(locks: Locks) -> list[dict[str, Any]]:
    """The waiting runs, oldest slot first (none: [])."""
    rows: list[dict[str, Any]] = []
    for item in locks.waiting():
        # (with replicas, a run refused by the database: the lock and holders it named)
        blocked = locks.full(item.job) or locks.elsewhere.get((item.job.name, item.slot))
        rows.append(
            {
                "job": item.job.name,
                "slot": iso_utc(item.slot),
                "reason": "lock",
                "lock": None if blocked is None else blocked.lock,
                "held_by": [] if blocked is None else [
                    f"{job}@{iso_utc(slot)}" for job, slot in blocked.holders
                ],
                "deadline": iso_utc(item.deadline),
            }
        )  # fmt: skip
    return rows


def kept(locks: Locks) -> str:
    """The daemon's locks as the state store keeps them for `crond status` (a meta value,
    JSON): who holds each lock (`job@slot`) and the runs waiting (as `lock_waits`)."""
    holds = {
        name: [f"{job}@{iso_utc(slot)}" for job, slot in holders]
        for name, holders in sorted(locks.holders.items())
    }
    return json.dumps({"holds": holds, "waits": lock_waits(locks)}, separators=(",", ":"))
