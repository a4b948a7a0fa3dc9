"""Idle cost: 1,000 and 10,000 jobs scheduled far ahead, measured over 60 s.

    .venv/bin/python bench/bench_idle.py [--quick] [--peers]

The jobs are daily-style cron lines spread over the day, in a month half a year away,
so nothing runs. Once the system is ready (and 2 s more), over 60 s: CPU seconds
(user + system, all threads, from /proc/PID/stat), wake-ups (times scheduled onto a
CPU: the third field of /proc/PID/task/*/schedstat, summed) and context switches, and
the resident memory at the end (VmRSS). Targets for crond with 10,000 jobs: < 0.2 % of
one core and < 80 MB. With --peers: the same on each peer (yacron gets at most 120 s to
load a file, then is reported as not loaded).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import common
from common import NotReadyError, System, row, verdict

SIZES = (1_000, 10_000)


def measure(system: System, jobs: int, seconds: float, work: Path) -> tuple[float, float, float]:
    """(% of one core, wake-ups per second, RSS MB)."""
    launched = system.launch(common.far_jobs(jobs, work / "stamps.txt"), work, ready_timeout=120)
    try:
        time.sleep(2)  # start-up settles
        before = common.sample(launched.pid)
        time.sleep(seconds)
        after = common.sample(launched.pid)
    finally:
        launched.stop()
    cpu = (after.cpu_s - before.cpu_s) / seconds * 100
    wakes = (after.timeslices - before.timeslices) / seconds
    return cpu, wakes, after.rss_kib * 1024 / 1e6


def main() -> None:
    args = common.parser(__doc__).parse_args()
    seconds = 15.0 if args.quick else 60.0
    common.header(f"idle: jobs far ahead, over {seconds:g} s")
    ours: dict[int, tuple[float, float, float]] = {}
    for system in common.systems(common.want_peers(args)):
        if why := system.missing():
            common.skipped(system, why)
            continue
        for jobs in SIZES:
            with tempfile.TemporaryDirectory(prefix=f"bench-idle-{system.name}-") as tmp:
                try:
                    cpu, wakes, rss = measure(system, jobs, seconds, Path(tmp))
                except NotReadyError as exc:
                    row(f"{jobs:,} jobs", system.name, f"not measured: {exc}")
                    continue
            # /proc counts CPU time in clock ticks (10 ms): below one tick, say so.
            tick = 100 / os.sysconf("SC_CLK_TCK") / seconds
            share = f"{cpu:.3f} %" if cpu > 0 else f"< {tick:.3f} % (no tick)"
            text = (
                f"{share} of a core ({cpu * 0.6:.3f} CPU-s a minute), "
                f"{wakes:.2f} wake-ups/s, RSS {rss:.1f} MB"
            )
            note = ""
            if system.name == "crond":
                ours[jobs] = (cpu, wakes, rss)
                if jobs == 10_000:
                    note = f"target < 0.2 %: {verdict(cpu < 0.2)}; < 80 MB: {verdict(rss < 80)}"
            elif jobs in ours:
                mine = ours[jobs]
                note = (
                    f"crond/{system.name}: CPU {common.ratio(mine[0], cpu)}, "
                    f"RSS {common.ratio(mine[2], rss)}"
                )
            row(f"{jobs:,} jobs", system.name, text, note)


if __name__ == "__main__":
    main()
