"""The `long_running` timers of the Teller (teller.py): one per run of a job that tells
`long_running`, armed at the run's first attempt for the job's `warn_after`, disarmed
when the run ends or is lost, or when the daemon stops. Without an event loop (a test,
a tool) none is armed. The timers are the Clock's (`call_at`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from crond.clock import Clock, Timer


class LongRunning:
    """The armed timers, by run id."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._timers: dict[str, Timer] = {}

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._timers

    def arm(self, run_id: str, after: timedelta, callback: Callable[[], None]) -> None:
        """Call `callback` `after` from now, unless `run_id` is disarmed first."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a test, a tool): no timer
            return
        when = self.clock.now() + after
        self._timers[run_id] = self.clock.call_at(when, callback)

    def fired(self, run_id: str) -> None:
        """The timer of `run_id` went off: it is no longer armed."""
        self._timers.pop(run_id, None)

    def disarm(self, run_id: str) -> None:
        handle = self._timers.pop(run_id, None)
        if handle is not None:
            handle.cancel()

    def close(self) -> None:
        """Disarm every timer."""
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
