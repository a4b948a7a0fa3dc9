"""The dashboard under load: does `crond web`, with a client refreshing every page once a
second, delay the daemon's starts?

    .venv/bin/python bench/bench_web.py [--quick] [--jobs N]

A real `crond run` daemon (its SQLite store on) with N jobs (1,000; --jobs): `tick`,
`every: 1s` (the stamp command), and the others due in months. Its lateness is crond's
own `lag_ms` of each `job.started` of `tick` (slot to spawn, from the JSON log).

1. Without the dashboard: 20 slots (10 with --quick): the baseline.
2. In the same run, the same number of slots with `crond web` on the same store and a
   client that fetches every page once a second (jobs, a job, a run, now, timeline,
   cluster) with a live stream (/events) open, as a browser left open would.

Printed: the medians (p99, max), the added lateness (busy median minus quiet median) and
the ratio, and each page's response time. Target: < 1 ms added (nothing measurable).
Figures are printed, never asserted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import common
import httpx
from bench_pause import tick_lags
from common import row, summary, verdict

TARGET_ADDED_MS = 1.0
PAGES = ("/", "/jobs/tick", "/now", "/timeline", "/cluster")


def start_web(config: Path, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    log = work / "web.log"
    env = {**os.environ, "STATE_DIRECTORY": str(work)}
    proc = subprocess.Popen(
        [common.CROND, "web", str(config), "--listen", "127.0.0.1:0", "--log-format", "json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
        env=env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if '"web.serving"' in line:
                address = line.split('"address":"', 1)[1].split('"', 1)[0]
                return proc, f"http://{address}"
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"crond web did not start: {log.read_text()[-500:]}")


def refresh(url: str, stop: threading.Event, times: dict[str, list[float]]) -> None:
    """Every page once a second, and a live stream open all along, until `stop`."""
    with httpx.Client(base_url=url, timeout=30) as http, http.stream("GET", "/events") as live:
        while not stop.is_set():
            began = time.monotonic()
            run = http.get("/jobs/tick").text.split('href="/runs/', 1)
            pages = [*PAGES, *(["/runs/" + run[1].split('"', 1)[0]] if len(run) > 1 else [])]
            for page in pages:
                t = time.perf_counter()
                http.get(page).raise_for_status()
                times.setdefault(page.split("/")[1] or "/", []).append(
                    (time.perf_counter() - t) * 1000
                )
            stop.wait(max(0.0, 1.0 - (time.monotonic() - began)))
        live.close()


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()
    slots = 10 if args.quick else 20
    common.header(f"crond web refreshed once a second beside a daemon of {args.jobs:,} jobs")
    with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp:
        work = Path(tmp)
        tick = common.stamp_jobs(1, work / "stamps.txt", every="1s", prefix="tick")[0]
        far = common.far_jobs(args.jobs - 1, work / "far.txt")
        others = [common.JobDef(f"f{i}", job.command, cron=job.cron) for i, job in enumerate(far)]
        launched = common.CrondSystem().launch(
            [common.JobDef("tick", tick.command, every="1s"), *others], work, 300
        )
        log = work / "crond.log"
        times: dict[str, list[float]] = {}
        web = None
        try:
            time.sleep(1.5)  # past the first slots after the start
            begin = log.stat().st_size
            time.sleep(slots)
            middle = log.stat().st_size
            web, url = start_web(work / "crond.yaml", work)
            stop = threading.Event()
            thread = threading.Thread(target=refresh, args=(url, stop, times), daemon=True)
            thread.start()
            time.sleep(slots)
            end = log.stat().st_size
            stop.set()
            thread.join(60)
        finally:
            if web is not None:
                web.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    web.wait(10)
                if web.poll() is None:
                    web.kill()
            launched.stop()
        quiet, busy = tick_lags(log, begin, middle), tick_lags(log, middle, end)
    row("tick's lag_ms, no dashboard", "crond", summary(quiet, p99=True))
    row("  with crond web refreshed every second", "crond", summary(busy, p99=True))
    if quiet and busy:
        added = statistics.median(busy) - statistics.median(quiet)
        note = f"target < {TARGET_ADDED_MS:g} ms: {verdict(added < TARGET_ADDED_MS)}"
        row("  added lateness (median)", "crond", f"{added:+.3f} ms", note)
        row("  ratio (median, with / without)", "crond",
            f"{statistics.median(busy) / statistics.median(quiet):.2f}x")  # fmt: skip
    for page, values in times.items():
        row(f"page /{page.strip('/')}", "crond web", summary(values))


if __name__ == "__main__":
    main()
