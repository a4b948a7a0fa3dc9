"""A replica's poll of its cluster (crond/daemon/polling.py): 10,000 pauses set on another
replica are applied here at once and logged in slices, the loop's turn between two, as
crond/daemon/pausing.py does for the replica that was asked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from structlog.typing import FilteringBoundLogger

from crond.clock import FakeClock
from crond.daemon.loop import Loop
from crond.daemon.polling import Polling
from crond.daemon.recorder import StoreRecorder
from crond.store.base import PauseRow, Poll
from tests.daemon.test_loop import Events, FakeEffects

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
JOBS = 10_000
LINE_S = 0.00005  # what a log line costs the real daemon (rendered, written), about


class SlowEvents(Events):
    """Events whose every line takes LINE_S of the loop's time, as a real one does."""

    def _slow(self, event: str, **kw: Any) -> None:
        until = time.perf_counter() + LINE_S
        while time.perf_counter() < until:
            pass
        self._add(event, **kw)

    info = warning = error = debug = _slow


class Answers:
    """A recorder whose database answers each poll with `pauses`."""

    replica = "r1"
    store = object()

    def __init__(self, pauses: dict[str, PauseRow]) -> None:
        self.pauses = pauses

    async def ask(self, call: Callable[..., Any], force: bool = False) -> Poll:
        return Poll(self.pauses, [], 0)


def test_ten_thousand_pauses_of_the_cluster_are_logged_in_slices() -> None:
    clock, events = FakeClock(T0), SlowEvents()
    log = cast(FilteringBoundLogger, events)
    loop = Loop(clock=clock, log=log, effects=FakeEffects(clock, []), heartbeat=timedelta(1))
    rows = {f"j{i}": PauseRow(f"j{i}", T0, None, None, '{"user":"ops"}') for i in range(JOBS)}
    polling = Polling(log=log, clock=clock, loop=loop, recorder=cast(StoreRecorder, Answers(rows)))
    gaps: list[float] = []

    async def main() -> None:
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticking = asyncio.ensure_future(ticker())
        await asyncio.sleep(0)
        await polling.poll()
        done.set()
        await ticking

    asyncio.run(main())
    assert len(events.named("job.paused")) == JOBS
    assert set(loop.core.pauses.listing()) == set(rows)
    # The loop had its turn every few milliseconds, never once for the whole half second
    # the lines cost.
    assert max(gaps) < 0.15, max(gaps)


class Cluster:
    """The cluster's database as a poll reads it: the pauses in it now, and who resumed."""

    def __init__(self) -> None:
        self.pauses: dict[str, PauseRow] = {}
        self.during_read: Callable[[], None] = lambda: None  # what happens meanwhile

    def poll(self, after: int) -> Poll:
        read = Poll(dict(self.pauses), [], 0)
        self.during_read()  # the poll's answer is already what it is
        return read

    def resumed_by(self, name: str, since: datetime) -> str:
        return '{"user":"r2-caller"}'


class Asks:
    """A recorder whose every ask is answered by `Cluster` at once."""

    replica = "r1"
    store = object()

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def ask(self, call: Callable[..., Any], force: bool = False) -> Any:
        return call(self.cluster)


def polled(clock: FakeClock) -> tuple[Loop[Any], Polling, Cluster, Events]:
    events = Events()
    log = cast(FilteringBoundLogger, events)
    loop: Loop[Any] = Loop(
        clock=clock, log=log, effects=FakeEffects(clock, []), heartbeat=timedelta(1)
    )
    cluster = Cluster()
    polling = Polling(log=log, clock=clock, loop=loop, recorder=cast(StoreRecorder, Asks(cluster)))
    return loop, polling, cluster, events


def test_a_pause_begun_here_and_resumed_elsewhere_before_any_poll_saw_it_is_resumed() -> None:
    # Paused through this replica's socket (in the database, noted), resumed through
    # another's before this one's next poll: that poll finds it gone and frees the job.
    clock = FakeClock(T0)
    loop, polling, _, events = polled(clock)
    loop.pause("x", None)
    polling.noted(["x"], clock.now())
    clock.advance(timedelta(seconds=1))
    asyncio.run(polling.poll())
    assert loop.core.pauses.listing() == {}
    (resumed,) = events.named("job.resumed")
    assert (resumed["job"], resumed["via"], resumed["by"]) == (
        "x",
        "cluster",
        {"user": "r2-caller"},
    )


def test_a_pause_begun_here_while_a_poll_was_reading_is_not_taken_for_resumed() -> None:
    # The poll read the database just before this replica's own pause was written: the
    # pause is newer than what the poll read, and stays.
    clock = FakeClock(T0)
    loop, polling, cluster, events = polled(clock)

    def paused_meanwhile() -> None:
        clock.advance(timedelta(milliseconds=5))
        cluster.pauses["x"] = PauseRow("x", clock.now(), None, None, "{}")
        loop.pause("x", None)
        polling.noted(["x"], clock.now())

    cluster.during_read = paused_meanwhile
    asyncio.run(polling.poll())
    assert set(loop.core.pauses.listing()) == {"x"}
    cluster.during_read = lambda: None
    asyncio.run(polling.poll())  # the next poll sees it in the database: still paused
    assert set(loop.core.pauses.listing()) == {"x"}
    assert events.named("job.resumed") == []
    del cluster.pauses["x"]  # resumed elsewhere, seen by a poll: freed here
    asyncio.run(polling.poll())
    assert loop.core.pauses.listing() == {}
