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
