"""Failing streaks, per notifier and job, for the Teller (teller.py; docs/alerting.md).

The first `failed` run of a streak is told at once, later ones at most once per the
notifier's `repeat` (0s: every one), each with `streak`, the failed runs so far. A
success ends the streak. A streak survives a restart through `Memory` (the state store's
meta table): `streak:NOTIFIER:JOB` holds `{"failed": N, "sent": EPOCH}`. A damaged value
is a new streak; a memory that fails is not a reason to stop telling: nothing raises.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol


class Memory(Protocol):
    """Small strings kept across daemon restarts. Neither method raises."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


@dataclass
class Streak:
    failed: int = 0  # failed runs in a row
    sent: float | None = None  # epoch seconds of the last `failed` told

    def due(self, now: datetime, repeat: timedelta) -> bool:
        """Is this failed run of the streak told? The first always; later ones once
        `repeat` has passed since the last told."""
        seconds = repeat.total_seconds()
        if self.failed == 1 or self.sent is None or seconds <= 0:
            return True
        return now.timestamp() - self.sent >= seconds


class Streaks:
    """Every streak asked for so far, recalled from `memory` when first asked."""

    def __init__(self, memory: Memory | None) -> None:
        self.memory = memory
        self._streaks: dict[tuple[str, str], Streak] = {}

    def get(self, notifier: str, job: str) -> Streak:
        key = (notifier, job)
        streak = self._streaks.get(key)
        if streak is None:
            streak = self._streaks[key] = self._recall(notifier, job)
        return streak

    def end(self, notifier: str, job: str) -> int:
        """A success: the failed runs of the streak it ends (0: none), now forgotten."""
        streak = self.get(notifier, job)
        if not streak.failed:
            return 0
        self.save(notifier, job, Streak())
        self._streaks[notifier, job] = Streak()
        return streak.failed

    def save(self, notifier: str, job: str, streak: Streak) -> None:
        if self.memory is None:
            return
        value = json.dumps({"failed": streak.failed, "sent": streak.sent})
        with contextlib.suppress(Exception):
            self.memory.set(_memory_key(notifier, job), value)

    def _recall(self, notifier: str, job: str) -> Streak:
        if self.memory is None:
            return Streak()
        try:
            text = self.memory.get(_memory_key(notifier, job))
            if not text:
                return Streak()
            data = json.loads(text)
            sent = data.get("sent")
            return Streak(int(data.get("failed", 0)), None if sent is None else float(sent))
        except Exception:  # noqa: BLE001  (a damaged value: a new streak)
            return Streak()


MEMORY_PREFIX = "streak:"  # the keys of the streaks in the memory


def _memory_key(notifier: str, job: str) -> str:
    return f"{MEMORY_PREFIX}{notifier}:{job}"
