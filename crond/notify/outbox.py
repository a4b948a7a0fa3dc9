"""The outbox's seam: notifications written to the state store before their first try and
removed once delivered or given up, so that a restart loses none (docs/state.md).

An item says what to tell, never where: the URL, headers or command (secrets) are looked
up in the file's current notifiers and jobs when it is sent. The daemon backs `Outbox`
with its state store; none of its methods may raise (a store that fails must not stop
telling: the item is tried anyway, it is only not kept across a restart).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

Kind = Literal["notify", "ping"]


@dataclass(frozen=True)
class OutboxItem:
    """One notification (kind "notify": to `notifier`) or one healthchecks.io ping (kind
    "ping": `job`'s URL; `notifier` is ""). `event` is the notification's event, or the
    ping's signal ("start", "success", "fail"); `body` is JSON text; `created` is epoch
    seconds, from which the give-up window counts."""

    kind: Kind
    notifier: str
    job: str
    event: str
    body: str
    created: float


class StoredItem(NamedTuple):
    id: int
    item: OutboxItem


class Outbox(Protocol):
    """Where notifications wait until delivered. No method raises. What `add` returns and
    `pending` are awaited by the delivery task: with replicas they are database calls
    made off the event loop (docs/design.md, "The store off the loop"), never one the
    loop waits on."""

    def add(self, items: Sequence[OutboxItem]) -> Awaitable[list[int] | None]:
        """Keep `items` (in one write), made when called (a local file) or queued then,
        in order with the store's later writes (a database): a kill right after loses
        nothing already said. Awaited: their ids in order, or None when it failed."""
        ...

    async def pending(self, limit: int) -> list[StoredItem]:
        """The oldest `limit` items kept (a previous daemon's, at start)."""
        ...

    def done(self, ids: Sequence[int]) -> None:
        """Forget these items: delivered or given up."""
        ...
