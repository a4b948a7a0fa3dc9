"""How fast crond.when.timing computes fires, against croniter's own get_next in the same run.

    .venv/bin/python bench/bench_timing.py

Prints the median, min and max of several runs for:
  1. 100,000 consecutive fires of a mixed set of cron expressions in DST zones (target < 2 s)
  2. `crond next` for 1,000 jobs x 5 fires: next_fires + format_table (target < 1 s)
  3. croniter.get_next for the same expressions and fire counts as 1 (the baseline)
Not a test: figures depend on the machine. Exits 1 when a target is missed.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from crond.when import timeline
from crond.when.preview import format_table, next_fires
from crond.when.timing import CronTiming, IntervalTiming, Timing, jitter_offset, parse_cron

RUNS = 5
FIRES = 100_000
START = datetime(2026, 1, 1, tzinfo=UTC)

# (expression, zone): both kinds of job, both day rules, zones with 1 h, 30 min, 2 h and
# midnight transitions. Each contributes FIRES / len(MIX) consecutive fires.
MIX = [
    ("*/5 * * * *", "America/New_York"),
    ("* * * * *", "Europe/London"),
    ("30 2 * * *", "Europe/Berlin"),
    ("0 */2 * * *", "Australia/Lord_Howe"),
    ("0 9 * * mon-fri", "America/Sao_Paulo"),
    ("15,45 0-3 * * *", "Pacific/Chatham"),
    ("30 1 * * *", "America/New_York"),
    ("0 12 1,15 * fri", "Europe/Dublin"),
    ("*/20 1-3 * * *", "Antarctica/Troll"),
    ("0 0 * * *", "Asia/Tehran"),
]


def _runs(work: Callable[[], object]) -> list[float]:
    times = []
    for _ in range(RUNS):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return times


def _crond_fires() -> None:
    per = FIRES // len(MIX)
    for expr, zone in MIX:
        fires = CronTiming(parse_cron(expr), ZoneInfo(zone)).fires(START)
        for _ in range(per):
            next(fires)


def _croniter_fires() -> None:
    per = FIRES // len(MIX)
    for expr, zone in MIX:
        it = croniter(expr, START.astimezone(ZoneInfo(zone)))
        for _ in range(per):
            it.get_next(datetime)


def _jobs() -> dict[str, Timing]:
    jobs: dict[str, Timing] = {}
    for i in range(1000):
        name = f"job-{i:04d}"
        if i % 4 == 3:
            jobs[name] = IntervalTiming(
                timedelta(minutes=5 + i % 55), jitter=jitter_offset(name, timedelta(minutes=1))
            )
        else:
            expr, zone = MIX[i % len(MIX)]
            jobs[name] = CronTiming(parse_cron(expr), ZoneInfo(zone))
    return jobs


def _crond_next() -> None:
    format_table(next_fires(_jobs(), START, 5))


def _line(label: str, times: list[float], target: float | None = None) -> bool:
    med = statistics.median(times)
    text = f"{label:<52} median {med:7.3f} s  min {min(times):7.3f} s  max {max(times):7.3f} s"
    if target is None:
        print(text)
        return True
    ok = med < target
    print(f"{text}  target < {target:g} s: {'PASS' if ok else 'FAIL'}")
    return ok


def main() -> int:
    print(f"{RUNS} runs each; {FIRES:,} fires over {len(MIX)} expressions in DST zones")
    timeline._chunks.clear()
    began = time.perf_counter()
    _crond_fires()  # the first run also probes the zones' offsets, cached from then on
    cold = time.perf_counter() - began
    ours = _runs(_crond_fires)
    theirs = _runs(_croniter_fires)
    preview = _runs(_crond_next)
    ok = _line("crond.when.timing: 100,000 consecutive fires, first run", [cold], 2.0)
    ok = _line("crond.when.timing: 100,000 consecutive fires", ours, 2.0) and ok
    _line("croniter.get_next: the same 100,000 fires (baseline)", theirs)
    ok = _line("crond next: 1,000 jobs x 5 fires, merged + table", preview, 1.0) and ok
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(f"crond.when.timing is {ratio:.1f}x croniter.get_next's speed (median over median)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
