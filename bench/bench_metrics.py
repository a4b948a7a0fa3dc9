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

Figures are printed, never asserted.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable

import common
from common import ratio, row, summary, verdict
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from crond.config.loaded import LoadedJob
from crond.config.loader import loads
from crond.notify import http
from crond.notify.metrics import Metrics

TARGET_MS = 50.0
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


def main() -> None:
    args = common.parser(__doc__).parse_args()
    common.header("metrics: render for 100 / 1,000 / 10,000 jobs, one scrape, update cost")
    render(args.quick)
    asyncio.run(scrapes(args.quick))
    updates(args.quick)


if __name__ == "__main__":
    main()
