"""Delivery's side of the outbox (outbox.py), so that a restart loses no notification:
the items put and not yet queued in a lane, written to the outbox in one write before
their first try (`send`: at once, when the daemon says a run's notifications are all
put; else at the task's next pass); a previous daemon's items, read back at start; and
the ids of items delivered or given up, forgotten in one write at the task's next pass
(delivery.py).

At most _NEW_LIMIT items wait to be taken (the task was not running): past that the
oldest is pushed out, and delivery gives it up as "queue full".
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final

from crond.notify.outbox import Outbox, OutboxItem, StoredItem

_NEW_LIMIT: Final = 10_000  # items put and not yet taken by the task (it was not running)
_RESTORE_LIMIT: Final = 10_000  # a previous daemon's items queued again at start


class Intake:
    """What was put and is not yet in a lane, and what the outbox may forget."""

    def __init__(self, outbox: Outbox | None) -> None:
        self.outbox = outbox
        self.new: list[OutboxItem] = []
        self._sent: list[tuple[list[OutboxItem], Awaitable[list[int] | None]]] = []
        self._done: list[int] = []  # outbox ids to forget at the next pass

    def put(self, item: OutboxItem) -> OutboxItem | None:
        """Hold `item` until taken; the oldest held, when pushed out to make room."""
        lost = self.new.pop(0) if len(self.new) >= _NEW_LIMIT else None
        self.new.append(item)
        return lost

    def send(self) -> None:
        """Write what was put since to the outbox now (one write), its ids to be had at
        the next `take`: a crash right after loses none of it."""
        items, self.new = self.new, []
        if items and self.outbox is not None:
            self._sent.append((items, self.outbox.add(items)))
        elif items:
            self._sent.append((items, _none()))

    async def take(self) -> list[tuple[OutboxItem, int | None]]:
        """The items put since, in order, each with its id in the outbox, or None: not
        kept (no outbox, or it failed)."""
        self.send()
        sent, self._sent = self._sent, []
        taken: list[tuple[OutboxItem, int | None]] = []
        for items, written in sent:
            ids = await written
            if ids is None or len(ids) != len(items):
                taken.extend((item, None) for item in items)
            else:
                taken.extend(zip(items, ids, strict=True))
        return taken

    async def restore(self) -> list[StoredItem]:
        """A previous daemon's items (they may be sent twice: at least once is the
        promise)."""
        return [] if self.outbox is None else await self.outbox.pending(_RESTORE_LIMIT)

    def forget_later(self, outbox_id: int | None) -> None:
        """The item of `outbox_id` is delivered or given up."""
        if outbox_id is not None:
            self._done.append(outbox_id)

    def forget(self) -> None:
        """Forget in the outbox what `forget_later` was told since (one write)."""
        if self._done and self.outbox is not None:
            ids, self._done = self._done, []
            self.outbox.done(ids)


async def _none() -> None:
    return None
