"""When the delivery task (delivery.py) wakes: at once when something is put or a try
ends (`set`), at each instant it was told (`at`: a retry falling due, a held back "queue
full" line), and, once closing, at the end of the grace (`deadline`). Instants are
monotonic seconds of Delivery's Clock, which `sleep` is given: no time is read otherwise.
"""

from __future__ import annotations

import asyncio
import heapq
from datetime import timedelta

from crond.clock import Clock, sleep_until_woken


class Waker:
    """The delivery task's wake-ups; see the module docstring."""

    def __init__(self) -> None:
        self.deadline: float | None = None  # monotonic: the grace's end, once closing
        self._event: asyncio.Event | None = None  # made when the task starts
        self._instants: list[float] = []  # a heap

    @property
    def running(self) -> bool:
        """The task has started (`start`)."""
        return self._event is not None

    def start(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        """Wake the task now (when it runs)."""
        if self._event is not None:
            self._event.set()

    def at(self, instant: float) -> None:
        heapq.heappush(self._instants, instant)

    async def sleep(self, clock: Clock) -> None:
        """Until something is put, a try ends, a retry falls due or the grace is over."""
        assert self._event is not None
        now = clock.monotonic()
        while self._instants and self._instants[0] <= now:
            heapq.heappop(self._instants)
        wake_at = self._instants[0] if self._instants else None
        if self.deadline is not None:
            wake_at = self.deadline if wake_at is None else min(wake_at, self.deadline)
        if wake_at is None:
            await self._event.wait()
            self._event.clear()
            return
        until = clock.now() + timedelta(seconds=max(0.0, wake_at - now))
        await sleep_until_woken(clock, until, self._event)
