"""The calls of a cluster's database off the event loop: `ask`, `asked`, `send` and
`write` (crond/daemon/offloop.py says what each is for), each with its deadline, and
what comes of them (the database away, back again). OffLoop builds on them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from crond.clock import Clock
from crond.daemon.stores import FAILED, Failed, Opener, StoreHealth
from crond.daemon.worker import Worker
from crond.store.base import AttemptRow, StateError, Store

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

T = TypeVar("T")
QUICK = 1.0  # seconds the loop waits at most for an answer it needs (docs/replicas.md)
SLOW = 5.0  # seconds a queued write may run before it is cut (a view of many jobs)
BACKLOG = 1000  # writes queued at most: past it, one more counts as failed


class OffLoopCalls(StoreHealth):
    """StoreHealth whose store, a cluster's database, is called on a thread of its own
    (`worker`); without replicas, every call is StoreHealth's, on the loop's thread.
    OffLoop (offloop.py) adds the opening, the checks and the ends of runs."""

    def __init__(
        self,
        opener: Opener | None,
        log: FilteringBoundLogger,
        clock: Clock,
        quiet: float = 10.0,
        *,
        replica: str | None = None,
        on_lost: Callable[[AttemptRow], None] | None = None,
    ) -> None:
        super().__init__(opener, log, clock, quiet, replica=replica, on_lost=on_lost)
        self.off_loop = replica is not None and opener is not None
        self.worker: Worker | None = None  # made at the first open
        self.opening: asyncio.Task[bool] | None = None
        self._backlog = 0  # writes sent, not yet come back

    # --- the calls --------------------------------------------------------------------

    def _may(self, force: bool) -> Store | None:
        """The store, if a call may go to it now: while the database is away, one call a
        backoff (the rest fail at once) unless `force`d (claims, the heartbeat's)."""
        if self.store is None or self.worker is None:
            return None
        if self._down_since is not None and not force:
            now = self.clock.monotonic()
            if now < self._retry_at:
                return None
            self._retry_at = now + self._backoff  # this one is the backoff's try
        return self.store

    def asked(
        self, call: Callable[[Store], T], *, force: bool = False, deadline: float = QUICK
    ) -> Awaitable[T | Failed]:
        """`call`'s answer, to await, or FAILED: no store, the database away and not tried
        now, or no answer within `deadline` (then the call is cut, the database
        unavailable). The call is made (without replicas) or queued on the store's thread
        (with them) now, in order with the calls after it: only its answer is awaited."""
        if not self.off_loop:
            return _answered(self.write(call, force=force))
        store = self._may(force)
        if store is None:
            return _answered(FAILED)
        assert self.worker is not None
        answer = asyncio.wrap_future(self.worker.submit(lambda: call(store), deadline))
        return self._answer(store, answer, deadline)

    ask = asked  # the same: a caller that awaits at once

    async def _answer(self, store: Store, answer: asyncio.Future[T], deadline: float) -> T | Failed:
        try:
            async with asyncio.timeout(deadline):
                result = await answer
        except TimeoutError:
            self._late(store, deadline)
            return FAILED
        except StateError as exc:
            self.failed(exc)
            return FAILED
        self._recovered()
        return result

    def write(self, write: Callable[[Store], T], *, force: bool = False) -> T | Failed:
        if not self.off_loop:
            return super().write(write, force=force)
        if self._down_since is not None:
            # The database away: the loop never waits on it (`ask` and `send` try it and
            # end the outage); at worst it waited QUICK once, for the write that found it.
            return FAILED
        store = self._may(force)
        if store is None:
            return FAILED
        assert self.worker is not None
        answer = self.worker.submit(lambda: write(store), QUICK)
        try:
            result = answer.result(timeout=QUICK)
        except concurrent.futures.TimeoutError:
            answer.cancel()
            self._late(store, QUICK)
            return FAILED
        except StateError as exc:
            self.failed(exc)
            return FAILED
        self._recovered()
        return result

    def send(
        self,
        call: Callable[[Store], T],
        *,
        force: bool = False,
        then: Callable[[T | Failed], None] | None = None,
    ) -> None:
        """`call` done off the loop; `then` is given its result (or FAILED) on the loop
        when it comes back (at once without replicas, or when it is not tried)."""
        if not self.off_loop:
            result = self.write(call, force=force)
            if then is not None:
                then(result)
            return
        store = self._may(force)
        if store is None or self._backlog >= BACKLOG:
            if then is not None:
                then(FAILED)
            return
        assert self.worker is not None
        loop = asyncio.get_running_loop()
        self._backlog += 1

        def back(done: concurrent.futures.Future[T]) -> None:  # on the worker's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell
                loop.call_soon_threadsafe(self._came_back, done, then)

        self.worker.submit(lambda: call(store), SLOW).add_done_callback(back)

    def _came_back(
        self, done: concurrent.futures.Future[T], then: Callable[[T | Failed], None] | None
    ) -> None:
        self._backlog -= 1
        exc = done.exception() if not done.cancelled() else None
        result: T | Failed = FAILED
        if isinstance(exc, StateError):
            self.failed(exc)
        elif exc is not None:
            self.log.error("state.write_failed", error=f"{type(exc).__name__}: {exc}")
        elif not done.cancelled():
            self._recovered()
            result = done.result()
        if then is not None:
            then(result)

    def _late(self, store: Store, deadline: float) -> None:
        """No answer within `deadline`: the call running is cut, the database away."""
        assert self.worker is not None
        self.worker.cut()
        self.failed(StateError(f"{store.location}: no answer within {deadline:g}s"))


async def _answered(result: T) -> T:
    """An answer already had, to await."""
    return result
