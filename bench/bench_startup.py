"""Start-up and reload: a file of 1,000 and of 10,000 jobs.

    .venv/bin/python bench/bench_startup.py [--quick] [--peers]

The jobs are cron lines at varied times, none due during the bench. Figures, over 3
starts of each size:

- time to ready: from the spawn of `crond run FILE` to READY=1 on a NOTIFY_SOCKET bound
  here (what systemd waits for);
- peak memory: VmHWM once ready, and again after the reloads;
- reload: one job's command changed in the file (written atomically), SIGHUP, until the
  `config.reloaded` event is in the log; 3 reloads per start.

Targets for crond with 10,000 jobs: ready < 1.5 s, reload < 1.5 s (APScheduler 3: 2.2 s).
With --peers: time to ready and peak memory of each peer (cron and yacron: until their
`@reboot` job writes; APScheduler: its READY=1). yacron gets 60 s per start (its
10,000-job file takes minutes: reported as "> 60 s"). No peer has a reload to time: cron
and yacron re-read their files at the next minute, an APScheduler script restarts.
"""

from __future__ import annotations

import os
import signal
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import common
from common import NotReadyError, System, row, summary, verdict

SIZES = (1_000, 10_000)


def crond_starts(jobs: int, starts: int, reloads: int) -> tuple[list[float], list[float], int]:
    """(ready s, reload s, peak KiB) over `starts` starts and `reloads` reloads each."""
    ready: list[float] = []
    reload: list[float] = []
    peak = 0
    system = common.CrondSystem()
    for _ in range(starts):
        with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
            work = Path(tmp)
            defs = common.far_jobs(jobs, work / "stamps.txt")
            launched = system.launch(defs, work, ready_timeout=120)
            try:
                ready.append(launched.ready_s or 0.0)
                peak = max(peak, common.sample(launched.pid).hwm_kib)
                log = work / "crond.log"
                offset = log.stat().st_size
                for n in range(reloads):
                    changed = [replace(defs[0], command=f"{defs[0].command} # {n}"), *defs[1:]]
                    config = work / "crond.yaml"
                    (work / "next.yaml").write_text(common.crond_yaml(changed))
                    (work / "next.yaml").replace(config)
                    sent = time.time()
                    os.kill(launched.pid, signal.SIGHUP)
                    seen, offset = common.log_event(log, "config.reloaded", offset, 60)
                    reload.append(seen - sent)
                peak = max(peak, common.sample(launched.pid).hwm_kib)
            finally:
                launched.stop()
    return ready, reload, peak


def peer_starts(system: System, jobs: int, starts: int, timeout: float) -> str:
    ready: list[float] = []
    peak = 0
    for _ in range(starts):
        with tempfile.TemporaryDirectory(prefix=f"bench-startup-{system.name}-") as tmp:
            work = Path(tmp)
            try:
                launched = system.launch(common.far_jobs(jobs, work / "s.txt"), work, timeout)
            except NotReadyError as exc:
                return f"ready > {timeout:g} s ({exc})"
            try:
                ready.append(launched.ready_s or 0.0)
                peak = max(peak, common.sample(launched.pid).hwm_kib)
            finally:
                launched.stop()
    return f"ready {summary(ready, 's')}; peak {peak * 1024 / 1e6:.1f} MB"


def main() -> None:
    args = common.parser(__doc__).parse_args()
    starts = 1 if args.quick else 3
    common.header("start-up and reload (jobs far ahead)")
    ours: dict[int, float] = {}
    for jobs in SIZES:
        ready, reload, peak = crond_starts(jobs, starts, 1 if args.quick else 3)
        ours[jobs] = statistics.median(ready)
        big = jobs == 10_000
        row(
            f"{jobs:,} jobs: ready (READY=1)",
            "crond",
            summary(ready, "s"),
            f"target < 1.5 s (median): {verdict(statistics.median(ready) < 1.5)}" if big else "",
        )
        row(
            f"{jobs:,} jobs: SIGHUP reload",
            "crond",
            summary(reload, "s"),
            f"target < 1.5 s (median): {verdict(statistics.median(reload) < 1.5)}" if big else "",
        )
        row(f"{jobs:,} jobs: peak memory", "crond", f"VmHWM {peak * 1024 / 1e6:.1f} MB")
    for system in common.systems(common.want_peers(args))[1:]:
        if why := system.missing():
            common.skipped(system, why)
            continue
        for jobs in SIZES:
            timeout = 60.0 if system.name == "yacron" else 120.0
            text = peer_starts(system, jobs, 1 if system.name == "yacron" else starts, timeout)
            note = ""
            if text.startswith("ready median"):
                theirs = float(text.split()[2])
                note = f"crond/{system.name} ready {common.ratio(ours[jobs], theirs)}"
            row(f"{jobs:,} jobs: ready, peak", system.name, text, note)


if __name__ == "__main__":
    main()
