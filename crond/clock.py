"""Time as a dependency: the Clock protocol, the system clock, and a fake for tests.

This is the only module that reads the system's wall clock. Everything that decides
is given `now`; the scheduling loop and the runner are given a Clock.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

# Long epoll waits overrun by ~0.1 % of their length (docs/performance.md, "Why crond
# behaves as it does"): a long sleep aims this much early, and a short one does the rest.
_OVERRUN = 0.002
# asyncio's timers wake up to 1 ms late (the event loop's epoll timeout is in whole
# milliseconds, rounded up), so `sleep_until` returns up to that late: it never blocks the
# loop to be exact. The loop wakes `lead` before a slot, and the lead covers that lateness
# and the work done before the slot (`_READY`); `block_until` waits out what is left.
_TIMER_LATE = 0.001
# Planning one due job and committing its `started` row took 0.9-1.4 ms after a minute
# asleep (caches cold), the spawn itself 0.5-0.9 ms: done before the slot, the first of
# them no longer delays the job (bench_lag.py).
_READY = 0.002
# The last _SPIN before a slot `block_until` reads the clock in a loop instead of sleeping:
# a sleeping CPU takes 0.1-0.3 ms to wake up (more after a minute idle), and the job's
# spawn waits for it. At most this much CPU per wake that starts a job.
_SPIN = 0.0005


def iso_utc(when: datetime) -> str:
    """`2026-03-08T07:00:00Z` (microseconds only when there are some): how every event,
    file and record shows an instant."""
    spec = "microseconds" if when.microsecond else "seconds"
    return when.astimezone(UTC).isoformat(timespec=spec).replace("+00:00", "Z")


class Clock(Protocol):
    def now(self) -> datetime:
        """The current UTC instant (tz-aware)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never steps (for heartbeats and durations)."""
        ...

    async def sleep_until(self, when: datetime) -> None:
        """Return at `when`, or after as long as `when` was away at the call, whichever
        comes first: after a clock step the caller re-reads the clock and decides again.
        Never before, and as little after as the event loop's timers allow (SystemClock:
        up to ~1 ms); never blocking the event loop."""
        ...

    # How long before a slot the loop wakes to get ready for it (plan, record), so that
    # at the slot itself only the spawn is left; `block_until` waits out the rest.
    lead: timedelta

    def block_until(self, when: datetime) -> None:
        """Return at `when` (at most `lead` from now), blocking: nothing else may run in
        between, so what was decided for `when` still holds then."""
        ...


async def sleep_until_woken(clock: Clock, when: datetime, wake: asyncio.Event) -> None:
    """Sleep on `clock` until `when`, or until `wake` is set, whichever comes first; `wake`
    is cleared after (a wake already set returns at once, after one turn of the loop)."""
    if when <= clock.now() or wake.is_set():
        wake.clear()
        await asyncio.sleep(0)
        return
    sleeper = asyncio.ensure_future(clock.sleep_until(when))
    waker = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        waker.cancel()
        wake.clear()


class SystemClock:
    """The real wall clock. `sleep_until` re-reads the clock after every wake, so a clock
    step or a suspend is seen at the next wake-up, never hidden by a stale deadline."""

    lead = timedelta(seconds=_TIMER_LATE + _READY)

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep_until(self, when: datetime) -> None:
        import asyncio  # noqa: PLC0415  (`crond validate` reads the clock, never sleeps: -25 ms)

        deadline = time.monotonic() + max(0.0, (when - self.now()).total_seconds())
        while True:
            left = min((when - self.now()).total_seconds(), deadline - time.monotonic())
            if left <= 0:
                return
            # Most of the way, then the rest: the overrun of a long wait stays small.
            await asyncio.sleep(left - left * _OVERRUN)

    def block_until(self, when: datetime) -> None:
        # Bounded on the monotonic clock: a wall clock stepped back meanwhile must not
        # hold the loop for the size of the step.
        deadline = time.monotonic() + self.lead.total_seconds()
        while True:
            left = min((when - self.now()).total_seconds(), deadline - time.monotonic())
            if left <= 0:
                return
            if left > _SPIN:
                time.sleep(left - _SPIN)


class FakeClock:
    """A clock that only moves when told to. `sleep_until` waits for `advance`/`set`.

    Tests drive days of schedule in milliseconds: the loop under test sleeps on this
    clock, the test moves time forward and the sleepers whose instant has come wake.
    """

    def __init__(self, start: datetime, lead: timedelta = timedelta(0)) -> None:
        self._now = start
        self.lead = lead  # 0: the loop plans at the slot itself (most tests)
        self._mono = 0.0
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    async def sleep_until(self, when: datetime) -> None:
        import asyncio  # noqa: PLC0415  (as in SystemClock)

        if when <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (when, next(self._seq), future))
        await future

    def block_until(self, when: datetime) -> None:
        """The blocking wait passes: time moves on to `when`."""
        if when > self._now:
            self.set(when)

    def set(self, when: datetime) -> None:
        """Jump to `when` (backwards too, like a clock step). Wakes every due sleeper and,
        on a backward step, every sleeper, as a real wake would re-read the clock."""
        backwards = when < self._now
        if not backwards:
            self._mono += (when - self._now).total_seconds()
        self._now = when
        keep = []
        for item in self._sleepers:
            if backwards or item[0] <= when:
                if not item[2].done():
                    item[2].set_result(None)
            else:
                keep.append(item)
        self._sleepers = keep
        heapq.heapify(self._sleepers)

    def advance(self, delta: timedelta) -> None:
        self.set(self._now + delta)

    def next_wake(self) -> datetime | None:
        """The earliest instant somebody sleeps until, or None."""
        live = [item for item in self._sleepers if not item[2].done()]
        return min(item[0] for item in live) if live else None
