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

The calls themselves are crond/daemon/offcalls.py's (`OffLoopCalls`); here, the opening,
the checks, the closing and the ends of runs, done through them (`OffLoop`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
from datetime import datetime

from crond.daemon.offcalls import QUICK, SLOW, OffLoopCalls
from crond.daemon.stores import End, Opener
from crond.daemon.worker import Worker
from crond.store.base import AttemptRow, ReplicaTaken, StateError, Store

__all__ = ["OPENING", "QUICK", "SLOW", "OffLoop"]

OPENING = 30.0  # an open: bounded by libpq's connect_timeout and the statements'


class OffLoop(OffLoopCalls):
    """A cluster's database off the loop (OffLoopCalls, offcalls.py: the calls), opened,
    checked and closed on the store's thread, and the ends of runs sent there; without
    replicas, every one is StoreHealth's, on the loop's thread."""

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
