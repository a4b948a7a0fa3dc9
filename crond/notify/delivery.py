"""Delivery: the asyncio task that sends what the daemon tells, beside the scheduling
loop, so that no endpoint can delay a start or the heartbeat (docs/alerting.md).

`put()` is what the daemon calls: synchronous, it only appends to a list and wakes the
task. Each new item is kept in the outbox before it is tried — by `keep()`, which the
daemon calls once the notifications of a run's end are all put, or else at the task's
next pass (one write for all that came since) — so a restart loses none; it is forgotten
once delivered or given up.

- Lanes: each notifier is a lane, and so are each job's pings. Per lane, items start in
  the order they were made; at most `lane_flying` tries of a lane run at once (a job's
  pings: one), and `total_flying` in all. At most `lane_limit` wait in a lane: past that
  the oldest is given up ("queue full"). Memory is bounded whatever the endpoints do.
- Tries: each is bounded (`try_timeout`); a failed one is tried again after a backoff
  (`first_retry`, doubling, at most `max_retry`) until `window` after the item was made,
  then given up with one `notify.failed` (error level). What cannot succeed (a 4xx, a URL
  httpx refuses) is given up at once. `notify.sent` says it was delivered (info; debug
  for a ping delivered at its first try).
- Where an item goes is looked up when it is tried, in the notifiers and pings of the
  latest `configure()`: the outbox keeps no URL (secrets), and a reload that removes a
  notifier drops what waits for it (`notify.stale`, debug).
- Closing (`aclose(grace)`): nothing more is taken; what is queued is tried for `grace`
  seconds. What is left stays in the outbox for the next daemon, or without one is
  counted in one `notify.dropped`.

How one try is sent (httpx, command notifiers, Apprise threads) is senders.py's. No error
message holds a URL, a header or a command: see errors.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, SystemClock, sleep_until_woken
from crond.config.loaded import NotifierSpec
from crond.notify.errors import SendError
from crond.notify.outbox import Outbox, OutboxItem
from crond.notify.senders import Senders

PING: Final = "ping"  # the notifier name pings are logged and counted under
OVERFLOW_LOG_S: Final = 10.0  # at most one "queue full" notify.failed a notifier this often
_NEW_LIMIT: Final = 10_000  # items put and not yet taken by the task (it was not running)
_RESTORE_LIMIT: Final = 10_000  # a previous daemon's items queued again at start

LaneKey = tuple[str, str]  # ("notify", notifier) or ("ping", job)


@dataclass(eq=False)
class _Entry:
    item: OutboxItem
    id: int | None  # in the outbox; None: not kept (no outbox, or it failed)
    seq: int  # the order items were made in
    tries: int = 0
    due: float = 0.0  # monotonic: when its next try may start


@dataclass(eq=False)
class _Lane:
    waiting: deque[_Entry] = field(default_factory=deque)  # never tried, oldest first
    retrying: list[_Entry] = field(default_factory=list)  # tried, waiting for `due`
    flying: int = 0
    flying_again: int = 0  # of those in flight, retries: newer items wait for them too

    def __len__(self) -> int:
        return len(self.waiting) + len(self.retrying)

    def next_entry(self, now: float) -> _Entry | None:
        """The oldest made entry, if it may start: a retry once it is due; a new item
        only while no older one waits for its retry, so a receiver that was down is not
        told `recovered` before the `failed` it ends."""
        if self.retrying:
            entry = min(self.retrying, key=lambda e: e.seq)
            if entry.due > now:
                return None
            self.retrying.remove(entry)
            return entry
        if self.flying_again:  # a retry in flight: the newer ones go once it is settled
            return None
        return self.waiting.popleft() if self.waiting else None

    def oldest(self) -> _Entry:
        """The oldest made entry that waits (tries start in order: a retrying one is older
        than any never tried)."""
        if self.retrying:
            entry = min(self.retrying, key=lambda e: e.seq)
            self.retrying.remove(entry)
            return entry
        return self.waiting.popleft()


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
        self.outbox = outbox
        self.on_result = on_result
        self.try_timeout = try_timeout
        self.first_retry = first_retry
        self.max_retry = max_retry
        self.window = window
        self.lane_limit = lane_limit
        self.lane_flying = lane_flying
        self.total_flying = total_flying
        # Every instant of delivery is the clock's: its monotonic seconds for retries and
        # lanes, its wall clock for an item's age (SystemClock unless told).
        self.clock: Clock = clock or SystemClock()
        self.notifiers: Mapping[str, NotifierSpec] = {}
        self.pings: Mapping[str, str] = {}
        self.jobs: frozenset[str] | None = None  # None: not told, every job counts
        self._new: list[OutboxItem] = []
        self._lanes: dict[LaneKey, _Lane] = {}  # only lanes with something queued or flying
        self._timers: list[float] = []  # heap of monotonic instants a retry falls due
        self._done: list[int] = []  # outbox ids to forget at the next pass
        # Per notifier: "queue full" give-ups not yet logged (how many, the last), and
        # when the last such line was logged (monotonic).
        self._overflow: dict[str, tuple[int, OutboxItem]] = {}
        self._overflow_logged: dict[str, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._seq = itertools.count()
        self._flying = 0
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._closed = False
        self._deadline: float | None = None  # monotonic; set by aclose
        self._ended: asyncio.Event | None = None
        self.senders = Senders(try_timeout=try_timeout, connections=total_flying, threads=threads)

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
                self.log.warning("notify.dropped", count=1, reason="closing")
                return
            if len(self._new) >= _NEW_LIMIT:
                lost = self._new.pop(0)
                self._overflowed(lost)
            self._new.append(item)
            if self._wake is not None:
                self._wake.set()
        except Exception as exc:  # noqa: BLE001  (telling must never stop scheduling)
            self._report_bug(exc)

    def keep(self) -> None:
        """Write what was put to the outbox now, rather than at the task's next pass: the
        daemon calls this after each run's notifications, so a crash right after a run
        ends (the log already says so) loses none of them. Never raises."""
        if self._wake is None or self._closing or not self._new:
            return  # before run(): its restore must come first; closing: the task has it
        try:
            self._intake()
        except Exception as exc:  # noqa: BLE001  (telling must never stop scheduling)
            self._report_bug(exc)

    async def run(self) -> None:
        """The delivery task: returns once `aclose()` is done with it."""
        self._wake = asyncio.Event()
        self._ended = asyncio.Event()
        try:
            self._restore()
            while True:
                try:
                    self._pass(self.clock.monotonic())
                except Exception as exc:  # noqa: BLE001  (a bug must not end delivery)
                    self._report_bug(exc)
                if self._closing and self._nothing_before_deadline(self.clock.monotonic()):
                    break
                await self._sleep()
        finally:
            await self._finish()
            self._closed = True
            self._ended.set()

    async def aclose(self, grace: float) -> None:
        """Take nothing more; try what is queued for up to `grace` seconds; end `run()`."""
        self._closing = True
        self._deadline = self.clock.monotonic() + max(0.0, grace)
        if self._wake is None:
            await asyncio.sleep(0)  # a run() task just created starts now
        if self._wake is None or self._ended is None:  # run() never started
            self._count_dropped(len(self._new))
            self._new.clear()
            self._closed = True
            return
        self._wake.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), grace + self.try_timeout + 5)

    # -- the task's passes -----------------------------------------------------------

    def _nothing_before_deadline(self, now: float) -> bool:
        """Closing: the grace is over, or nothing is left to try within it."""
        deadline = self._deadline_or(now)
        if now >= deadline or self._new:
            return now >= deadline
        return all(
            not lane.flying and not lane.waiting and all(e.due > deadline for e in lane.retrying)
            for lane in self._lanes.values()
        )

    def _deadline_or(self, default: float) -> float:
        return self._deadline if self._deadline is not None else default

    async def _sleep(self) -> None:
        """Until something is put, a try ends, a retry falls due or the grace is over."""
        assert self._wake is not None
        now = self.clock.monotonic()
        while self._timers and self._timers[0] <= now:
            heapq.heappop(self._timers)
        wake_at = self._timers[0] if self._timers else None
        if self._closing:
            deadline = self._deadline_or(now)
            wake_at = deadline if wake_at is None else min(wake_at, deadline)
        if wake_at is None:
            await self._wake.wait()
            self._wake.clear()
            return
        until = self.clock.now() + timedelta(seconds=max(0.0, wake_at - now))
        await sleep_until_woken(self.clock, until, self._wake)

    def _restore(self) -> None:
        """A previous daemon's items, queued again (they may be sent twice: at least once
        is the promise)."""
        if self.outbox is None:
            return
        stored = self.outbox.pending(_RESTORE_LIMIT)
        for row in stored:
            self._enqueue(row.item, row.id)

    def _pass(self, now: float) -> None:
        for name in list(self._overflow):
            if now >= self._overflow_logged.get(name, 0.0) + OVERFLOW_LOG_S:
                self._log_overflow(name)
        self._intake()
        self._forget()
        self._dispatch(now)
        self._forget()

    def _intake(self) -> None:
        """New items into the outbox (one write), then into their lanes."""
        items, self._new = self._new, []
        if not items:
            return
        ids: list[int] | None = None
        if self.outbox is not None:
            ids = self.outbox.add(items)
        if ids is None or len(ids) != len(items):
            ids = None
        for index, item in enumerate(items):
            self._enqueue(item, None if ids is None else ids[index])

    def _enqueue(self, item: OutboxItem, outbox_id: int | None) -> None:
        key: LaneKey = ("ping", item.job) if item.kind == "ping" else ("notify", item.notifier)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
        lane.waiting.append(_Entry(item, outbox_id, next(self._seq)))
        while len(lane) > self.lane_limit:
            oldest = lane.oldest()
            self._forget_later(oldest)
            self._overflowed(oldest.item)

    def _dispatch(self, now: float) -> None:
        """Start what may start: per lane in order, within both caps."""
        for key in list(self._lanes):
            if self._flying >= self.total_flying:
                return
            lane = self._lanes[key]
            started = False
            # A job's pings go one at a time: healthchecks.io must see a run's /start
            # before its end, and a run's end before the next run's /start.
            cap = 1 if key[0] == "ping" else self.lane_flying
            while lane.flying < cap and self._flying < self.total_flying:
                entry = lane.next_entry(now)
                if entry is None:
                    break
                self._start(key, lane, entry)
                started = True
            if not lane and not lane.flying:
                del self._lanes[key]
            elif started:  # to the back: the next pass serves the other lanes first
                self._lanes[key] = self._lanes.pop(key)

    def _start(self, key: LaneKey, lane: _Lane, entry: _Entry) -> None:
        lane.flying += 1
        lane.flying_again += 1 if entry.tries else 0
        self._flying += 1
        task = asyncio.get_running_loop().create_task(self._try(key, lane, entry))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _try(self, key: LaneKey, lane: _Lane, entry: _Entry) -> None:
        retried = entry.tries > 0
        error: SendError | None = None
        stale = False
        try:
            try:
                async with asyncio.timeout(self.try_timeout + 1):  # the senders' own, + slack
                    stale = not await self.senders.send(entry.item, self)
            except SendError as exc:
                error = exc
            except TimeoutError:
                error = SendError("timed out")
            except Exception as exc:  # noqa: BLE001  (the type only: a message may hold a URL)
                error = SendError(type(exc).__name__)
            entry.tries += 1
            self._settle(lane, entry, error, stale)
        finally:
            lane.flying -= 1
            lane.flying_again -= 1 if retried else 0
            self._flying -= 1
            if not lane and not lane.flying and self._lanes.get(key) is lane:
                del self._lanes[key]
            if self._wake is not None:
                self._wake.set()

    def _settle(self, lane: _Lane, entry: _Entry, error: SendError | None, stale: bool) -> None:
        item = entry.item
        if stale:
            self.log.debug("notify.stale", notifier=_name(item), job=item.job, job_event=item.event)
            self._forget_later(entry)
        elif error is None:
            # Seen at the default level (docs/alerting.md): a notifier's message, and a
            # ping that needed retries (its first failure was a warning); a ping at its
            # first try is debug, as every run sends two.
            quiet = item.kind == "ping" and entry.tries == 1
            (self.log.debug if quiet else self.log.info)(
                "notify.sent",
                notifier=_name(item),
                job=item.job,
                job_event=item.event,
                tries=entry.tries,
            )
            self._forget_later(entry)
            self._tell("sent", item)
        elif not error.retry:
            self._give_up(entry, error.error)
        else:
            delay = min(self.first_retry * 2 ** (entry.tries - 1), self.max_retry)
            if error.after is not None:  # the endpoint's Retry-After, within our bounds
                delay = min(max(delay, error.after), self.max_retry)
            if self.clock.now().timestamp() + delay > item.created + self.window:
                self._give_up(entry, error.error)
                return
            # Closing, a retry after the grace stays queued: kept in the outbox for the
            # next daemon, or counted as dropped.
            entry.due = self.clock.monotonic() + delay
            heapq.heappush(self._timers, entry.due)
            lane.retrying.append(entry)
            # The first failure of a notification is said at warning level: a dead or
            # mistyped endpoint shows at once, not after the 5 minutes of retries.
            level = self.log.warning if entry.tries == 1 else self.log.debug
            level(
                "notify.retry",
                notifier=_name(item),
                job=item.job,
                job_event=item.event,
                tries=entry.tries,
                delay_s=round(delay, 3),
                error=error.error,
            )

    # -- endings ---------------------------------------------------------------------

    def _give_up(self, entry: _Entry, error: str) -> None:
        self._forget_later(entry)
        self._give_up_item(entry.item, error)

    def _overflowed(self, item: OutboxItem) -> None:
        """An item given up because its lane was full. An endpoint far slower than the
        jobs fail overflows many a second: one `notify.failed` (with `count`) is logged
        per notifier at most every OVERFLOW_LOG_S, not one per item."""
        self._tell("failed", item)
        name = _name(item)
        count, _ = self._overflow.get(name, (0, item))
        self._overflow[name] = (count + 1, item)
        due = self._overflow_logged.get(name, float("-inf")) + OVERFLOW_LOG_S
        if self.clock.monotonic() >= due:
            self._log_overflow(name)
        elif count == 0:  # the first held back: a pass then logs it (loop time = monotonic)
            heapq.heappush(self._timers, due)

    def _log_overflow(self, name: str) -> None:
        count, item = self._overflow.pop(name, (0, None))
        if item is None or not count:
            return
        self._overflow_logged[name] = self.clock.monotonic()
        self.log.error(
            "notify.failed",
            notifier=name,
            job=item.job,
            job_event=item.event,
            error="queue full",
            count=count,
        )

    def _give_up_item(self, item: OutboxItem, error: str) -> None:
        self.log.error(
            "notify.failed", notifier=_name(item), job=item.job, job_event=item.event, error=error
        )
        self._tell("failed", item)

    def _tell(self, result: str, item: OutboxItem) -> None:
        if self.on_result is not None:
            try:
                self.on_result(_name(item), result)
            except Exception as exc:  # noqa: BLE001  (metrics must not stop delivery)
                self._report_bug(exc)

    def _forget_later(self, entry: _Entry) -> None:
        if entry.id is not None:
            self._done.append(entry.id)

    def _forget(self) -> None:
        if self._done and self.outbox is not None:
            ids, self._done = self._done, []
            self.outbox.done(ids)

    async def _finish(self) -> None:
        """The end of the task: stop the tries in flight (an outbox keeps them for the
        next daemon), count what is left, release the client and the threads."""
        tasks = list(self._tasks)
        flying = self._flying
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            self._intake()
        left = flying + len(self._new) + sum(len(lane) for lane in self._lanes.values())
        with contextlib.suppress(Exception):
            self._forget()
        for name in list(self._overflow):
            self._log_overflow(name)
        if self.outbox is None:
            self._count_dropped(left)
        self._lanes.clear()
        await self.senders.aclose()

    def _count_dropped(self, count: int) -> None:
        if count:
            self.log.warning("notify.dropped", count=count)

    def _report_bug(self, exc: Exception) -> None:
        with contextlib.suppress(Exception):
            self.log.error("notify.error", error=type(exc).__name__)


def _name(item: OutboxItem) -> str:
    return PING if item.kind == "ping" else item.notifier
