"""A fault soak of replicas: three replicas of one file on a private PostgreSQL, through
random faults, then the checks of tests/e2e/replica_check.py.

    .venv/bin/python bench/soak_replicas.py [--minutes 30] [--quick] [--seed N] [--strict]
                                            [--keep DIR]

The database is a private PostgreSQL the script starts (tests/pg/server.py), reached by
the replicas through a TCP proxy on loopback (tests/e2e/replicas.py `Proxy`); the soak's
own reads go to its Unix socket. The daemon's timings are short (heartbeat 1 s,
replica_timeout 5 s) and every job runs every second, writing its own start and end
stamps: `skip` (0.3 s), `allow` with `max_running: 2` (2.5 s), `replace` (0.5 s), `slow`
(2 s, `overlap: skip`) and `each` (`replicas: all`). For `--minutes` (`--quick`: 1),
faults one at a time, in shuffled rounds of the five kinds (seeded: `--seed`, printed),
6-12 s apart:

- `kill`: SIGKILL a replica, restart it 1-8 s later (under the same name);
- `stop`: SIGSTOP a replica for replica_timeout plus 1-4 s, then SIGCONT;
- `pg_restart`: PostgreSQL's fast shutdown, then a start on the same data;
- `hang`: the proxy stops forwarding for 6-12 s without closing anything (a network
  partition: connections open, nothing comes back, new ones accepted and never
  answered), then lets everything through;
- `terminate`: pg_terminate_backend of every connection to the soak's database.

Then 15 s without a fault, the replicas are stopped (SIGTERM) and the checks print their
counts, up to 5 examples each, and the split by the fault under way (or within 10 s
after it). A measurement: exit 0 whatever it found; `--strict` exits 1 on any violation.
Takes the minutes plus ~1 (quick: ~2 all told). Not part of `make bench`.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import common

from tests.e2e.replica_check import check, report
from tests.e2e.replicas import FaultSoak, SoakPlan
from tests.pg import server as pg


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="of faults (30)")
    parser.add_argument("--quick", action="store_true", help="1 minute of faults")
    parser.add_argument("--seed", type=int, default=None, help="the faults' seed (random)")
    parser.add_argument("--strict", action="store_true", help="exit 1 on any violation")
    parser.add_argument(
        "--fencing", choices=("keep", "stop"), default="keep", help="daemon.fencing (keep)"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep the logs, stamps and records in this new directory",
    )
    args = parser.parse_args()
    minutes = 1.0 if args.quick else args.minutes
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    common.header(
        f"fault soak of replicas: {minutes:g} min of faults, seed {seed}, fencing {args.fencing}"
    )
    try:
        server = pg.start()
    except pg.UnavailableError as exc:
        print(f"  skipped: no PostgreSQL: {exc}")
        return 0
    began = time.monotonic()
    plan = SoakPlan(seconds=minutes * 60, seed=seed, fencing=args.fencing)
    with server, tempfile.TemporaryDirectory(prefix="crond-soak-replicas-") as tmp:
        work = Path(tmp)
        if args.keep is not None:
            args.keep.mkdir(parents=True)
            work = args.keep
        soak = FaultSoak(work, server, plan, say=lambda line: print(line, flush=True))
        obs = soak.run()
        if args.keep is not None:
            soak.save(obs)
    findings = check(obs, soak.end_of_soak)
    starts = sum(1 for s in obs.stamps if s.kind == "S")
    print(f"  {len(obs.faults)} faults, {starts} runs stamped, "
          f"{time.monotonic() - began:.0f} s")  # fmt: skip
    for note in soak.notes:
        print(f"  note: {note}")
    print(report(findings, obs))
    bad = [f for f in findings if not f.ok]
    print(f"  {sum(f.count for f in bad)} violations in {len(bad)} rules, seed {seed}")
    return 1 if args.strict and bad else 0


if __name__ == "__main__":
    sys.exit(main())
