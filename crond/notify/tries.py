"""One try of a notification or a ping, and its verdict; delivery.py decides when.

A try is bounded (`try_timeout`: the senders' own, and this module's with a second's
slack); its failure is a SendError, and an unexpected exception is reduced to its type,
as its message may hold a URL (errors.py). A failed try is tried again after a backoff
(`first_retry`, doubling, at most `max_retry`; the endpoint's Retry-After within those
bounds) until `window` after the item was made, then given up. What cannot succeed (a
4xx, a URL httpx refuses) is given up at once. What is said of each verdict is
report.py's.

No time is read here: `epoch` (wall clock, for an item's age) and `now` (monotonic, for
when a retry falls due) are Delivery's Clock's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from crond.notify.errors import SendError
from crond.notify.lanes import Entry
from crond.notify.report import Report
from crond.notify.senders import Destinations, Senders


@dataclass(frozen=True)
class Tries:
    """How each try is made and settled; see the module docstring."""

    senders: Senders
    report: Report
    try_timeout: float
    first_retry: float
    max_retry: float
    window: float

    async def send(self, entry: Entry, where: Destinations) -> tuple[bool, SendError | None]:
        """One try of `entry`, counted in its `tries`: (stale, error). Stale: its notifier
        or job is gone from `where`; error: None when delivered."""
        error: SendError | None = None
        stale = False
        try:
            async with asyncio.timeout(self.try_timeout + 1):  # the senders' own, + slack
                stale = not await self.senders.send(entry.item, where)
        except SendError as exc:
            error = exc
        except TimeoutError:
            error = SendError("timed out")
        except Exception as exc:  # noqa: BLE001  (the type only: a message may hold a URL)
            error = SendError(type(exc).__name__)
        entry.tries += 1
        return stale, error

    def settle(
        self, entry: Entry, stale: bool, error: SendError | None, *, epoch: float, now: float
    ) -> float | None:
        """The verdict of the try just made, said: None when `entry` is done with
        (delivered, stale or given up), else the monotonic instant of its next try."""
        item = entry.item
        if stale:
            self.report.stale(item)
            return None
        if error is None:
            self.report.sent(item, entry.tries)
            return None
        if not error.retry:
            self.report.failed(item, error.error)
            return None
        delay: float = min(self.first_retry * 2 ** (entry.tries - 1), self.max_retry)
        if error.after is not None:  # the endpoint's Retry-After, within our bounds
            delay = min(max(delay, error.after), self.max_retry)
        if epoch + delay > item.created + self.window:
            self.report.failed(item, error.error)
            return None
        self.report.retry(item, entry.tries, delay, error.error)
        return now + delay
