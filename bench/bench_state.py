"""The state store's cost: recording an attempt, and `crond status` on a big store.

    .venv/bin/python bench/bench_state.py [--quick]

1. Recording: `Store.start` (the cursor and the `started` row, one commit, on the start
   path before every spawn) and `Store.finish` (after the exit, with pruning), each timed
   over 2,000 attempts of 100 jobs on a store already holding 100 rows a job, on this
   machine's disk, WAL mode as the daemon uses it. Beside them, for scale, one bare
   `posix_spawn` of `/bin/true` in the same run (the spawn the record precedes).
   Target: start < 1 ms median.
2. `crond status FILE --json` on a file of 10,000 jobs and a store of 1,000,000 attempt
   rows (100 a job), with the daemon running on both (as when an operator asks):
   whole-process wall time, median of 5 runs. Then the same for a copy of the file with
   one more comment line (other bytes: status must load and check it, as when the
   daemon has not loaded the file), and `crond validate` of the file, for scale. Target:
   status < 200 ms. In-process, for where the time goes: the store's part (one
   `Reader.summaries()`; `Reader.status_rows()`, the daemon's view with the summaries)
   and the printing (`status.format_status_json` of those rows).

Figures are printed, never asserted.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import common
from common import row, summary, verdict

from crond import status as status_view
from crond.store import sqlite as state
from crond.store.base import StateError

JOBS_SMALL, ATTEMPTS = 100, 2_000
JOBS_BIG, ROWS_PER_JOB = 10_000, 100


def recording(work: Path, attempts: int) -> None:
    store = state.SqliteStore(work / "rec")
    t0 = datetime.now(UTC)
    for j in range(JOBS_SMALL):  # a lived-in store: 100 finished rows a job
        for k in range(100):
            r = store.start(
                f"job{j}", run_id=f"pre{j}-{k}", slot=t0, attempt=1, started=t0, cursor=t0
            )
            store.finish(r, job=f"job{j}", finished=t0, outcome="success", exit_code=0,
                         duration_s=0.01, output=["line"] * 20)  # fmt: skip
    starts, finishes, spawns = [], [], []
    tail = [f"output line {i} of a job that prints a little" for i in range(20)]
    for i in range(attempts):
        job = f"job{i % JOBS_SMALL}"
        slot = t0 + timedelta(seconds=i)
        began = time.perf_counter()
        r = store.start(job, run_id=f"r{i}", slot=slot, attempt=1, started=slot, cursor=slot)
        starts.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        store.finish(r, job=job, finished=slot, outcome="success", exit_code=0,
                     duration_s=0.01, output=tail)  # fmt: skip
        finishes.append((time.perf_counter() - began) * 1000)
        if i % 10 == 0:
            began = time.perf_counter()
            pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
            spawns.append((time.perf_counter() - began) * 1000)
            os.waitpid(pid, 0)
    store.close()
    ok = statistics.median(starts) < 1.0
    row("record start (before spawn)", "crond", summary(starts, p99=True),
        f"target < 1 ms median: {verdict(ok)}")  # fmt: skip
    row("record finish (+ prune)", "crond", summary(finishes, p99=True))
    share = common.ratio(statistics.median(starts), statistics.median(spawns))
    row("bare posix_spawn, for scale", "baseline", summary(spawns), f"start/spawn {share}")


def big_store(directory: Path, jobs: int, per_job: int) -> None:
    """`jobs` x `per_job` finished attempts, written directly (the schema is the store's)."""
    state.SqliteStore(directory).close()  # the schema
    db = sqlite3.connect(directory / state.DB_NAME)
    db.execute("PRAGMA journal_mode=WAL")
    now = time.time()
    rng = random.Random(7)

    def rows() -> Iterator[tuple[object, ...]]:
        for k in range(per_job):
            for j in range(jobs):
                at = now - (per_job - k) * 3600
                outcome = "success" if rng.random() < 0.9 else "failed"
                yield (f"r{j}-{k}", f"far-{j:05d}", at, 1, at, at + 1, outcome,
                       0 if outcome == "success" else 1, 1.0, '["a line of output"]')  # fmt: skip

    with db:
        db.executemany(
            "INSERT INTO attempts (run_id, job, slot, attempt, started, finished, outcome, "
            "exit_code, duration_s, output) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows(),
        )
        # The summaries as the daemon keeps them: the newest attempt, the last success.
        iso = "strftime('%Y-%m-%dT%H:%M:%fZ', {}, 'unixepoch')"
        db.execute(
            "INSERT INTO summary (job, last_id, run_id, slot, attempt, started, finished, "
            "outcome, exit_code, duration_s) SELECT a.job, a.id, a.run_id, "
            f"{iso.format('a.slot')}, a.attempt, {iso.format('a.started')}, "
            f"{iso.format('a.finished')}, a.outcome, a.exit_code, a.duration_s FROM attempts a "
            "WHERE a.id IN (SELECT max(id) FROM attempts GROUP BY job)"
        )
        db.execute(
            "UPDATE summary SET (success_run_id, success_started, success_finished, "
            f"success_duration_s) = (SELECT run_id, {iso.format('started')}, "
            f"{iso.format('finished')}, duration_s FROM attempts "
            "WHERE attempts.job = summary.job AND outcome = 'success' ORDER BY id DESC LIMIT 1)"
        )
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def wall(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, check=False)
        times.append(time.perf_counter() - began)
        if done.returncode != 0:
            sys.exit(f"{argv} failed: {done.stderr.decode()[-500:]}")
    return times


def status(work: Path, runs: int, per_job: int) -> None:
    config = work / "jobs.yaml"
    config.write_text(common.crond_yaml(common.far_jobs(JOBS_BIG, work / "stamps.txt")))
    directory = work / "big"
    directory.mkdir()
    began = time.perf_counter()
    big_store(directory, JOBS_BIG, per_job)
    made = time.perf_counter() - began
    size = (directory / state.DB_NAME).stat().st_size / 1e6
    print(f"  (store of {JOBS_BIG * per_job:,} rows, {size:.0f} MB, built in {made:.0f} s)")
    reader = state.Reader(directory)
    reads = []
    for _ in range(runs):
        began = time.perf_counter()
        assert len(reader.summaries()) == JOBS_BIG
        reads.append(time.perf_counter() - began)
    reader.close()
    row("store read (summaries), in-process", "crond", summary(reads, "s"))
    # The daemon running on that store, as when an operator asks: it publishes its view.
    daemon = subprocess.Popen(
        [common.CROND, "run", str(config), "--state-dir", str(directory), "--log-format", "json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(StateError):
                reader = state.Reader(directory)
                published = reader.get_meta("view_sha256")
                reader.close()
                if published:
                    break
            time.sleep(0.1)
        in_process(directory, runs)
        argv = [common.CROND, "status", str(config), "--state-dir", str(directory), "--json"]
        statuses = wall(argv, runs)
        (work / "copy.yaml").write_text(config.read_text() + "# other bytes: loaded\n")
        argv[2] = str(work / "copy.yaml")
        loading = wall(argv, runs)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
    floor = wall([common.CROND, "validate", str(config)], runs)
    ok = statistics.median(statuses) < 0.2
    row("status, 10,000 jobs, whole process", "crond", summary(statuses, "s"),
        f"target < 200 ms: {verdict(ok)}")  # fmt: skip
    row("status, file not the daemon's", "crond", summary(loading, "s"),
        "(loads and checks the file)")  # fmt: skip
    share = common.ratio(statistics.median(statuses), statistics.median(floor))
    row("validate, same file (the floor)", "crond", summary(floor, "s"), f"status/validate {share}")


def in_process(directory: Path, runs: int) -> None:
    """The quick path's two parts: the view with its summaries, then the JSON lines."""
    reader = state.Reader(directory)
    reads, prints = [], []
    for _ in range(runs):
        began = time.perf_counter()
        rows = reader.status_rows()
        reads.append(time.perf_counter() - began)
        began = time.perf_counter()
        assert status_view.format_status_json(rows, alive=True).count("\n") == JOBS_BIG - 1
        prints.append(time.perf_counter() - began)
    reader.close()
    row("view + summaries read, in-proc", "crond", summary(reads, "s"))
    row("--json lines made, in-process", "crond", summary(prints, "s"))


def main() -> None:
    args = common.parser(__doc__).parse_args()
    common.header("state store: recording cost, crond status on a big store")
    with tempfile.TemporaryDirectory(prefix="bench-state-") as tmp:
        work = Path(tmp)
        recording(work, 400 if args.quick else ATTEMPTS)
        status(work, 3 if args.quick else 5, 10 if args.quick else ROWS_PER_JOB)


if __name__ == "__main__":
    main()
