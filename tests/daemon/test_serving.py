"""The daemon's /healthz answer (crond/daemon/serving.py) follows the heartbeat: 200 with
the liveness JSON while the loop beats, 503 once three heartbeats and a second have
passed without a beat — with the real Loop, Heartbeat and recorder, on a fake clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import structlog

from crond.clock import FakeClock
from crond.daemon.heartbeat import Heartbeat
from crond.daemon.loop import Loop
from crond.daemon.recorder import StoreRecorder
from crond.daemon.serving import Serving
from crond.daemon.systemd import Systemd
from crond.daemon.telling import Telling
from tests.daemon.test_loop import FakeEffects

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def make() -> tuple[FakeClock, Heartbeat, Serving]:
    clock = FakeClock(T0)
    log = structlog.get_logger()
    loop = Loop(
        clock=clock, log=log, effects=FakeEffects(clock, []), heartbeat=timedelta(seconds=10)
    )
    recorder = StoreRecorder(None, log, clock)
    heartbeat = Heartbeat(loop, recorder, Systemd({}), log, lambda: None)
    telling = Telling(log=log, clock=clock, loop=loop, recorder=recorder)
    return clock, heartbeat, Serving(log=log, clock=clock, telling=telling, heartbeat=heartbeat)


def test_healthz_is_503_before_the_first_beat_200_after_it_and_503_once_stale() -> None:
    clock, heartbeat, serving = make()
    code, kind, _ = serving._healthz()
    assert (code, kind) == (503, "application/json")
    heartbeat.beat(clock.now())
    code, _, body = serving._healthz()
    payload = json.loads(body)
    assert code == 200
    assert payload["fresh"] is True
    assert payload["pid"] > 0
    # Three heartbeats (10 s each) and a second is the limit, as `crond health` allows.
    clock.set(T0 + timedelta(seconds=31))  # the loop did not beat meanwhile
    assert serving._healthz()[0] == 200
    clock.set(T0 + timedelta(seconds=31.2))
    code, _, body = serving._healthz()
    assert code == 503
    assert json.loads(body)["fresh"] is False
    heartbeat.beat(clock.now())  # the loop beats again: fresh again
    assert serving._healthz()[0] == 200
