"""Delivery: the asyncio task that sends what the daemon tells, beside the scheduling
loop, so that no endpoint can delay a start or the heartbeat (docs/alerting.md).

`put()` is what the daemon calls: synchronous, it only appends to a list and wakes the
task. Each new item is kept in the outbox before it is tried — by `keep()`, which the
daemon calls once the notifications of a run's end are all put, or else at the task's
next pass (one write for all that came since) — so a restart loses none; it is forgotten
once delivered or given up (intake.py).

- Lanes (lanes.py): each notifier is a lane, and so are each job's pings. Per lane, items
  start in the order they were made; at most `lane_flying` tries of a lane run at once (a
  job's pings: one), and `total_flying` in all. At most `lane_limit` wait in a lane: past
  that the oldest is given up ("queue full"). Memory is bounded whatever the endpoints do.
- Tries (tries.py): each is bounded (`try_timeout`); a failed one is tried again after a
  backoff (`first_retry`, doubling, at most `max_retry`) until `window` after the item
  was made, then given up with one `notify.failed` (error level). What cannot succeed (a
  4xx, a URL httpx refuses) is given up at once. `notify.sent` says it was delivered
  (info; debug for a ping delivered at its first try). What is logged and counted is
  report.py's.
- Where an item goes is looked up when it is tried, in the notifiers and pings of the
  latest `configure()`: the outbox keeps no URL (secrets), and a reload that removes a
  notifier drops what waits for it (`notify.stale`, debug).
- Closing (`aclose(grace)`): nothing more is taken; what is queued is tried for `grace`
  seconds. What is left stays in the outbox for the next daemon, or without one is
  counted in one `notify.dropped`.

Every instant is the Clock's: its monotonic seconds for retries and lanes, its wall clock
for an item's age; when the task wakes is waking.py's. How one try is sent (httpx,
command notifiers, Apprise children) is senders.py's. No error message holds a URL, a
header or a command: see errors.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection, Mapping

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, SystemClock
from crond.config.loaded import NotifierSpec
from crond.notify.intake import Intake
from crond.notify.lanes import Entry, Lane, LaneKey, Lanes
from crond.notify.outbox import Outbox, OutboxItem
from crond.notify.report import Report
from crond.notify.senders import Senders
from crond.notify.tries import Tries
from crond.notify.waking import Waker


class Delivery:
    """Sends notifications and pings in the background; see the module docstring."""

    def __init__(
        self,
        log: FilteringBoundLogger,
        *,
        outbox: Outbox | None,
        on_result: Callable[[str, str], None] | None = None,
        try_timeout: float = 10.0,
        first_retry: float = 1.0,
        max_retry: float = 60.0,
        window: float = 300.0,
        lane_limit: int = 1000,
        lane_flying: int = 4,
        total_flying: int = 64,
        threads: int = 4,
        clock: Clock | None = None,
    ) -> None:
        self.log = log
        self.try_timeout = try_timeout
        self.total_flying = total_flying
        # Every instant of delivery is the clock's: its monotonic seconds for retries and
        # lanes, its wall clock for an item's age (SystemClock unless told).
        self.clock: Clock = clock or SystemClock()
        self.notifiers: Mapping[str, NotifierSpec] = {}
        self.pings: Mapping[str, str] = {}
        self.jobs: frozenset[str] | None = None  # None: not told, every job counts
        self.report = Report(log, on_result)
        self.lanes = Lanes(limit=lane_limit, flying=lane_flying)
        self.intake = Intake(outbox)
        self._tasks: set[asyncio.Task[None]] = set()
        self._flying = 0
        self._waker = Waker()  # its deadline: the grace's end, set by aclose
        self._closing = False
        self._closed = False
        self._ended: asyncio.Event | None = None
        self.senders = Senders(try_timeout=try_timeout, connections=total_flying, threads=threads)
        self.tries = Tries(self.senders, self.report, try_timeout, first_retry, max_retry, window)

    # -- what the daemon calls -------------------------------------------------------

    def configure(
        self,
        notifiers: Mapping[str, NotifierSpec],
        pings: Mapping[str, str],
        *,
        jobs: Collection[str] | None = None,
    ) -> None:
        """Where items go from now on (each load and reload): queued items too. With
        `jobs` (the file's job names), a notification of a job no longer there is dropped."""
        self.notifiers = dict(notifiers)
        self.pings = dict(pings)
        self.jobs = None if jobs is None else frozenset(jobs)

    def put(self, item: OutboxItem) -> None:
        """Queue `item`. Synchronous; never blocks, never raises."""
        try:
            if self._closing:
                self.report.refused()
                return
            lost = self.intake.put(item)
            if lost is not None:
                self._overflowed(lost)
            self._waker.set()
        except Exception as exc:  # noqa: BLE001  (telling must never stop scheduling)
            self.report.bug(exc)

    def keep(self) -> None:
        """Have what was put written to the outbox now (after a run's notifications: a
        kill right after its end loses none), not at the task's next pass (intake.py's
        `send`: the task, never the loop, awaits the answer). Never raises."""
        if not self._waker.running or self._closing or not self.intake.new:
            return  # before run(): its restore must come first; closing: the task has it
        try:
            self.intake.send()
        except Exception as exc:  # noqa: BLE001  (telling must never stop scheduling)
            self.report.bug(exc)
        self._waker.set()

    async def run(self) -> None:
        """The delivery task: returns once `aclose()` is done with it."""
        self._waker.start()
        self._ended = asyncio.Event()
        try:
            await self._restore()
            while True:
                try:
                    await self._pass(self.clock.monotonic())
                except Exception as exc:  # noqa: BLE001  (a bug must not end delivery)
                    self.report.bug(exc)
                if self._closing and self._nothing_before_deadline(self.clock.monotonic()):
                    break
                await self._waker.sleep(self.clock)
        finally:
            await self._finish()
            self._closed = True
            self._ended.set()

    async def aclose(self, grace: float) -> None:
        """Take nothing more; try what is queued for up to `grace` seconds; end `run()`."""
        self._closing = True
        self._waker.deadline = self.clock.monotonic() + max(0.0, grace)
        if not self._waker.running:
            await asyncio.sleep(0)  # a run() task just created starts now
        if not self._waker.running or self._ended is None:  # run() never started
            self.report.dropped(len(self.intake.new))
            self.intake.new.clear()
            self._closed = True
            return
        self._waker.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), grace + self.try_timeout + 5)

    # -- the task's passes -----------------------------------------------------------

    def _nothing_before_deadline(self, now: float) -> bool:
        """Closing: the grace is over, or nothing is left to try within it."""
        deadline = now if self._waker.deadline is None else self._waker.deadline
        if now >= deadline or self.intake.new:
            return now >= deadline
        return self.lanes.idle_until(deadline)

    async def _restore(self) -> None:
        """A previous daemon's items, queued again (intake.py: maybe sent twice)."""
        for row in await self.intake.restore():
            self._enqueue(row.item, row.id)

    async def _pass(self, now: float) -> None:
        self.report.overflow_due(now)
        await self._intake()
        self.intake.forget()
        self._dispatch(self.clock.monotonic())  # the intake's write may have taken a while
        self.intake.forget()

    async def _intake(self) -> None:
        """New items into the outbox (one write), then into their lanes."""
        for item, outbox_id in await self.intake.take():
            self._enqueue(item, outbox_id)

    def _enqueue(self, item: OutboxItem, outbox_id: int | None) -> None:
        for oldest in self.lanes.add(item, outbox_id):  # pushed out of a full lane
            self.intake.forget_later(oldest.id)
            self._overflowed(oldest.item)

    def _dispatch(self, now: float) -> None:
        """Start what may start: per lane in order, within both caps."""
        for key, lane, entry in self.lanes.take(now, self.total_flying - self._flying):
            self._flying += 1
            task = asyncio.get_running_loop().create_task(self._try(key, lane, entry))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _try(self, key: LaneKey, lane: Lane, entry: Entry) -> None:
        retried = entry.tries > 0
        try:
            stale, error = await self.tries.send(entry, self)
            epoch, now = self.clock.now().timestamp(), self.clock.monotonic()
            due = self.tries.settle(entry, stale, error, epoch=epoch, now=now)
            if due is None:  # delivered, stale or given up
                self.intake.forget_later(entry.id)
            else:
                # Closing, a retry after the grace stays queued: kept in the outbox for the
                # next daemon, or counted as dropped.
                entry.due = due
                self._waker.at(due)
                lane.retrying.append(entry)
        finally:
            self.lanes.landed(key, lane, retried=retried)
            self._flying -= 1
            self._waker.set()

    # -- endings ---------------------------------------------------------------------

    def _overflowed(self, item: OutboxItem) -> None:
        """An item given up because its lane was full (report.py sums them)."""
        due = self.report.overflowed(item, self.clock.monotonic())
        if due is not None:  # its line is held back: a pass then logs it
            self._waker.at(due)

    async def _finish(self) -> None:
        """The end of the task: stop the tries in flight (an outbox keeps them for the
        next daemon), count what is left, release the client."""
        tasks = list(self._tasks)
        flying = self._flying
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await self._intake()
        left = flying + len(self.intake.new) + self.lanes.waiting()
        with contextlib.suppress(Exception):
            self.intake.forget()
        self.report.overflow_all(self.clock.monotonic())
        if self.intake.outbox is None:
            self.report.dropped(left)
        self.lanes.clear()
        await self.senders.aclose()
