"""Burst: 1,000 jobs due in the same second, against a bare spawn loop in the same run.

    .venv/bin/python bench/bench_burst.py [--quick] [--peers]

Every job is `sh -c 'date +%s.%N >> FILE'`. The figure is the time from the slot to the
last start (the last instant a job wrote). The baseline is a bare loop in this process,
`subprocess.Popen(["/bin/sh", "-c", CMD], start_new_session=True)` 1,000 times, then
wait for all: the time from its first spawn to the last start. Each burst is followed,
once its jobs are done, by one bare loop, so every ratio compares two figures taken a
few seconds apart on the same (shared, noisy) machine.

crond: 1,000 jobs `every: 20s`, 5 bursts. Target: the last start within 1.3x the bare
loop's. With --peers: 1,000 jobs `* * * * *` on each peer, 2 minute boundaries.
"""

from __future__ import annotations

import functools
import statistics
import tempfile
from pathlib import Path

import common
from common import JobDef, NotReadyError, Round, row, summary, verdict

JOBS = 1000


def report(name: str, rounds: list[Round], ours: float | None) -> float | None:
    done = [r for r in rounds if r.lags and r.baseline]
    if not done:
        common.skipped_name(name, "no burst seen")
        return None
    for r in rounds:
        if len(r.lags) < JOBS:
            row("", name, f"only {len(r.lags)} of {JOBS:,} started for one slot")
    last = [r.lags[-1] for r in done]
    bare = [r.baseline or 0.0 for r in done]
    ratios = [a / b for a, b in zip(last, bare, strict=True)]
    med = statistics.median(ratios)
    row("1,000 jobs, first start", name, summary([r.lags[0] for r in done]))
    row("1,000 jobs, last start", name, summary(last))
    row("bare Popen loop, last start", name, summary(bare), "(same run, after each burst)")
    text = f"median {med:.2f}x (min {min(ratios):.2f}x, max {max(ratios):.2f}x)"
    if name == "crond":
        row("last start / bare loop", name, text, f"target within 1.3x: {verdict(med <= 1.3)}")
    else:
        note = f"crond/{name} {common.ratio(ours, statistics.median(last))}" if ours else ""
        row("last start / bare loop", name, text, note)
    return statistics.median(last)


def main() -> None:
    args = common.parser(__doc__).parse_args()
    common.header(f"burst: {JOBS:,} jobs due in the same second (ms after the slot)")
    ours: float | None = None
    for system in common.systems(common.want_peers(args)):
        if why := system.missing():
            common.skipped(system, why)
            continue
        crond = system.name == "crond"
        period = 20.0 if crond else 60.0
        count = (2 if args.quick else 5) if crond else (1 if args.quick else 2)

        def make(out: Path, crond: bool = crond) -> list[JobDef]:
            if crond:
                return common.stamp_jobs(JOBS, out, every="20s")
            return common.stamp_jobs(JOBS, out, cron="* * * * *")

        with tempfile.TemporaryDirectory(prefix=f"bench-burst-{system.name}-") as tmp:
            work = Path(tmp)
            try:
                bare = functools.partial(common.bare_loop, work / "bare.txt", JOBS)
                rounds = common.slot_rounds(system, make, period, count, work, baseline=bare)
            except NotReadyError as exc:
                common.skipped(system, str(exc))
                continue
        last = report(system.name, rounds, ours)
        if crond:
            ours = last


if __name__ == "__main__":
    main()
