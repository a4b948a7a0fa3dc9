"""The runs waiting for locks as `crond ps` shows them (docs/workflows.md): each with its
slot, the first of its locks without room and the runs holding it."""

from __future__ import annotations

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
