"""`crond validate` and time to ready of 10,000 jobs with calendars.

    .venv/bin/python bench/bench_calendars.py [--jobs N] [--starts K]

The jobs are daily cron lines at varied times, in Europe/Berlin, each with one of four
calendar uses (business days and Bavarian holidays, the last of them in each month, a
skipped shutdown, `roll: next` onto business days). Figures: the median of K runs of
`crond validate FILE` (the whole process) and of K starts of `crond run FILE` to READY=1
(bench_startup.py's way). Targets (docs/performance.md): validate < 1 s, ready < 1.5 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import common

HEAD = """\
timezone: Europe/Berlin
calendars:
  bavaria: {holidays: DE, subdiv: BY}
  year-end: {dates: [12-24..12-31]}
  business-days: {weekdays: mon-fri, except: [bavaria, year-end]}
  shutdown: {dates: [2026-12-24, 2026-12-28..2026-12-31]}
  freeze: {windows: [{from: 2026-12-18T18:00, until: 2027-01-04T06:00}]}
"""
USES = (
    "days: business-days",
    "days: business-days, nth_day: -1",
    "skip: [shutdown, freeze]",
    "days: business-days, roll: next",
)


def calendar_yaml(jobs: Sequence[common.JobDef]) -> str:
    lines = ["jobs:"]
    for i, job in enumerate(jobs):
        lines.append(
            f"  {job.name}: {{cron: {json.dumps(job.cron)}, {USES[i % len(USES)]}, "
            f"command: {json.dumps(job.command)}}}"
        )
    return HEAD + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    common.crond_yaml = calendar_yaml  # the launcher writes this file instead
    with tempfile.TemporaryDirectory(prefix="bench-calendars-") as tmp:
        work = Path(tmp)
        command = common.COMMAND.format(out=work / "stamps.txt")
        jobs = [
            common.JobDef(f"cal-{i:05d}", command, cron=f"{i % 60} {i // 60 % 24} * * *")
            for i in range(args.jobs)
        ]
        path = work / "v.yaml"
        path.write_text(calendar_yaml(jobs))
        validate = []
        for _ in range(args.starts):
            started = time.perf_counter()
            subprocess.run([common.CROND, "validate", str(path)], check=True, capture_output=True)
            validate.append(time.perf_counter() - started)
        ready = []
        for n in range(args.starts):
            run = work / f"run{n}"
            run.mkdir()
            launched = common.CrondSystem().launch(jobs, run, ready_timeout=120)
            ready.append(launched.ready_s or 0.0)
            launched.stop()
    print(f"{args.jobs} jobs with calendars, medians of {args.starts}:")
    print(f"  crond validate  {statistics.median(validate):.2f} s   (target < 1 s)")
    print(f"  ready           {statistics.median(ready):.2f} s   (target < 1.5 s)")


if __name__ == "__main__":
    main()
