"""Spawn cost of the runner against a bare `subprocess.Popen` loop, in the same process.

A burst of 1,000 runs of `sh -c 'date +%s.%N >> FILE'` started through `start_run`, each
driven in a task of one TaskGroup (as the daemon's loop does when 1,000 jobs are due
together), against a bare loop that Popens the same commands and then waits for them
all. Per round: first spawn → last spawn, first spawn → all finished, and the spread of
the children's own `date` stamps. Then one spawn's cost (the synchronous `start_run`
call / a bare `Popen`), median over 200.

Figures are printed, not asserted (target: the burst within 1.3x the bare loop).
Run: .venv/bin/python bench/bench_spawn.py [--runs 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from structlog.typing import FilteringBoundLogger

from crond import logs
from crond.clock import SystemClock
from crond.config.loader import loads
from crond.run import runner
from crond.run.runner import Outcome

# Seconds from the first spawn: last spawn, all finished; and the spawning loop's own CPU
# time, which the load of a shared machine disturbs less than wall-clock times.
Burst = tuple[float, float, float]


def job_spec(stamps: Path) -> runner.RunSpec:
    text = f"jobs:\n  stamp:\n    every: 1h\n    command: date +%s.%N >> {stamps}\n"
    return runner.spec_for(loads(text).jobs["stamp"])


def stamp_spread(stamps: Path, expected: int) -> float:
    values = [float(line) for line in stamps.read_text().split()]
    assert len(values) == expected, (len(values), expected)
    return max(values) - min(values)


async def crond_burst(spec: runner.RunSpec, n: int, log: FilteringBoundLogger) -> Burst:
    clock = SystemClock()
    slot = clock.now()
    async with asyncio.TaskGroup() as tasks:
        c0, t0 = time.process_time(), time.perf_counter()
        runs = [runner.start_run(spec, slot, tasks=tasks, clock=clock, log=log) for _ in range(n)]
        c1, t1 = time.process_time(), time.perf_counter()
        results = await asyncio.gather(*(run.wait() for run in runs))
        t2 = time.perf_counter()
    assert all(r.outcome is Outcome.SUCCESS for r in results)
    return t1 - t0, t2 - t0, c1 - c0


def bare_burst(command: str, n: int, *, piped: bool) -> Burst:
    """Popen in a loop, then wait for all. `piped`: as a supervisor that captures output
    must, also two pipes kept open per child and a new session."""
    keep: list[int] = []
    c0, t0 = time.process_time(), time.perf_counter()
    procs = []
    for _ in range(n):
        if not piped:
            procs.append(subprocess.Popen(["/bin/sh", "-c", command]))
            continue
        (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
        procs.append(
            subprocess.Popen(
                ["/bin/sh", "-c", command], stdout=out_w, stderr=err_w, start_new_session=True
            )
        )
        os.close(out_w)
        os.close(err_w)
        keep += (out_r, err_r)
    c1, t1 = time.process_time(), time.perf_counter()
    for proc in procs:
        proc.wait()
    t2 = time.perf_counter()
    for fd in keep:
        os.close(fd)
    assert all(p.returncode == 0 for p in procs)
    return t1 - t0, t2 - t0, c1 - c0


def fmt(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"median {statistics.median(ms):8.1f} ms   min {min(ms):8.1f}   max {max(ms):8.1f}"


KINDS = ("bare", "piped", "crond")


def burst_rounds(n: int, rounds: int, tmp: Path, log: FilteringBoundLogger) -> None:
    figures: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in KINDS}
    for i in range(rounds):
        for name in KINDS[i % 3 :] + KINDS[: i % 3]:  # rotate the order between rounds
            stamps = tmp / f"{name}-{i}.txt"
            spec = job_spec(stamps)
            if name == "crond":
                spawn, done, cpu = asyncio.run(crond_burst(spec, n, log))
            else:
                spawn, done, cpu = bare_burst(spec.argv[2], n, piped=name == "piped")
            figures[name].append((spawn, done, stamp_spread(stamps, n), cpu))
    print(
        f"burst of {n} runs, {rounds} rounds (bare: plain Popen; piped: Popen + 2 pipes + setsid)"
    )
    rows = (("first→last spawn", 0), ("first→all done", 1), ("date spread", 2), ("spawn CPU", 3))
    for label, index in rows:
        for name in KINDS:
            print(f"  {label:16} {name:5} {fmt([f[index] for f in figures[name]])}")
    # Each round runs all kinds back to back: per-round ratios cancel most load drift.
    print("  ratios, median over rounds of crond / baseline in the same round:")
    for label, index in (("last spawn", 0), ("all done", 1), ("spawn CPU", 3)):
        parts = []
        for base in ("bare", "piped"):
            pairs = zip(figures["crond"], figures[base], strict=True)
            parts.append(
                f"vs {base} {statistics.median(c[index] / b[index] for c, b in pairs):.2f}x"
            )
        target = "   (target: ≤ 1.3x vs bare)" if index < 3 else ""
        print(f"    {label:10}  {'   '.join(parts)}{target}")


def single_spawns(count: int, tmp: Path, log: FilteringBoundLogger) -> None:
    spec = job_spec(tmp / "single.txt")
    costs: dict[str, list[float]] = {"bare": [], "crond": []}

    async def alternate() -> None:
        clock = SystemClock()
        for _ in range(count):  # alternating, so both see the same machine load
            async with asyncio.TaskGroup() as tasks:
                t0 = time.perf_counter()
                run = runner.start_run(spec, clock.now(), tasks=tasks, clock=clock, log=log)
                costs["crond"].append(time.perf_counter() - t0)
                await run.wait()
            t0 = time.perf_counter()
            proc = subprocess.Popen(["/bin/sh", "-c", spec.argv[2]])
            costs["bare"].append(time.perf_counter() - t0)
            proc.wait()

    asyncio.run(alternate())
    print(f"single spawn, {count} times (the spawn call only; each run ends before the next)")
    for name, values in costs.items():
        ms = [c * 1000 for c in values]
        print(
            f"  {name:5} median {statistics.median(ms):6.2f} ms"
            f"   min {min(ms):6.2f}   p90 {statistics.quantiles(ms, n=10)[-1]:6.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--single", type=int, default=200)
    args = parser.parse_args()
    # 1,000 live runs hold 3,000 descriptors (two pipes and a pidfd each).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # The daemon's own logging, as JSON lines, written to /dev/null.
    with Path(os.devnull).open("w") as sink, tempfile.TemporaryDirectory() as tmp:
        log = logs.configure("json", "info", sink)
        print(f"{datetime.now(UTC):%Y-%m-%d %H:%M}Z, {os.cpu_count()} cpus, nofile {soft}→{hard}")
        burst_rounds(args.runs, args.rounds, Path(tmp), log)
        single_spawns(args.single, Path(tmp), log)


if __name__ == "__main__":
    main()
