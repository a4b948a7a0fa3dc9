"""The cost of `daemon.metrics`: a scrape's render, and the updates the loop makes per run.

    .venv/bin/python bench/bench_metrics.py [--quick]

1. Render: `Metrics.render()` for 100, 1,000 and 10,000 jobs, every job with runs in
   several duration buckets, both timestamps set, a next fire and a paused flag (the
   worst case: no zero shortcuts), median of repeats. Beside each, for scale, what
   prometheus-client's own `generate_latest` takes for the same numbers (Metrics is a
   Collector) and the page's size. Target: 1,000 jobs < 50 ms median (a scrape is
   rendered on the daemon's loop, which waits meanwhile).
2. A whole scrape of 1,000 jobs through crond.notify.http on loopback: connect, GET
   /metrics, read to the end.
3. One update call, µs each (median over repeats of 100,000 calls): `run_started`,
   `run_finished`, `skipped`, `missed`, and an update for a job no longer configured;
   beside them, a bare `dict[k] += 1` loop, the floor of any Python update.

4. With `--due` (only this case): a scrape beside a due job. A real `crond run` daemon
   of 10,000 jobs (its store on), `tick` `every: 1s` and 9,999 due in months; `tick`'s
   lateness is crond's own `lag_ms` of each `job.started` (slot to spawn). First nobody
   scrapes (the baseline), then a client scrapes /metrics back to back (a page is
   reused for a second, so a fresh render about once a second, its phase drifting
   across the slots). Printed: the medians with and without scrapes, of all slots and
   of the slots a fresh render spanned (a scrape whose first byte took > 100 ms: from
   its request to that byte), and the added lateness of each. `--before REV` measures
   the crond of that revision of this repository too, in the same run (its crond/ is
   taken from git and run with this venv's Python). Target: < 5 ms added.

Figures are printed, never asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from io import BytesIO
from pathlib import Path

import common
from common import ratio, row, summary, verdict
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from crond.config.loaded import LoadedJob
from crond.config.loader import loads
from crond.notify import http
from crond.notify.metrics import Metrics

TARGET_MS = 50.0
TARGET_ADDED_MS = 5.0
DUE_JOBS = 10_000
RENDERED_S = 0.1  # a scrape whose first byte took longer had a fresh render
UPDATES = 100_000
NOW = 1_780_000_000.0


def jobs(count: int) -> dict[str, LoadedJob]:
    """`count` jobs with the names of a big file; one loaded job stands for all (the
    metrics read only the names)."""
    one = loads("jobs:\n  j:\n    every: 1h\n    command: 'true'\n").jobs["j"]
    return {f"nightly-job-{i:05d}": one for i in range(count)}


def busy_metrics(count: int) -> Metrics:
    names = list(jobs(count))
    live = [(name, i % 2, NOW + 60 * i) for i, name in enumerate(names)]
    metrics = Metrics("0.1.0", lambda: live)
    metrics.set_jobs(jobs(count))
    metrics.set_notifiers(["slack", "pager"])
    outcomes = ("success", "failed", "timeout", "killed")
    for i, name in enumerate(names):
        for k in range(6):
            metrics.run_started(name, 0.0007 * (k + 1))
            metrics.run_finished(name, outcomes[(i + k) % 4], 0.3 * 7**k, NOW + i + k)
        metrics.skipped(name, "overlap")
        metrics.missed(name, 1)
        metrics.set_paused(name, i % 3 == 0)
    metrics.reloaded(True, NOW)
    return metrics


def timed(work: Callable[[], object], repeats: int) -> list[float]:
    """ms of each call."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        times.append((time.perf_counter() - began) * 1000)
    return times


def render(quick: bool) -> None:
    for count in (100, 1_000, 10_000):
        metrics = busy_metrics(count)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(metrics)
        repeats = 3 if quick or count == 10_000 else 11
        ours = timed(metrics.render, repeats)
        theirs = timed(lambda r=registry: generate_latest(r), 3 if quick else 5)  # type: ignore[misc]
        size = len(metrics.render())
        note = f"{size / 1e6:.2f} MB"
        if count == 1_000:
            note += f"; target < {TARGET_MS:g} ms: {verdict(statistics.median(ours) < TARGET_MS)}"
        row(f"render, {count:,} jobs", "crond", summary(ours), note)
        share = ratio(statistics.median(ours), statistics.median(theirs))
        row(f"generate_latest, {count:,} jobs", "baseline", summary(theirs), f"render/it {share}")


async def scrape(port: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n")
    received = len(await reader.read())
    writer.close()
    return received


async def scrapes(quick: bool) -> None:
    metrics = busy_metrics(1_000)
    server = await http.serve("127.0.0.1", 0, {"/metrics": metrics.route})
    port = server.sockets[0].getsockname()[1]
    times = []
    for _ in range(3 if quick else 11):
        began = time.perf_counter()
        await scrape(port)
        times.append((time.perf_counter() - began) * 1000)
    server.close()
    await server.wait_closed()
    row("scrape over loopback, 1,000 jobs", "crond", summary(times), "connect, GET, read all")


def per_call(work: Callable[[int], None], repeats: int) -> list[float]:
    """µs per call of `work(i)`, over UPDATES calls, for each repeat."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        for i in range(UPDATES):
            work(i)
        times.append((time.perf_counter() - began) * 1e6 / UPDATES)
    return times


def updates(quick: bool) -> None:
    metrics = busy_metrics(1_000)
    names = list(jobs(1_000))
    repeats = 3 if quick else 7
    counts = dict.fromkeys(names, 0)

    def bare(i: int) -> None:
        counts[names[i % 1000]] += 1

    cases: dict[str, Callable[[int], None]] = {
        "run_started": lambda i: metrics.run_started(names[i % 1000], 0.0012),
        "run_finished": lambda i: metrics.run_finished(names[i % 1000], "success", 2.5, NOW),
        "skipped": lambda i: metrics.skipped(names[i % 1000], "overlap"),
        "missed": lambda i: metrics.missed(names[i % 1000], 1),
        "update of a removed job": lambda _i: metrics.run_finished("gone", "failed", 1.0, NOW),
    }
    floor = per_call(bare, repeats)
    for label, work in cases.items():
        took = per_call(work, repeats)
        share = ratio(statistics.median(took), statistics.median(floor))
        row(f"{label}, per call", "crond", summary(took, "µs"), f"/bare {share}")
    row("bare dict[k] += 1, per call", "baseline", summary(floor, "µs"), "(the call's floor)")


# --- 4. a scrape beside a due job ------------------------------------------------------


def scrape_timed(port: int) -> tuple[float, float]:
    """(time.time() of the request, seconds to the first byte) of one GET /metrics, read
    to the end."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        began = time.time()
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n")
        sock.recv(65536)
        first = time.time() - began
        while sock.recv(1 << 20):
            pass
    return began, first


def scraping(port: int, stop: threading.Event, renders: list[tuple[float, float]]) -> None:
    """Back to back until `stop`; the spans (request, first byte) of fresh renders."""
    while not stop.is_set():
        began, first = scrape_timed(port)
        if first > RENDERED_S:
            renders.append((began, began + first))


def tick_lags(log: Path, start: int, end: int) -> list[tuple[float, float]]:
    """(slot as Unix time, lag_ms) of `tick`'s starts in the log's bytes [start, end)."""
    with log.open("rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    lags = []
    for line in data.splitlines():
        if b'"job.started"' in line and b'"tick"' in line:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                event = json.loads(line)
                slot = datetime.fromisoformat(event["slot"].replace("Z", "+00:00"))
                lags.append((slot.timestamp(), float(event["lag_ms"])))
    return lags


def serving_port(log: Path, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_bytes().splitlines():
            if b'"metrics.serving"' in line:
                return int(json.loads(line)["address"].rsplit(":", 1)[1])
        time.sleep(0.05)
    raise common.NotReadyError("no metrics.serving")


def old_crond(rev: str, into: Path) -> str:
    """A `crond` that runs this repository's crond/ at `rev` with this venv's Python."""
    archive = subprocess.run(["git", "-C", str(common.ROOT), "archive", rev, "crond"],
                             check=True, capture_output=True).stdout  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    wrapper = into / "crond-before"
    code = f"import sys; sys.path.insert(0, {str(into)!r}); from crond.cli import main; main()"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -c {shlex.quote(code)} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def due(binary: str, label: str, slots: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        work = Path(tmp)
        common.CROND = binary
        tick = common.JobDef("tick", "true", every="1s")
        far = common.far_jobs(DUE_JOBS - 1, work / "far.txt")
        system = common.CrondSystem(args=["--metrics", "127.0.0.1:0"])
        launched = system.launch([tick, *far], work, 300)
        log = work / "crond.log"
        renders: list[tuple[float, float]] = []
        try:
            port = serving_port(log)
            scrape_timed(port)  # the first render, out of the way
            time.sleep(1.5)
            begin = log.stat().st_size
            time.sleep(slots)
            middle = log.stat().st_size
            stop = threading.Event()
            thread = threading.Thread(target=scraping, args=(port, stop, renders), daemon=True)
            thread.start()
            time.sleep(slots * 1.5)
            stop.set()
            thread.join(60)
            end = log.stat().st_size
        finally:
            launched.stop()
        quiet = [lag for _, lag in tick_lags(log, begin, middle)]
        busy = tick_lags(log, middle, end)
    spanned = [lag for slot, lag in busy if any(a <= slot <= b for a, b in renders)]
    took = [(b - a) * 1000 for a, b in renders]
    row(f"{label}: tick's lag_ms, no scrapes", "crond", summary(quiet, p99=True))
    row("  scrapes back to back, all slots", "crond", summary([lag for _, lag in busy]))
    row("  slots a fresh render spanned", "crond", summary(spanned), f"renders: {summary(took)}")
    if quiet and spanned:
        base = statistics.median(quiet)
        added = statistics.median([lag for _, lag in busy]) - base
        row("  added lateness (median, all)", "crond", f"{added:+.2f} ms")
        added = statistics.median(spanned) - base
        note = f"target < {TARGET_ADDED_MS:g} ms: {verdict(added < TARGET_ADDED_MS)}"
        row("  added lateness (median, spanned)", "crond", f"{added:+.2f} ms", note)
        row("  added lateness (worst slot)", "crond", f"{max(spanned) - base:+.2f} ms")


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--due", action="store_true", help="only case 4: a scrape beside a due job")
    p.add_argument("--before", metavar="REV", help="case 4 also for crond at this revision")
    args = p.parse_args()
    if args.due:
        slots = 10 if args.quick else 20
        common.header(f"metrics: scrapes of {DUE_JOBS:,} jobs beside a job due every second")
        checkout = common.CROND
        with tempfile.TemporaryDirectory(prefix="bench-metrics-old-") as old:
            if args.before:
                due(old_crond(args.before, Path(old)), f"before ({args.before})", slots)
            due(checkout, "this checkout", slots)
        return
    common.header("metrics: render for 100 / 1,000 / 10,000 jobs, one scrape, update cost")
    render(args.quick)
    asyncio.run(scrapes(args.quick))
    updates(args.quick)


if __name__ == "__main__":
    main()
