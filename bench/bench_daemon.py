"""The daemon, measured for real: start lag, 200 jobs together, a burst of 1,000, idle cost.

Runs the installed `crond run` on generated files. Every job is the same command, so a
measurement includes the shell's own start: `sh -c 'date +%s.%N >> FILE'`. The start of
a run is the instant the job wrote, compared with its slot. Prints medians and ratios to
a baseline measured in the same run (a bare loop of the same spawns). Not a test.

    .venv/bin/python bench/bench_daemon.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CROND = shutil.which("crond", path=str(Path(sys.executable).parent)) or "crond"
CMD = "date +%s.%N >> {out}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def start_daemon(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [CROND, "run", str(config), "--log-format", "json"],
            stderr=fh,
            stdout=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + 60
    while b"daemon.started" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"crond did not start: {log.read_text()[-2000:]}")
        time.sleep(0.01)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


def stamps(path: Path) -> list[float]:
    if not path.exists():
        return []
    return [float(x) for x in path.read_text().split()]


def lag_one_job(work: Path, boundaries: int) -> list[float]:
    """Milliseconds from each slot to the job's own first instruction."""
    out = work / "lag.txt"
    cfg = work / "lag.yaml"
    cfg.write_text(
        f"jobs:\n  lag:\n    every: 1s\n    command: {json.dumps(CMD.format(out=out))}\n"
    )
    proc = start_daemon(cfg, work / "lag.log")
    while len(stamps(out)) < boundaries:
        time.sleep(0.2)
    stop(proc)
    return [(t - int(t)) * 1000 for t in stamps(out)[:boundaries]]


def together(work: Path, jobs: int, every: int, boundaries: int) -> list[float]:
    """For each boundary: ms from the slot to the last of `jobs` jobs due together."""
    out = work / f"together{jobs}.txt"
    cfg = work / f"together{jobs}.yaml"
    cmd = json.dumps(CMD.format(out=out))
    body = "".join(f"  j{i}:\n    every: {every}s\n    command: {cmd}\n" for i in range(jobs))
    cfg.write_text("jobs:\n" + body)
    proc = start_daemon(cfg, work / f"together{jobs}.log")
    deadline = time.monotonic() + every * (boundaries + 3) + 30
    while len(stamps(out)) < jobs * boundaries and time.monotonic() < deadline:
        time.sleep(0.2)
    stop(proc)
    by_slot: dict[int, list[float]] = {}
    for t in stamps(out):  # a start belongs to the latest slot before it
        by_slot.setdefault(int(t) - int(t) % every, []).append(t)
    return [(max(ts) - slot) * 1000 for slot, ts in sorted(by_slot.items()) if len(ts) == jobs]


def bare_loop(work: Path, jobs: int) -> float:
    """ms from the first spawn to the last job's own start, spawning with Popen in a loop."""
    out = work / "bare.txt"
    out.unlink(missing_ok=True)
    cmd = CMD.format(out=out)
    t0 = time.time()
    procs = [subprocess.Popen(["/bin/sh", "-c", cmd], start_new_session=True) for _ in range(jobs)]
    for p in procs:
        p.wait()
    return (max(stamps(out)) - t0) * 1000


def proc_stat(pid: int) -> tuple[float, int, int]:
    """(cpu seconds, voluntary+involuntary context switches, rss KiB)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    status = Path(f"/proc/{pid}/status").read_text()
    values = {}
    for line in status.splitlines():
        key, _, rest = line.partition(":")
        values[key] = (rest.split() or ["0"])[0]
    switches = int(values["voluntary_ctxt_switches"]) + int(values["nonvoluntary_ctxt_switches"])
    return cpu, switches, int(values["VmRSS"])


def idle(work: Path, jobs: int, seconds: float) -> tuple[float, float, int]:
    """(% of one core, wake-ups per second, rss MiB) with `jobs` jobs scheduled far ahead."""
    cfg = work / f"idle{jobs}.yaml"
    body = "".join(f"  j{i}:\n    cron: '0 0 1 1 *'\n    command: 'true'\n" for i in range(jobs))
    cfg.write_text("jobs:\n" + body)
    proc = start_daemon(cfg, work / f"idle{jobs}.log")
    time.sleep(2)  # let start-up settle
    cpu0, sw0, _ = proc_stat(proc.pid)
    time.sleep(seconds)
    cpu1, sw1, rss = proc_stat(proc.pid)
    stop(proc)
    return (cpu1 - cpu0) / seconds * 100, (sw1 - sw0) / seconds, rss // 1024


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"median {statistics.median(values):7.2f}  min {min(values):7.2f}  "
        f"p99 {p99:7.2f}  max {max(values):7.2f}  (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    n = 10 if args.quick else 30
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        lags = lag_one_job(work, n)
        p99 = sorted(lags)[min(len(lags) - 1, int(len(lags) * 0.99))]
        print(f"start lag, 1 job (ms):          {summary(lags)}")
        print(
            f"  target median < 5 ms: {verdict(statistics.median(lags) < 5)}; "
            f"p99 < 20 ms: {verdict(p99 < 20)}"
        )

        last200 = together(work, 200, 2, 3)
        print(f"200 jobs together, last (ms):   {summary(last200)}")
        print(f"  target all within 100 ms: {verdict(bool(last200) and max(last200) < 100)}")

        burst = together(work, 1000, 5, 2)
        bare = [bare_loop(work, 1000) for _ in range(3)]
        ratio = statistics.median(burst) / statistics.median(bare)
        print(f"1,000 jobs burst, last (ms):    {summary(burst)}")
        print(f"bare Popen loop, last (ms):     {summary(bare)}")
        print(f"  ratio {ratio:.2f}x; target within 1.5x: {verdict(ratio <= 1.5)}")

        seconds = 10.0 if args.quick else 60.0
        for jobs in (1_000, 10_000):
            core, wakes, rss = idle(work, jobs, seconds)
            print(
                f"idle, {jobs:>6,} jobs over {seconds:.0f}s: {core:.3f}% of a core, "
                f"{wakes:.1f} wake-ups/s, {rss} MiB rss"
            )
            if jobs == 10_000:
                print(
                    f"  target < 0.2% of a core: {verdict(core < 0.2)}; "
                    f"< 80 MiB: {verdict(rss < 80)}"
                )


if __name__ == "__main__":
    main()
