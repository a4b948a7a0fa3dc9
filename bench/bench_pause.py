"""Pausing many jobs while one is due: does `pause`/`resume` of 10,000 jobs hold the loop?

    .venv/bin/python bench/bench_pause.py [--quick]

A real `crond run` daemon (its SQLite store on) with 10,000 jobs: `tick`, `every: 1s`
(the stamp command), and 9,999 jobs due in months. Its lateness is crond's own `lag_ms`
of each `job.started` of `tick` (slot to spawn, from the JSON log).

1. Quiet: nobody on the socket, 20 slots (10 with --quick): the baseline.
2. Busy, in the same run: a client pauses the 9,999 other jobs and resumes them
   (`resume --all`) back to back, as fast as the daemon answers, for as many slots.
   The 9,999 are named in 3 requests of 3,333 (a request line is at most 64 KiB; the
   work is the same as `--all`'s, which would pause `tick` too).

Printed: the medians (and p99, max), the added lateness (busy median minus quiet median),
and each pause and resume's round trip. Target: < 5 ms added. Figures are printed, never
asserted. CROND_BENCH_BINARY=PATH measures another `crond` instead (an older checkout's:
a before and after on the same machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import common
from common import row, summary, verdict

from crond.control import client

JOBS = 10_000
PER_REQUEST = 3_333  # names in one request: under the 64 KiB line
TARGET_ADDED_MS = 5.0
common.CROND = os.environ.get("CROND_BENCH_BINARY", common.CROND)


def tick_lags(log: Path, start: int, end: int) -> list[float]:
    """`tick`'s lag_ms in the log's bytes [start, end)."""
    with log.open("rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    lags = []
    for line in data.splitlines():
        if b'"job.started"' in line and b'"tick"' in line:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                event = json.loads(line)
                if event["job"] == "tick":
                    lags.append(float(event["lag_ms"]))
    return lags


def pause_and_resume(sock: Path, names: list[str], stop: threading.Event,
                     times: dict[str, list[float]]) -> None:  # fmt: skip
    """Back to back until `stop`: pause `names` (in requests of PER_REQUEST), resume all."""

    def ask(cmd: str, args: dict[str, object]) -> None:
        for answer in client.request(sock, cmd, args, timeout=120):
            if answer.get("ok") is False:
                raise RuntimeError(f"{cmd}: {answer}")

    while not stop.is_set():
        began = time.perf_counter()
        for at in range(0, len(names), PER_REQUEST):
            ask("pause", {"jobs": names[at : at + PER_REQUEST]})
        times["pause"].append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        ask("resume", {"all": True})
        times["resume"].append((time.perf_counter() - began) * 1000)


def main() -> None:
    args = common.parser(__doc__).parse_args()
    slots = 10 if args.quick else 20
    common.header(f"pause and resume of {JOBS - 1:,} jobs while one is due every second")
    with tempfile.TemporaryDirectory(prefix="bench-pause-") as tmp:
        work = Path(tmp)
        out = work / "stamps.txt"
        tick = common.stamp_jobs(1, out, every="1s", prefix="tick")[0]
        far = common.far_jobs(JOBS - 1, work / "far.txt")
        others = [common.JobDef(f"f{i}", job.command, cron=job.cron) for i, job in enumerate(far)]
        launched = common.CrondSystem().launch(
            [common.JobDef("tick", tick.command, every="1s"), *others], work, 300
        )
        log = work / "crond.log"
        times: dict[str, list[float]] = {"pause": [], "resume": []}
        try:
            time.sleep(1.5)  # past the first slots after the start
            begin = log.stat().st_size
            time.sleep(slots)
            middle = log.stat().st_size
            stop = threading.Event()
            names = [job.name for job in others]
            sock = work / "crond.sock"
            thread = threading.Thread(
                target=pause_and_resume, args=(sock, names, stop, times), daemon=True
            )
            thread.start()
            time.sleep(slots)
            stop.set()
            thread.join(300)
            end = log.stat().st_size
        finally:
            launched.stop()
        quiet, busy = tick_lags(log, begin, middle), tick_lags(log, middle, end)
    row("tick's lag_ms, nobody on the socket", "crond", summary(quiet, p99=True))
    row("  while pause/resume run back to back", "crond", summary(busy, p99=True))
    if quiet and busy:
        added = statistics.median(busy) - statistics.median(quiet)
        note = f"target < {TARGET_ADDED_MS:g} ms: {verdict(added < TARGET_ADDED_MS)}"
        row("  added lateness (median)", "crond", f"{added:+.2f} ms", note)
        worst = max(busy) - statistics.median(quiet)
        row("  added lateness (worst slot)", "crond", f"{worst:+.2f} ms")
    row(f"pause of {len(others):,} jobs ({-(-len(others) // PER_REQUEST)} requests)", "crond",
        summary(times["pause"]))  # fmt: skip
    row(f"resume --all ({len(others):,} jobs)", "crond", summary(times["resume"]))


if __name__ == "__main__":
    main()
