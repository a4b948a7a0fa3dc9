"""Replicas over PostgreSQL: what the database costs a start, and whether three replicas
start every slot exactly once, with one of them SIGKILLed midway or not.

    .venv/bin/python bench/bench_replicas.py [--quick] [--minutes N]

The database is a private PostgreSQL started by the script (tests/pg/server.py) on this
machine, reached over its Unix socket, with durability on as in production (fsync,
synchronous commits, full-page writes); it is removed at the end. Figures:

1. crond's own start lag (`lag_ms` of job.started, slot to spawned, as bench_lag.py
   measures it) and the job's own (its write), one job `every: 1s`, with the state in
   SQLite (a plain `crond run`) and then in the database (`--replica r1`): medians;
2. three replicas of one file of 200 jobs `every: 5s` for N minutes (10; --quick: 1):
   the slots expected (every job's, from the first slot all three were up to the last
   before the stop) against those claimed (crond_claims): missed; slots with two first
   attempts in crond_attempts: duplicates; and the jobs' own writes a slot (200 each),
   with the starts' lag from them;
3. the same with one replica SIGKILLed halfway (its unfinished runs closed as lost by a
   survivor after replica_timeout, 30 s by default);
4. the load one replica puts on PostgreSQL: transactions a second (the delta of
   pg_stat_database.xact_commit of its database), with 200 jobs not due (idle) and
   200 jobs every 5 s (busy).

The daemon's timings are the defaults (heartbeat 10 s, replica_timeout 30 s). Nothing is
asserted; duplicates and missed are expected to be 0. Takes 2N + 4 minutes (~6 with
--quick); run the full one on a quiet machine.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import common
import psycopg
from common import CrondSystem, JobDef, Launched, row, summary

from tests.pg import server as pg

PERIOD = 5  # seconds between the 200 jobs' slots
COUNT = 200
# As production: a database that loses no commit.
DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


def head(url: str, **more: str) -> str:
    """The daemon block naming the database (JSON strings are YAML)."""
    fields = {"database": url, **more}
    return "daemon:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in fields.items())


def fresh(server: pg.Server, name: str) -> str:
    """A new database `name` on `server`: its URL (each figure starts from empty tables)."""
    with psycopg.connect(server.url(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return server.url(name)


# --- 1. start lag ----------------------------------------------------------------------------


def lag_of(system: CrondSystem, seconds: int) -> tuple[list[float], list[float]]:
    """One job every second for `seconds` slots: the job's lags and crond's own lag_ms."""

    def make(out: Path) -> list[JobDef]:
        return common.stamp_jobs(1, out, every="1s")

    own: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp:
        rounds = common.slot_rounds(
            system, make, 1, seconds, Path(tmp),
            on_stop=lambda w: own.extend(common.own_lags(w / "crond.log")),
        )  # fmt: skip
    return [lag for r in rounds for lag in r.lags], own


def show_lag(server: pg.Server, seconds: int) -> None:
    url = fresh(server, "lag")
    stores = {
        "SQLite": CrondSystem(),
        "PostgreSQL": CrondSystem(head=head(url), args=["--replica", "r1"]),
    }
    medians: dict[str, float] = {}
    for name, system in stores.items():
        lags, own = lag_of(system, seconds)
        row(f"1 job every: 1s, {name}: job's lag", "crond", summary(lags, p99=True))
        row(f"  crond's own lag_ms, {name}", "crond", summary(own, p99=True))
        if own:
            medians[name] = statistics.median(own)
    if len(medians) == 2:
        extra = medians["PostgreSQL"] - medians["SQLite"]
        row("  the database's share of lag_ms", "crond", f"{extra:+.2f} ms (medians)")


# --- 2, 3. three replicas --------------------------------------------------------------------


@dataclass
class Tally:
    expected: int
    claimed: int
    duplicates: int
    missed: int
    lost: int
    by_replica: dict[str, int]


def tally(url: str, jobs: Sequence[str], first: float, last: float) -> Tally:
    """Every job's slots (multiples of PERIOD) in [first, last] against the claims of
    crond_claims (kept 35 days, where crond_attempts keeps a job's last `history`, 100
    by default: 8 minutes of a job every 5 s); duplicates are slots with more than one
    first attempt in crond_attempts. No tables: every slot missed."""
    since = datetime.fromtimestamp(first, UTC)
    until = datetime.fromtimestamp(last, UTC)
    window = (since, until)
    claims: list[tuple[str, datetime, str]] = []
    twice: list[tuple[int]] = []
    lost: tuple[int] | None = (0,)
    with psycopg.connect(url) as conn:
        try:
            claims = conn.execute(
                "SELECT job, slot, replica FROM crond_claims "
                "WHERE copy = '' AND slot BETWEEN %s AND %s",
                window,
            ).fetchall()
            twice = conn.execute(
                "SELECT count(*) - 1 FROM crond_attempts WHERE attempt = 1 "
                "AND slot BETWEEN %s AND %s GROUP BY job, slot HAVING count(*) > 1",
                window,
            ).fetchall()
            lost = conn.execute(
                "SELECT count(*) FROM crond_attempts WHERE outcome = 'lost'"
            ).fetchone()
        except psycopg.errors.UndefinedTable:  # the replicas never used the database
            pass
    slots = [
        since + timedelta(seconds=PERIOD * i) for i in range(int((last - first) // PERIOD) + 1)
    ]
    claimed = {(job, slot) for job, slot, _ in claims}
    by_replica: dict[str, int] = {}
    for *_, replica in claims:
        by_replica[replica] = by_replica.get(replica, 0) + 1
    expected = [(job, slot) for job in jobs for slot in slots]
    return Tally(
        expected=len(expected),
        claimed=sum(1 for key in expected if key in claimed),
        duplicates=sum(n for (n,) in twice),
        missed=sum(1 for key in expected if key not in claimed),
        lost=lost[0] if lost else 0,
        by_replica=dict(sorted(by_replica.items())),
    )


def launch_three(url: str, work: Path, jobs: list[JobDef]) -> list[Launched]:
    """Three replicas of one file (the same bytes in three directories: one digest)."""
    launched = []
    for name in ("r1", "r2", "r3"):
        home = work / name
        home.mkdir()
        system = CrondSystem(head=head(url), args=["--replica", name])
        launched.append(system.launch(jobs, home, ready_timeout=120))
    return launched


def cluster_run(server: pg.Server, name: str, minutes: float, kill: bool) -> None:
    url = fresh(server, name)
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp:
        work = Path(tmp)
        out = work / "stamps.txt"
        jobs = common.stamp_jobs(COUNT, out, every=f"{PERIOD}s")
        launched = launch_three(url, work, jobs)
        try:
            up = time.time()
            first = up - up % PERIOD + PERIOD
            end = up + minutes * 60
            killed = None
            while time.time() < end:
                if kill and killed is None and time.time() >= up + minutes * 30:
                    launched[0].proc.kill()  # SIGKILL: no goodbye, its runs left open
                    launched[0].proc.wait(10)
                    killed = time.time()
                time.sleep(0.5)
            last = time.time() - PERIOD  # a slot of the last few ms may still be starting
            last -= last % PERIOD
            time.sleep(2)
            result = tally(url, [j.name for j in jobs], first, last)
            starts = {
                slot: sorted(values)
                for slot, values in common.by_slot(common.stamps(out), PERIOD).items()
                if first <= slot <= last
            }
        finally:
            for each in launched:
                each.stop()
    label = "three replicas, one SIGKILLed" if kill else "three replicas"
    row(
        f"{label}: {COUNT} jobs every {PERIOD}s",
        "crond",
        f"{minutes:g} min: slots expected {result.expected}, claimed {result.claimed}, "
        f"duplicates {result.duplicates}, missed {result.missed}",
    )
    row("  claims by replica", "", f"{result.by_replica}; lost {result.lost}")
    # The jobs' own writes, a count independent of the tables: COUNT a slot, no more.
    written = [len(v) for v in starts.values()]
    if written:
        row("  runs written a slot", "", f"min {min(written)}, max {max(written)} "
            f"(of {COUNT}, {len(written)} slots)")  # fmt: skip
    lasts = [(v[-1] - slot) * 1000 for slot, v in starts.items() if v]
    medians = [(statistics.median(v) - slot) * 1000 for slot, v in starts.items() if v]
    row("  start lag, median of a slot", "crond", summary(medians))
    row("  start lag, last of a slot", "crond", summary(lasts))
    if killed is not None:
        row("  killed at", "", f"{killed - up:.0f} s into the run")


# --- 4. the load on PostgreSQL ---------------------------------------------------------------


def commits(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        got = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(got[0]) if got else 0


def load_of(server: pg.Server, name: str, jobs: list[JobDef], seconds: float) -> float:
    """Transactions a second committed in a fresh database while one replica runs `jobs`
    (after a warm-up of one period and a heartbeat). Backends report their counts at most
    a second apart when busy and ten when idle, so the window is long beside that lag."""
    url = fresh(server, name)
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp:
        system = CrondSystem(head=head(url), args=["--replica", "r1"])
        launched = system.launch(jobs, Path(tmp), ready_timeout=120)
        try:
            time.sleep(12)
            before, began = commits(url), time.monotonic()
            time.sleep(seconds)
            after, ended = commits(url), time.monotonic()
        finally:
            launched.stop()
    return (after - before - 1) / (ended - began)  # less our own first read


def show_load(server: pg.Server, seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-replicas-out-") as tmp:
        out = Path(tmp) / "stamps.txt"
        idle = load_of(server, "idle", common.far_jobs(COUNT, out), seconds)
        busy = load_of(server, "busy", common.stamp_jobs(COUNT, out, every=f"{PERIOD}s"), seconds)
    row(f"one replica, {COUNT} jobs not due", "crond", f"{idle:.2f} transactions/s")
    starts = COUNT / PERIOD
    row(
        f"one replica, {COUNT} jobs every {PERIOD}s",
        "crond",
        f"{busy:.1f} transactions/s ({busy / starts:.2f} a run, {starts:.0f} runs/s)",
    )


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--minutes", type=float, default=None, help="each cluster run (10)")
    args = p.parse_args()
    minutes = args.minutes if args.minutes is not None else (1.0 if args.quick else 10.0)
    seconds = 20 if args.quick else 40
    common.header("replicas over PostgreSQL")
    try:
        server = pg.start(settings=DURABLE)
    except pg.UnavailableError as exc:
        common.skipped_name("crond", f"no PostgreSQL: {exc}")
        return
    with server:
        row("PostgreSQL", "", f"{server.bindir}, Unix socket, fsync on")
        show_lag(server, seconds)
        cluster_run(server, "three", minutes, kill=False)
        cluster_run(server, "killed", minutes, kill=True)
        show_load(server, 30 if args.quick else 60)


if __name__ == "__main__":
    main()
