"""What the heartbeat is given when it is built (crond/daemon/heartbeat.py): a replica's
work for its cluster, called once a beat, and who hears that the replica's name is a live
one's when the database first answers at a beat."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import structlog

from crond.clock import FakeClock
from crond.daemon.heartbeat import Heartbeat
from crond.daemon.loop import Loop
from crond.daemon.recorder import StoreRecorder
from crond.daemon.systemd import Systemd
from crond.store.base import ReplicaTaken, Store
from tests.daemon.test_loop import FakeEffects

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def taken(_aside: bool) -> Store:
    raise ReplicaTaken("replica r1 is taken")


async def test_a_beat_calls_the_cluster_and_on_taken_it_was_built_with() -> None:
    clock = FakeClock(T0)
    log = structlog.get_logger()
    loop = Loop(
        clock=clock, log=log, effects=FakeEffects(clock, []), heartbeat=timedelta(seconds=10)
    )
    recorder = StoreRecorder(taken, log, clock, replica="r1")
    beats: list[datetime] = []
    refused: list[ReplicaTaken] = []
    heartbeat = Heartbeat(
        loop, recorder, Systemd({}), log, lambda: None, on_taken=refused.append,
        cluster=beats.append,
    )  # fmt: skip
    heartbeat.beat(T0)  # the open goes on off the loop (a replica's store)
    assert recorder.opening is not None
    await asyncio.wait({recorder.opening})
    await asyncio.sleep(0)  # its done callbacks
    recorder.close()
    assert [str(exc) for exc in refused] == ["replica r1 is taken"]
    assert beats == [T0]
