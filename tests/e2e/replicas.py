"""Replicas of the real `crond` on one PostgreSQL database, and the table that is the
union of their runs: for tests/e2e/test_replicas.py and bench/bench_replicas.py.

A replica is a `crond run FILE --replica NAME --state-dir DIR` of its own (the harness's
`Crond`), whose state directory holds only its control socket: with a database every
record is in the database (docs/state.md). What the replicas did together is read from
the table `crond_attempts`, never from one replica's log: a slot is run by whichever
replica's claim commits, so only the table shows each slot once, or twice, or not at all.
The table keeps a job's last `history` attempts (100 by default): a test reading it runs
each job fewer times than that (crond_claims keeps every claim 35 days; bench_replicas
counts its 10-minute runs there).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import textwrap
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from tests.e2e.harness import Crond, Event
from tests.pg import server as pg

# Fast enough for a test of a few seconds; replica_timeout must be >= 3 heartbeats.
TIMING = {"heartbeat": "1s", "replica_timeout": "3s", "shutdown_timeout": "2s"}


def schedules(
    path: Path, url: str | None, jobs: str, cluster: str = "default", **daemon: str
) -> Path:
    """Write a schedules file whose daemon block names the database `url` (None: left to
    CROND_DATABASE_URL) and `cluster`, with TIMING and `daemon`; `jobs` is the YAML of the
    `jobs:` mapping's body (dedented here)."""
    fields: dict[str, str] = {"cluster": cluster, **TIMING, **daemon}
    if url is not None:
        fields["database"] = url
    head = "".join(f"  {key}: {json.dumps(value)}\n" for key, value in fields.items())
    body = textwrap.indent(textwrap.dedent(jobs).strip("\n"), "  ")
    path.write_text(f"daemon:\n{head}jobs:\n{body}\n")
    return path


@dataclass
class Replica:
    """One running replica: its name, its daemon and its own state directory."""

    name: str
    daemon: Crond
    state_dir: Path
    liveness: Path

    @property
    def socket(self) -> Path:
        return self.state_dir / "crond.sock"

    def liveness_json(self) -> dict[str, Any] | None:
        """The liveness file as written last, or None before the first write."""
        try:
            value = json.loads(self.liveness.read_text())
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def text(self) -> str:
        """Everything it wrote to stderr so far: its events as JSON, then other lines."""
        lines = [json.dumps(e) for e in self.daemon.events] + self.daemon.other
        return "\n".join(lines)


def start_replica(
    group: list[Replica], file: Path, name: str, base: Path, env: Mapping[str, str] | None = None
) -> Replica:
    """Start `crond run FILE --replica NAME` with its own state directory and liveness
    file under `base`; added to `group` (which `reap` ends)."""
    state = base / f"state-{name}"
    state.mkdir(parents=True, exist_ok=True)
    live = base / f"live-{name}.json"
    args = [str(file), "--replica", name, "--state-dir", str(state), "--liveness-file", str(live)]
    replica = Replica(name, Crond(args, env=env), state, live)
    group.append(replica)
    return replica


# --- the table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """A row of crond_attempts."""

    cluster: str
    run_id: str
    job: str
    slot: datetime
    attempt: int
    started: datetime
    finished: datetime | None
    outcome: str | None
    exit_code: int | None
    replica: str


COLUMNS = "cluster, run_id, job, slot, attempt, started, finished, outcome, exit_code, replica"


def attempts(url: str, cluster: str | None = None, job: str | None = None) -> list[Attempt]:
    """The rows of crond_attempts (of `cluster` and `job` when given), oldest slot first;
    none while the table does not exist yet."""
    query = f"SELECT {COLUMNS} FROM crond_attempts WHERE true"
    params: list[str] = []
    if cluster is not None:
        query += " AND cluster = %s"
        params.append(cluster)
    if job is not None:
        query += " AND job = %s"
        params.append(job)
    with psycopg.connect(url, connect_timeout=5) as conn:
        exists = conn.execute("SELECT to_regclass('crond_attempts') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return []
        rows = conn.execute(query + " ORDER BY slot, id", params).fetchall()
    return [Attempt(*row) for row in rows]


def by_slot(rows: Iterable[Attempt]) -> dict[datetime, list[Attempt]]:
    """The rows of each slot (first attempts only: a retry is the same start's sequel)."""
    slots: dict[datetime, list[Attempt]] = defaultdict(list)
    for row in rows:
        if row.attempt == 1:
            slots[row.slot].append(row)
    return dict(sorted(slots.items()))


def doubled(rows: Iterable[Attempt], copies: int = 1) -> dict[datetime, list[str]]:
    """The slots not started exactly `copies` times (by distinct replicas when more than
    one), with the replicas that started them: empty when each slot ran as it should."""
    wrong = {}
    for slot, runs in by_slot(rows).items():
        replicas = [run.replica for run in runs]
        if len(runs) != copies or len(set(replicas)) != copies:
            wrong[slot] = replicas
    return wrong


def gaps(slots: Iterable[datetime], period: timedelta) -> list[datetime]:
    """The slots missing between the first and the last of `slots` (every `period`)."""
    seen = sorted(set(slots))
    missing = []
    for before, after in itertools.pairwise(seen):
        at = before + period
        while at < after:
            missing.append(at)
            at += period
    return missing


def last_slot(url: str, cluster: str | None = None, job: str | None = None) -> datetime | None:
    rows = attempts(url, cluster, job)
    return max((row.slot for row in rows), default=None)


def slot_after(
    url: str, instant: datetime, cluster: str | None = None, job: str | None = None
) -> bool:
    """Whether a slot later than `instant` has a row (for `eventually`)."""
    last = last_slot(url, cluster, job)
    return last is not None and last > instant


def now() -> datetime:
    return datetime.now(UTC)


def events(replicas: Iterable[Replica], name: str) -> list[Event]:
    """The events `name` logged so far by any of `replicas`."""
    return [e for r in replicas for e in r.daemon.drain() if e.get("event") == name]


def wait_any(
    replicas: Iterable[Replica],
    name: str,
    where: Callable[[Event], bool] | None = None,
    timeout: float = 10.0,
) -> tuple[Replica, Event]:
    """The first replica (in order) to have logged an event `name` matching `where`, and
    that event: whichever replica won a slot is the one that logs it."""
    among = list(replicas)
    deadline = time.monotonic() + timeout
    while True:
        for replica in among:
            for event in replica.daemon.drain():
                if event.get("event") == name and (where is None or where(event)):
                    return replica, event
        if time.monotonic() > deadline:
            seen = {r.name: r.daemon.names()[-8:] for r in among}
            raise AssertionError(f"no {name} event within {timeout}s; last events: {seen}")
        time.sleep(0.05)


def reap(replicas: Iterable[Replica]) -> None:
    """Kill every replica still running, then the process group of every run they
    started: a replica killed with SIGKILL leaves its runs (each in a session of its
    own) running, and a test must leave no `sleep 600` behind."""
    for replica in replicas:
        replica.daemon.kill()
        for event in replica.daemon.drain():
            pid = event.get("pid")
            if event.get("event") == "job.started" and isinstance(pid, int):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)


# --- a database that stops answering ------------------------------------------------------


def _server_pids(server: pg.Server) -> list[int]:
    """The postmaster (from its pid file) and every process it forked (from /proc)."""
    head = (server.directory / "data" / "postmaster.pid").read_text().split("\n", 1)[0]
    postmaster = int(head)
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == postmaster:
            children.append(int(entry.name))
    return [postmaster, *children]


@contextlib.contextmanager
def frozen(server: pg.Server) -> Iterator[None]:
    """The server's processes stopped (connections open, nothing answered), and always
    continued again, whatever happens in between."""
    pids = _server_pids(server)
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
