"""A database that stops answering (docs/replicas.md, "A database that hangs"): its server's
processes frozen with SIGSTOP, so every connection stays open and nothing comes back.
Two replicas of the real binary on a real PostgreSQL of the test's own, a job every
second. The replicas must go on: each says the database is unavailable within about two
seconds (log, liveness file), keeps beating, answers `crond ps` at once, tells every slot
it could not claim (`job.missed`, reason database); and when the server goes on,
`database.available`, runs again within a couple of seconds, and no false clock skew.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from crond.control.protocol import request_line
from tests.e2e.harness import eventually
from tests.e2e.replicas import Replica, attempts, doubled, frozen, schedules, start_replica
from tests.e2e.test_notify import get
from tests.pg import server as pg

SECOND = timedelta(seconds=1)
START = 20.0
FROZEN = 8.0  # seconds the database's processes are stopped
TOLD_WITHIN = 3.0  # database.unavailable after the freeze: 2 s, and room for a busy host
PS_WITHIN = 1.0  # a `ps` answered while the database hangs: ~ms, and room for load


def ask(replica: Replica, cmd: str, args: dict[str, Any]) -> tuple[float, bytes]:
    """How long the replica takes to answer `cmd` on its control socket, and the answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(5)
        sent = time.monotonic()
        conn.connect(str(replica.socket))
        conn.sendall(request_line(cmd, args))
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = conn.recv(65536)
            assert chunk, "the control socket closed without an answer"
            answer += chunk
        return time.monotonic() - sent, answer


def ps_seconds(replica: Replica) -> float:
    """How long the replica takes to answer `ps` (which must work)."""
    took, answer = ask(replica, "ps", {})
    assert b'"ok":true' in answer, answer
    return took


def _slots(first: datetime, last: datetime) -> set[datetime]:
    """The whole seconds from `first` to `last` (a job every second's slots)."""
    at = first.replace(microsecond=0) + SECOND
    slots = set()
    while at < last:
        slots.add(at)
        at += SECOND
    return slots


def _started_after(replicas: list[Replica], after: datetime, timeout: float) -> float:
    """Seconds from `after` to the first `job.started` logged after it by any replica."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        starts = [
            _slot(e["timestamp"])
            for r in replicas
            for e in r.daemon.drain()
            if e.get("event") == "job.started" and _slot(e["timestamp"]) > after
        ]
        if starts:
            return (min(starts) - after).total_seconds()
        time.sleep(0.02)
    seen = {r.name: r.daemon.names()[-6:] for r in replicas}
    raise AssertionError(f"no job.started within {timeout}s of the database's return: {seen}")


def _database_is(replica: Replica, state: str) -> bool:
    return (replica.liveness_json() or {}).get("database") == state


def _slot(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def told_missed(replica: Replica) -> set[datetime]:
    """The slots the replica logged missed for want of the database."""
    slots: set[datetime] = set()
    for e in replica.daemon.drain():
        if e.get("event") == "job.missed" and e.get("reason") == "database":
            first, count = _slot(e["first_slot"]), int(e["count"])
            assert _slot(e["last_slot"]) == first + (count - 1) * SECOND
            slots |= {first + i * SECOND for i in range(count)}
    return slots


def test_a_hung_database_stops_no_replica_and_every_slot_is_started_or_told(
    tmp_path: Path, group: list[Replica], own_pg: pg.Server
) -> None:
    url = own_pg.url()
    f = schedules(
        tmp_path / "s.yaml",
        url,
        'tick: {every: 1s, command: "true"}',
        replica_timeout="30s",
        metrics="127.0.0.1:0",
    )
    replicas = [start_replica(group, f, name, tmp_path) for name in ("r1", "r2")]
    for r in replicas:
        r.daemon.wait_for("state.opened", timeout=START)
    healthz = {
        r.name: f"http://{r.daemon.wait_for('metrics.serving', timeout=START)['address']}/healthz"
        for r in replicas
    }
    eventually(lambda: len(attempts(url, job="tick")) >= 2, 10, "two runs before the freeze")
    quiet_ps = max(ps_seconds(r) for r in replicas)

    froze_at = datetime.now(UTC)
    with frozen(own_pg):
        froze = time.monotonic()
        unavailable = {}
        for r in replicas:
            r.daemon.wait_for("database.unavailable", timeout=TOLD_WITHIN + 1)
            unavailable[r.name] = time.monotonic() - froze
        for r in replicas:
            says = functools.partial(_database_is, r, "unavailable")
            eventually(says, TOLD_WITHIN, f"{r.name}'s liveness file says so")
            code, body = get(healthz[r.name], timeout=PS_WITHIN)
            assert code == 200, body  # the loop beats
            assert json.loads(body)["database"] == "unavailable", body
        beats = {r.name: {(r.liveness_json() or {}).get("updated_at")} for r in replicas}
        refused_in, refusal = ask(replicas[0], "pause", {"jobs": ["tick"]})
        assert b"database is unavailable" in refusal, refusal  # DATABASE_AWAY, not a hang
        slowest_ps = slowest_healthz = 0.0
        while time.monotonic() - froze < FROZEN:
            for r in replicas:
                slowest_ps = max(slowest_ps, ps_seconds(r))
                sent = time.monotonic()
                assert get(healthz[r.name], timeout=PS_WITHIN)[0] == 200
                slowest_healthz = max(slowest_healthz, time.monotonic() - sent)
                beats[r.name].add((r.liveness_json() or {}).get("updated_at"))
            time.sleep(0.2)  # the freeze's length is the test's, not an event
        stopped_for = time.monotonic() - froze
    went_on, went_on_at = time.monotonic(), datetime.now(UTC)

    for r in replicas:
        r.daemon.wait_for("database.available", timeout=10)
    back = time.monotonic() - went_on
    first_after = _started_after(replicas, went_on_at, 5.0)
    print(
        f"\nunavailable after {unavailable}, ps {quiet_ps * 1000:.1f} ms quiet, "
        f"{slowest_ps * 1000:.1f} ms at most while frozen {stopped_for:.1f}s; pause refused "
        f"in {refused_in * 1000:.1f} ms, /healthz {slowest_healthz * 1000:.1f} ms at most; "
        f"available {back:.2f}s and a run {first_after:.2f}s after SIGCONT"
    )
    assert max(unavailable.values()) <= TOLD_WITHIN, unavailable
    assert slowest_ps <= PS_WITHIN, slowest_ps
    assert refused_in <= PS_WITHIN + 0.5, refused_in  # not asked while it is away
    assert slowest_healthz <= PS_WITHIN, slowest_healthz
    for name, seen in beats.items():
        assert len(seen - {None}) >= 4, f"{name}'s liveness file was not rewritten: {seen}"
    assert first_after <= 3.0, first_after

    # Every slot of the outage was started (claimed) by one replica, or told missed:
    # none vanished.
    outage = _slots(froze_at, went_on_at)
    assert len(outage) >= FROZEN - 1

    def untold() -> list[datetime]:
        ran = {a.slot for a in attempts(url, job="tick")}
        told: set[datetime] = set()
        for r in replicas:
            told |= told_missed(r)
            # A slot just after the outage may be skipped (overlap) by the replica that
            # claimed it: a claim in doubt had recorded a run, not yet given up (its row
            # holds the `overlap: skip` job busy until then). Told all the same.
            told |= {_slot(e["slot"]) for e in r.daemon.events if e.get("event") == "job.skipped"}
        # Told by each replica while the database hung; a waiting start missed once it
        # answered again is told by one replica, for the cluster (its claim dedupes).
        return sorted(outage - ran - told)

    with contextlib.suppress(AssertionError):
        eventually(lambda: not untold(), 5, "every slot of the outage started or told")
    assert untold() == []
    for r in replicas:  # each told what it saw while the database hung
        assert len(told_missed(r) & outage) >= len(outage) - 3, (r.name, sorted(outage))
    assert doubled(attempts(url, job="tick")) == {}
    for r in replicas:
        assert "cluster.clock_skew" not in [e.get("event") for e in r.daemon.drain()], r.name
        assert r.daemon.proc.poll() is None
