"""A replica's checks of its cluster (crond/daemon/cluster.py) on plain values: clock skew
against the database's clock, and which replicas run another file or version. The real
thing, with real replicas and a real database, is tests/e2e/test_replicas.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

from structlog.typing import FilteringBoundLogger

from crond import __version__
from crond.clock import FakeClock
from crond.config import loader
from crond.daemon.cluster import Cluster, given_problems, replica_name
from crond.daemon.loop import Loop
from crond.daemon.recorder import StoreRecorder
from crond.store.base import AttemptRow, ReplicaRow
from tests.daemon.test_loop import Events, FakeEffects

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def cluster(lost: list[AttemptRow] | None = None) -> tuple[Cluster, Events]:
    clock, events = FakeClock(T0), Events()
    log = cast(FilteringBoundLogger, events)
    loop = Loop(
        clock=clock, log=log, effects=FakeEffects(clock, []), heartbeat=timedelta(seconds=1)
    )
    recorder = StoreRecorder(None, log, clock, replica="r1")
    on_lost = None if lost is None else lost.append
    c = Cluster(log=log, clock=clock, loop=loop, recorder=recorder, on_lost=on_lost)
    c.digest = "a" * 64
    return c, events


def replica(
    name: str, digest: str | None, beat: datetime, version: str = __version__
) -> ReplicaRow:
    return ReplicaRow(name, "host", 1, None, T0, beat, version, digest)


def test_clock_skew_is_said_once_past_a_second_and_again_when_it_is_back() -> None:
    c, events = cluster()
    c._clock(T0, T0 + timedelta(milliseconds=900), 0.0)
    assert events.items == []
    # 1.2 s apart, but a 0.6 s round trip could hide 0.3 s of it: not said
    c._clock(T0, T0 + timedelta(seconds=1.2), 0.6)
    assert events.items == []
    c._clock(T0, T0 - timedelta(seconds=2.5), 0.01)
    c._clock(T0, T0 - timedelta(seconds=2.6), 0.01)  # still skewed: not said again
    assert [(e, kw["skew_s"]) for e, kw in events.items] == [("cluster.clock_skew", 2.5)]
    c._clock(T0, T0, 0.01)
    assert [e for e, _ in events.items] == ["cluster.clock_skew", "cluster.clock_ok"]


def test_replicas_running_another_file_are_named_once_per_change() -> None:
    c, events = cluster()
    same = replica("r2", "a" * 64, T0)
    other = replica("r3", "b" * 64, T0)
    starting = replica("r4", None, T0)  # has not said its file yet
    dead = replica("r5", "c" * 64, T0 - timedelta(minutes=5))  # not beating: not compared
    c._compare([replica("r1", "a" * 64, T0), same, other, starting, dead], T0)
    c._compare([same, other, starting, dead], T0)
    assert [e for e, _ in events.items] == ["cluster.config_mismatch"]
    said = events.named("cluster.config_mismatch")[0]
    assert said["others"] == [{"replica": "r3", "digest": "b" * 12, "version": __version__}]
    older = replica("r2", "a" * 64, T0, version="0.0.1")
    c._compare([older, other], T0)  # who differs changed: said again
    assert len(events.named("cluster.config_mismatch")) == 2
    c._compare([same], T0)
    assert events.items[-1][0] == "cluster.config_match"


def test_a_replicas_name_and_the_database_come_from_flag_environment_file_host() -> None:
    cfg = loader.loads("daemon: {replica: from-file}\njobs:\n  a: {every: 1m, command: x}\n")
    assert replica_name("flag", cfg, {"CROND_REPLICA": "env"}) == "flag"
    assert replica_name(None, cfg, {"CROND_REPLICA": "env"}) == "env"
    assert replica_name(None, cfg, {}) == "from-file"
    assert given_problems(None, {"CROND_REPLICA": " x"}) == [
        'CROND_REPLICA: " x" starts or ends with a space; remove it (a replica name is 1 to '
        "200 printable characters, without /)"
    ]
    assert given_problems("ok", {"CROND_REPLICA": " x"}) == []  # the flag wins: env unread


def test_a_run_closed_as_lost_is_logged_and_told_to_the_on_lost_given() -> None:
    lost: list[AttemptRow] = []
    c, events = cluster(lost)
    row = AttemptRow(1, "run-1", "a", T0, 1, T0, None, None, None, None, [], "r2")
    c._lost(row)
    assert lost == [row]
    assert events.named("job.lost") == [
        {"job": "a", "run_id": "run-1", "slot": "2026-12-02T12:00:00Z", "replica": "r2"}
    ]
