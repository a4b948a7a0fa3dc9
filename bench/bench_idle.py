"""Idle cost: 1,000 and 10,000 jobs scheduled far ahead, measured over 60 s.

    .venv/bin/python bench/bench_idle.py [--quick] [--peers] [--jobs N] [--rounds N]

The jobs are daily-style cron lines spread over the day, in a month half a year away,
so nothing runs. Once the system is ready (and 2 s more), over 60 s: CPU seconds
(user + system, all threads, from /proc/PID/stat), wake-ups (times scheduled onto a
CPU: the third field of /proc/PID/task/*/schedstat, summed) and context switches, and
the resident memory at the end (VmRSS). Targets for crond with 10,000 jobs: < 0.2 % of
one core and < 80 MB. With --peers: the same on each peer (yacron gets at most 120 s to
load a file, then is reported as not loaded), and crond's ratio to it. --jobs: one size
only (e.g. 10000); --rounds: each figure is the median of that many daemons (RSS with its
min-max), for comparing RSS with APScheduler 3's beside it:
`bench_idle.py --quick --peers --jobs 10000 --rounds 3`. With both sizes, each system's
RSS is split in two: what a job adds (the slope) and the rest (imports, the store).
"""

from __future__ import annotations

import os
import statistics
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


def medians(system: System, jobs: int, seconds: float, rounds: int) -> tuple[float, ...]:
    """(% of one core, wake-ups per second, RSS MB, lowest RSS, highest RSS): medians of
    `rounds` daemons."""
    samples = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix=f"bench-idle-{system.name}-") as tmp:
            samples.append(measure(system, jobs, seconds, Path(tmp)))
    cpu, wakes, rss = (statistics.median(values) for values in zip(*samples, strict=True))
    return cpu, wakes, rss, min(s[2] for s in samples), max(s[2] for s in samples)


def split(rss_of: dict[int, float]) -> str:
    """The RSS a job adds (the slope from 1,000 to 10,000 jobs) and the rest (the line at
    0 jobs: imports, the store, what does not grow with the file)."""
    (few, low), (many, high) = sorted(rss_of.items())
    slope = (high - low) / (many - few)
    return f"{slope * 1e3:.2f} kB a job; {low - slope * few:.1f} MB without jobs"


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--jobs", type=int, choices=SIZES, help="measure this size only")
    p.add_argument("--rounds", type=int, default=1, help="daemons per figure (medians)")
    args = p.parse_args()
    seconds = 15.0 if args.quick else 60.0
    sizes = SIZES if args.jobs is None else (args.jobs,)
    rounds = f", medians of {args.rounds} daemons" if args.rounds > 1 else ""
    common.header(f"idle: jobs far ahead, over {seconds:g} s{rounds}")
    ours: dict[int, tuple[float, ...]] = {}
    for system in common.systems(common.want_peers(args)):
        if why := system.missing():
            common.skipped(system, why)
            continue
        rss_of: dict[int, float] = {}
        for jobs in sizes:
            try:
                cpu, wakes, rss, low, high = medians(system, jobs, seconds, args.rounds)
            except NotReadyError as exc:
                row(f"{jobs:,} jobs", system.name, f"not measured: {exc}")
                continue
            # /proc counts CPU time in clock ticks (10 ms): below one tick, say so.
            tick = 100 / os.sysconf("SC_CLK_TCK") / seconds
            share = f"{cpu:.3f} %" if cpu > 0 else f"< {tick:.3f} % (no tick)"
            text = (
                f"{share} of a core ({cpu * 0.6:.3f} CPU-s a minute), "
                f"{wakes:.2f} wake-ups/s, RSS {rss:.1f} MB"
                + (f" ({low:.1f}-{high:.1f})" if args.rounds > 1 else "")
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
            rss_of[jobs] = rss
        if len(rss_of) == len(SIZES):
            row("RSS: a job / the rest", system.name, split(rss_of))


if __name__ == "__main__":
    main()
