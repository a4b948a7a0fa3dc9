"""A cluster's database used off the event loop (docs/design.md, "The store off the
loop"; docs/replicas.md, "The database goes away").

With replicas, every call of the PostgreSQL store runs on the store's own thread
(crond/daemon/worker.py), in order, each with a deadline; the loop never waits on one
without a deadline of its own, and never blocks:

- `ask`: what the loop needs the answer of (a wake's claims, a trigger's, the cluster's
  poll and heartbeat, `crond ps`'s other runs, a pause kept for the cluster) is awaited,
  at most `QUICK` seconds; past it the call counts as failed (`database.unavailable`,
  once an outage) and the call running is cut, so the thread is free again. `asked` is
  the same with the call queued at once and only its answer awaited (the notifiers'
  outbox: kept in the order things happened, even if the daemon is killed next);
- `send`: a write whose answer the loop does not need (a run's end, the view, a mark,
  the checks) is queued, and what comes of it handled on the loop when it comes back;
- `write`: the SQLite store's calls, done at once; with replicas nothing calls it any
  more (the notifiers' outbox and the start's reads are `ask`ed), and were it called it
  would wait at most `QUICK`, and not at all while the database is away;
- `open`: the store is opened (again) on the thread; the loop hears when it is done.

The SQLite store (no replicas) stays on the loop's thread: a local file, each call done
at once through the same interface, so one daemon's timing is unchanged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from crond.clock import Clock
from crond.daemon.stores import FAILED, End, Failed, Opener, StoreHealth
from crond.daemon.worker import Worker
from crond.store.base import AttemptRow, ReplicaTaken, StateError, Store

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

T = TypeVar("T")
QUICK = 1.0  # seconds the loop waits at most for an answer it needs (docs/replicas.md)
SLOW = 5.0  # seconds a queued write may run before it is cut (a view of many jobs)
OPENING = 30.0  # an open: bounded by libpq's connect_timeout and the statements'
BACKLOG = 1000  # writes queued at most: past it, one more counts as failed


class OffLoop(StoreHealth):
    """StoreHealth whose store, a cluster's database, is called on a thread of its own
    (`worker`); without replicas, every call is StoreHealth's, on the loop's thread."""

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

    # --- opening, checking, closing ------------------------------------------------------

    def open(self) -> bool:
        """Without replicas, StoreHealth's. With them, the open is started on the store's
        thread (unless one is under way): False now; `opening` is its task."""
        if not self.off_loop:
            return super().open()
        if self.opening is None or self.opening.done():
            self.opening = asyncio.ensure_future(self._open_off_loop())
        return False

    async def _open_off_loop(self) -> bool:
        assert self.opener is not None
        if self.worker is None:
            self.worker = Worker(f"crond-db-{self.replica}")
        worker, opener, aside = self.worker, self.opener, self.corrupt
        old, self.store = self.store, None
        opening = functools.partial(
            _opening, worker, opener, aside, old, None if self._opened else self.clock.now()
        )
        try:
            store, lost = await asyncio.wrap_future(worker.submit(opening, OPENING))
        except ReplicaTaken:
            raise  # the daemon's to act on (crond/daemon/heartbeat.py, lifecycle.py)
        except StateError as exc:
            self.failed(exc, "state.unavailable")
            return False
        self._adopt(store, lost)
        return True

    def check(self) -> None:
        if not self.off_loop:
            super().check()
            return
        if self.store is not None:
            self.send(lambda store: store.check_in_place())
            self.send(lambda store: store.checkpoint())

    def close(self) -> None:
        if not self.off_loop or self.worker is None:
            super().close()
            return
        store, self.store = self.store, None
        if store is not None:
            with contextlib.suppress(concurrent.futures.TimeoutError, StateError):
                self.worker.submit(store.close, QUICK).result(timeout=QUICK)
        self.worker.close()
        self.worker = None

    def mark(self, key: str, value: str) -> None:
        self.send(lambda store: store.set_meta(key, value))

    # --- the ends of runs ------------------------------------------------------------------

    def _write_end(self, write: End) -> None:
        if not self.off_loop:
            super()._write_end(write)
            return
        self.send(write, then=lambda result: self._ended(result, write))

    def _replay(self, pending: list[End]) -> None:
        if not self.off_loop:
            super()._replay(pending)
            return
        for write in pending:
            self._write_end(write)


async def _answered(result: T) -> T:
    """An answer already had, to await."""
    return result


def _opening(
    worker: Worker, opener: Opener, aside: bool, old: Store | None, first: datetime | None
) -> tuple[Store, list[AttemptRow]]:
    """The store opened on its thread (the old one closed first): at the first open
    (`first`: now), with the runs a dead daemon left closed as lost."""
    worker.cutter = None
    if old is not None:
        with contextlib.suppress(Exception):
            old.close()
    store = opener(aside)
    try:
        lost = store.close_lost(first) if first is not None else []
    except BaseException:
        store.close()
        raise
    worker.cutter = getattr(store, "cut", None)
    return store, lost
