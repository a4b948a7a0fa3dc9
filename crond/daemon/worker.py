"""A cluster's database off the event loop (docs/design.md, "The store off the loop"): one
thread a PostgreSQL store, which owns its connection and runs its calls one at a time, in
the order given, each with a deadline.

A call still running at its deadline is cut: `cut` (the store's, crond/store/pg_conn.py)
shuts its connection's socket down from another thread, so a call blocked on a server
that does not answer (stopped, partitioned: its kernel still acknowledges) returns as a
broken connection, and the next call connects again (libpq's `connect_timeout` bounds a
connect). The loop side never blocks on the thread: it awaits what it needs with a
deadline of its own, and hears of the rest when it comes back (crond/daemon/stores.py).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_Call = tuple["Future[Any]", Callable[[], Any], float]


class Worker:
    """One thread running calls in order (FIFO), and a watchdog that cuts the call running
    past its deadline. `submit` and `cut` may be called from any thread."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._running: tuple[int, float] | None = None  # (call number, deadline: monotonic)
        self._closed = False
        self.cutter: Callable[[], None] | None = None  # cuts the store's connection
        self.cuts = 0  # calls cut (for the tests)
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._watch = threading.Thread(target=self._watchdog, name=f"{name}-watch", daemon=True)
        self._thread.start()
        self._watch.start()

    def submit(self, call: Callable[[], T], deadline: float) -> Future[T]:
        """`call` run after those submitted before it; cut `deadline` seconds after it
        begins. A future cancelled before it begins is never run."""
        done: Future[T] = Future()
        self._calls.put((done, call, deadline))
        return done

    def cut(self) -> None:
        """Cut the call running now, if any (its connection's socket shut down)."""
        cutter = self.cutter
        if cutter is not None:
            self.cuts += 1
            with contextlib.suppress(Exception):
                cutter()

    def close(self) -> None:
        """No more calls: the thread ends after those queued (it is a daemon thread, so a
        call stuck for good does not hold the process's exit)."""
        self._calls.put(None)
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _work(self) -> None:
        number = 0
        while (item := self._calls.get()) is not None:
            done, call, deadline = item
            if not done.set_running_or_notify_cancel():
                continue  # its caller gave up on it before it began
            number += 1
            with self._cond:
                self._running = (number, time.monotonic() + deadline)
                self._cond.notify_all()
            try:
                result = call()
            except BaseException as exc:  # noqa: BLE001  (handed to whoever waits on it)
                done.set_exception(exc)
            else:
                done.set_result(result)
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()

    def _watchdog(self) -> None:
        cut = 0  # the last call cut: cut once
        with self._cond:
            while not self._closed:
                running = self._running
                if running is None or running[0] == cut:
                    self._cond.wait()
                    continue
                left = running[1] - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                cut = running[0]
                self.cut()
