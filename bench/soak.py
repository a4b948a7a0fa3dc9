"""The reliability soak: 20,000 runs of misbehaving jobs through reloads and SIGSTOPs.

    .venv/bin/python bench/soak.py [--runs 20000] [--group 7] [--max-minutes 15]

About 6 minutes with the defaults: `--group` copies of the mix of tests/e2e/soakcheck.py
(succeeding, failing with retries, timing out, SIGTERM-deaf, grandchild-spawning,
output-flooding jobs, all `every: 1s`), 71 jobs a second, the file swapped and reloaded
every 3 s, the daemon frozen (SIGSTOP) for 2 s every 20 s. Then it prints PASS/FAIL per
check and the count of runs, and exits 1 on any violation. tests/e2e/test_soak.py runs
the same checks on a few hundred runs. Not part of `make bench` (nor of the tests).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import common

from tests.e2e.soakcheck import Plan, Soak, report


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000, help="runs to start (attempt 1)")
    parser.add_argument("--group", type=int, default=7, help="copies of the mix of 9 jobs")
    parser.add_argument("--max-minutes", type=float, default=15.0)
    args = parser.parse_args()
    common.header(f"soak: {args.runs:,} runs, {args.group * 10 + 1} jobs every second")
    plan = Plan(
        runs=args.runs,
        max_seconds=args.max_minutes * 60,
        jobs=args.group,
        reload_every=3.0,
        pause_every=20.0,
        pause_for=2.0,
        progress=True,
    )
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="crond-soak-") as tmp:
        soak = Soak(Path(tmp), plan)
        checks = soak.run()
    print(f"  {soak.summary()}")
    print(f"  {time.monotonic() - began:.0f} s")
    print(report(checks))
    enough = soak.record.runs >= args.runs
    print(f"  {'PASS' if enough else 'FAIL'}  runs started: {soak.record.runs:,} of {args.runs:,}")
    failed = [c for c in checks if not c.ok]
    print(f"  {len(failed)} violations" if failed or not enough else "  zero violations")
    return 0 if enough and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
