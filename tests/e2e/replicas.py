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

import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import textwrap
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from tests.e2e.harness import Crond, Event
from tests.e2e.replica_check import Attempt as CheckedAttempt
from tests.e2e.replica_check import (
    Fault,
    JobSpec,
    Observed,
    Sample,
    epoch,
    parse_stamps,
    stamp_command,
)
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
                if not _still_the_run(pid, event.get("run_id")):
                    continue  # ended long ago: its pid may be another's now (the database's)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)


def _still_the_run(pid: int, run_id: object) -> bool:
    """Whether process `pid` is still the run `run_id` started (its environment says so):
    over a long soak the pids of runs long ended are given to other processes."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"CROND_RUN_ID={run_id}".encode() in environ.split(b"\0")


# --- a fault soak: bench/soak_replicas.py and tests/e2e/test_replica_faults.py ---------------


class Proxy:
    """A TCP proxy on loopback in front of a Unix socket (the private PostgreSQL's), run
    by a thread of its own. `hold()` makes it a network partition: it stops forwarding in
    both directions without closing anything, and accepts new connections without
    answering them; `release()` lets everything held through, in order."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._flowing = asyncio.Event()
        self._server: asyncio.Server | None = None
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the proxy did not start within 10 s")

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}?connect_timeout=5"

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._flowing.set()
        ready.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._flowing.wait()
            up_reader, up_writer = await asyncio.open_unix_connection(str(self.target))
        except (OSError, asyncio.CancelledError):
            writer.close()
            return
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await self._flowing.wait()
                data = await reader.read(65536)
                if not data:
                    break
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    def hold(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def release(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.set)

    def close(self) -> None:
        """Stop serving, and close every connection (no socket is left to the collector)."""
        self.release()
        with contextlib.suppress(TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0.01)  # the transports' own closes, which the loop calls soon


# The soak's jobs, all every second: each writes its own start and end stamps
# (tests/e2e/replica_check.py), with its replica's name from SOAK_REPLICA.
SOAK_JOBS: dict[str, tuple[JobSpec, float, str]] = {
    # name: (spec, the run's length in seconds, more YAML of the job)
    "skip": (JobSpec("skip", 1.0, "skip"), 0.3, ""),
    "allow": (JobSpec("allow", 1.0, "allow"), 2.5, "max_running: 2"),
    "replace": (JobSpec("replace", 1.0, "replace"), 0.5, ""),
    "slow": (JobSpec("slow", 1.0, "skip"), 2.0, ""),
    "each": (JobSpec("each", 1.0, "skip", "all"), 0.2, "replicas: all"),
}
FAULT_KINDS = ("kill", "stop", "pg_restart", "hang", "terminate")


def soak_jobs(stamps: Path) -> str:
    """The `jobs:` body of the soak's file (grace 10 s, so a slot the database kept from
    starting is told missed within the soak; history long enough for every row)."""
    out = []
    for name, (spec, seconds, more) in SOAK_JOBS.items():
        fields = [
            "every: 1s",
            f"overlap: {spec.overlap}",
            "grace: 10s",
            "history: 10000",
            f"command: {json.dumps(stamp_command(str(stamps), seconds))}",
        ]
        if more:
            fields.append(more)
        out.append(f"{name}: {{{', '.join(fields)}}}")
    return "\n".join(out)


@dataclass
class SoakPlan:
    seconds: float  # of faults, after all replicas are up
    seed: int
    kinds: tuple[str, ...] = FAULT_KINDS
    pause: tuple[float, float] = (6.0, 12.0)  # between faults
    hang: tuple[float, float] = (6.0, 12.0)
    down: tuple[float, float] = (1.0, 8.0)  # a killed replica, before its restart
    frozen_extra: tuple[float, float] = (1.0, 4.0)  # SIGSTOP for replica_timeout plus this
    quiet: float = 15.0  # after the last fault, before the stop
    count: int | None = None  # stop after this many faults (None: when `seconds` are up)
    heartbeat: float = 1.0
    replica_timeout: float = 5.0
    replicas: tuple[str, ...] = ("r1", "r2", "r3")
    fencing: str = "keep"  # daemon.fencing of every replica (docs/replicas.md)


class FaultSoak:
    """Three replicas of one file on a database reached through a `Proxy`, faults one at
    a time (`plan.kinds`, shuffled rounds of them, seeded), the liveness files sampled
    every 0.5 s; `run()` returns what replica_check.check reads. Every wait is bounded."""

    def __init__(
        self,
        base: Path,
        server: pg.Server,
        plan: SoakPlan,
        say: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.base, self.server, self.plan, self.say = base, server, plan, say
        self.rng = random.Random(plan.seed)
        self.group: list[Replica] = []
        self.current: dict[str, Replica] = {}
        self.faults: list[Fault] = []
        self.samples: list[Sample] = []
        self.notes: list[str] = []
        self.stamps = base / "stamps.txt"
        self._sampling = threading.Event()
        self.dbname = "soak"
        self.proxy: Proxy | None = None
        self.end_of_soak = 0.0

    # --- the pieces ---

    def _start(self, name: str) -> Replica:
        env = {"SOAK_REPLICA": name}
        replica = start_replica(self.group, self.file, name, self.base, env=env)
        self.current[name] = replica
        replica.daemon.wait_for("daemon.started", timeout=60)
        return replica

    def _sample(self) -> None:
        while not self._sampling.wait(0.5):
            at = time.time()
            for name, replica in list(self.current.items()):
                live = replica.liveness_json()
                age = None
                if live is not None and live.get("pid") == replica.daemon.proc.pid:
                    with contextlib.suppress(KeyError, ValueError, TypeError):
                        age = at - epoch(str(live["updated_at"]))
                self.samples.append(Sample(name, at, age))

    def _admin(self, query: str) -> int:
        """Run `query` on the soak's database over the Unix socket (never the proxy)."""
        with psycopg.connect(self.server.url(self.dbname), connect_timeout=5, autocommit=True) as c:
            c.execute("SET statement_timeout = '5s'")
            return len(c.execute(query).fetchall())

    # --- the faults ---

    def fault(self, kind: str) -> Fault:
        target = self.rng.choice(self.plan.replicas) if kind in ("kill", "stop") else ""
        start = time.time()
        detail = ""
        if kind == "kill":
            replica = self.current[target]
            replica.daemon.proc.kill()
            replica.daemon.proc.wait(10)
            down = self.rng.uniform(*self.plan.down)
            time.sleep(down)
            try:
                self._start(target)
            except AssertionError as exc:
                self.notes.append(f"{target} did not start again: {str(exc)[:300]}")
            detail = f"down {down:.1f}s"
        elif kind == "stop":
            replica = self.current[target]
            frozen = self.plan.replica_timeout + self.rng.uniform(*self.plan.frozen_extra)
            replica.daemon.signal(signal.SIGSTOP)
            time.sleep(frozen)
            replica.daemon.signal(signal.SIGCONT)
            detail = f"frozen {frozen:.1f}s"
        elif kind == "pg_restart":
            self.server.halt(timeout=10)
            self.server.restart(timeout=30)
        elif kind == "hang":
            assert self.proxy is not None
            held = self.rng.uniform(*self.plan.hang)
            self.proxy.hold()
            time.sleep(held)
            self.proxy.release()
            detail = f"held {held:.1f}s"
        elif kind == "terminate":
            ended = self._admin(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            detail = f"{ended} backends"
        else:
            raise ValueError(kind)
        fault = Fault(kind, target, start, time.time())
        self.faults.append(fault)
        at = time.strftime("%H:%M:%S", time.localtime(start))
        self.say(f"  {at} {kind} {target} {detail} ({fault.end - start:.1f}s)".replace("  ", " "))
        return fault

    # --- the whole ---

    def run(self) -> Observed:
        plan = self.plan
        with psycopg.connect(self.server.url(), autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'CREATE DATABASE "{self.dbname}"')
        self.proxy = Proxy(self.server.socket)
        self.file = schedules(
            self.base / "soak.yaml", self.proxy.url(self.dbname), soak_jobs(self.stamps),
            heartbeat=f"{plan.heartbeat:g}s", replica_timeout=f"{plan.replica_timeout:g}s",
            fencing=plan.fencing,
        )  # fmt: skip
        sampler = threading.Thread(target=self._sample, daemon=True)
        try:
            for name in plan.replicas:
                self._start(name)
            sampler.start()
            first = time.time() + 1.0
            until = first + plan.seconds
            kinds: list[str] = []
            time.sleep(self.rng.uniform(2.0, 4.0))
            while time.time() < until and (plan.count is None or len(self.faults) < plan.count):
                if not kinds:
                    kinds = list(plan.kinds)
                    self.rng.shuffle(kinds)
                self.fault(kinds.pop())
                pause = min(self.rng.uniform(*plan.pause), max(until - time.time(), 0.0))
                time.sleep(pause)
            time.sleep(plan.quiet)
            last = time.time() - 3.0
        finally:
            self._sampling.set()
            self._stop_all(deadline=time.monotonic() + 10)
            reap(self.group)
            self.end_of_soak = time.time()
            self.proxy.close()
        return Observed(
            jobs=[spec for spec, _, _ in SOAK_JOBS.values()],
            replicas=list(plan.replicas),
            heartbeat_s=plan.heartbeat,
            replica_timeout_s=plan.replica_timeout,
            span=(first, last),
            stamps=parse_stamps(self.stamps.read_text() if self.stamps.exists() else ""),
            events=[
                {**event, "_replica": replica.name}
                for replica in self.group
                for event in replica.daemon.events
            ],
            attempts=self._attempts(),
            samples=self.samples,
            faults=self.faults,
        )

    def _stop_all(self, deadline: float) -> None:
        """SIGTERM every replica at once; one still running at `deadline` is noted (and
        killed by `reap`)."""
        for replica in self.current.values():
            with contextlib.suppress(ProcessLookupError):
                replica.daemon.signal(signal.SIGCONT)
                replica.daemon.signal(signal.SIGTERM)
        for name, replica in self.current.items():
            try:
                replica.daemon.exited(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.notes.append(f"{name} did not exit within 10 s of SIGTERM")

    def save(self, obs: Observed) -> None:
        """Write what the checks read under `base` (events.jsonl, faults.jsonl,
        attempts.jsonl, samples.jsonl; the stamps are there already), to look into."""
        parts: dict[str, Iterable[Any]] = {
            "events": obs.events,
            "faults": [vars(f) for f in obs.faults],
            "attempts": [vars(a) for a in obs.attempts],
            "samples": [vars(s) for s in obs.samples],
        }
        for name, rows in parts.items():
            text = "".join(json.dumps(row, default=str) + "\n" for row in rows)
            (self.base / f"{name}.jsonl").write_text(text)

    def _attempts(self) -> list[CheckedAttempt]:
        rows = attempts(self.server.url(self.dbname))
        return [
            CheckedAttempt(
                r.job,
                r.slot.timestamp(),
                r.attempt,
                r.replica,
                r.run_id,
                r.outcome,
                r.started.timestamp(),
                r.finished.timestamp() if r.finished else None,
            )
            for r in rows
        ]


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
