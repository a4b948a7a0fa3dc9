"""What the notifier tests share: jobs and notifiers built as the loader builds them, a
structlog logger that keeps every event, and an in-memory Outbox and Memory."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, cast

import structlog
from structlog.typing import FilteringBoundLogger

from crond.config.loaded import LoadedJob, NotifierKind, NotifierSpec
from crond.config.model import Job
from crond.notify.outbox import OutboxItem, StoredItem


def job(name: str = "backup", ping: str | None = None, **fields: Any) -> LoadedJob:
    settings = Job.model_validate({"every": "1h", "command": "true", **fields})
    return LoadedJob(name, settings, ping=ping)


def notifier(
    name: str,
    kind: NotifierKind,
    target: str | tuple[str, ...],
    *,
    headers: tuple[tuple[str, str], ...] = (),
    repeat: timedelta = timedelta(hours=1),
) -> NotifierSpec:
    return NotifierSpec(name, kind, target, headers, repeat, f"{kind} {name}")


class Events:
    """A structlog logger keeping every event with its level (debug too)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        wrapper = structlog.make_filtering_bound_logger(logging.NOTSET)
        self.log = cast(
            FilteringBoundLogger,
            structlog.wrap_logger(self, processors=[], wrapper_class=wrapper),
        )

    def _record(self, level: str, event: dict[str, Any]) -> None:
        with self._changed:
            self.events.append({"level": level, **event})
            self._changed.notify_all()

    def debug(self, **event: Any) -> None:
        self._record("debug", event)

    def info(self, **event: Any) -> None:
        self._record("info", event)

    def warning(self, **event: Any) -> None:
        self._record("warning", event)

    def error(self, **event: Any) -> None:
        self._record("error", event)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == name]

    async def wait(self, name: str, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The `name` events once there are `count` of them (polled: the event loop runs)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.named(name)) < count:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{len(self.named(name))} of {count} {name} events")
            await asyncio.sleep(0.005)
        return self.named(name)

    def text(self) -> str:
        return "\n".join(repr(e) for e in self.events)


class ListOutbox:
    """An Outbox in a dict, recording each call."""

    def __init__(self) -> None:
        self.items: dict[int, OutboxItem] = {}
        self.next_id = 1
        self.adds: list[int] = []  # the size of each add (one write each)
        self.done_ids: list[int] = []

    def add(self, items: Sequence[OutboxItem]) -> list[int] | None:
        ids = []
        for item in items:
            self.items[self.next_id] = item
            ids.append(self.next_id)
            self.next_id += 1
        self.adds.append(len(items))
        return ids

    def pending(self, limit: int) -> list[StoredItem]:
        return [StoredItem(i, item) for i, item in sorted(self.items.items())][:limit]

    def done(self, ids: Sequence[int]) -> None:
        for i in ids:
            self.items.pop(i, None)
            self.done_ids.append(i)


class DictMemory:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value
