"""Loading a 10,000-job schedules file: `crond validate`, and the daemon's start and reload.

    .venv/bin/python bench/bench_load.py [--quick] [--compare-with DIR]

The file: half cron jobs in four zones, half interval jobs, with defaults (the generator
below). Each figure is taken over 5 runs (3 with --quick):

- the wall time of the whole `crond validate FILE` process, imports included, and its
  CPU time (steadier than wall time on a shared machine);
- the phases of a load inside one process (a child Python, so that the tree measured is
  the one imported): imports, `loader.loads`, the DST warnings, the scheduler entries, and
  the YAML passes alone (the first pass, which locates only the `cron` lines, and the
  located one, which a file with a mistake gets);
- a real `crond run FILE --log-format json`: spawn to `daemon.started`, SIGHUP to
  `config.reloaded` (each with the daemon's CPU time, from /proc, 10 ms ticks), and its
  resident memory once idle after each.

The baseline, in the same run: PyYAML's C loader (`yaml.load`, CSafeLoader) and
`json.loads` of the same data. With `--compare-with DIR` (the parent directory of another
`crond/` package, e.g. an older checkout), every figure is also taken for that tree,
interleaved run by run: a before/after on a noisy machine. Targets: validate < 1 s,
ready and reload < 1.5 s, RSS < 80 MB.
"""

from __future__ import annotations

import functools
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import common
from common import row, summary, verdict

JOBS = 10_000
TARGETS = {"validate": 1.0, "ready": 1.5, "reload": 1.5, "rss": 80.0}
_STATE = Path(tempfile.mkdtemp(prefix="bench-load-state-"))
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Sydney"]

# Runs in a child Python: the in-process phases of one load, as JSON on stdout.
PHASES = r"""
import gc, json, sys, time
t0 = time.perf_counter()
import crond.cli
from crond.config import loaded, loader, model, problems
from crond.config import yamlsource
from crond.when import plan as scheduler
from crond.clock import SystemClock
out = {"imports": time.perf_counter() - t0}
text = open(sys.argv[1], encoding="utf-8").read()
def timed(name, fn):
    start = time.perf_counter()
    value = fn()
    out[name] = time.perf_counter() - start
    return value
cfg = timed("loader.loads", lambda: loader.loads(text, sys.argv[1]))
now = SystemClock().now()
timed("dst warnings", lambda: loaded.dst_warnings(cfg, now))
timed("scheduler entries", lambda: [scheduler.make_entry(j, now) for j in cfg.jobs.values()])
gc.disable()  # the YAML passes alone, without the collector
timed("yaml, first pass", lambda: yamlsource.parse(text, frozenset({"cron"})))
timed("yaml, located pass", lambda: yamlsource.parse(text))
print(json.dumps(out))
"""

Figures = dict[str, list[float]]


def make_file(path: Path, jobs: int) -> None:
    """Cron jobs in four zones and interval jobs, with defaults (seeded: the same file)."""
    random.seed(1)
    lines = ["timezone: Europe/Berlin", "defaults:", "  grace: 2m", "  env: {LANG: C.UTF-8}"]
    lines.append("jobs:")
    for i in range(jobs):
        if i % 2:
            minute, hour = random.randint(0, 59), random.randint(0, 23)
            days = random.choice(["*", "mon-fri", "0,6"])
            lines += [
                f"  job-{i}:",
                f'    cron: "{minute} {hour} * * {days}"',
                f"    timezone: {random.choice(ZONES)}",
                f"    command: echo {i}",
                "    timeout: 1h",
            ]
        else:
            lines += [
                f"  job-{i}:",
                f"    every: {random.randint(1, 120)}m",
                f"    command: [echo, '{i}']",
                "    jitter: 30s",
            ]
    path.write_text("\n".join(lines) + "\n")


def env_for(tree: str | None) -> dict[str, str]:
    env = dict(os.environ)
    # The state store on, as by default, in a place of the bench's own.
    env["STATE_DIRECTORY"] = str(_STATE)
    if tree:
        env["PYTHONPATH"] = tree  # ahead of the editable install's finder
    return env


def validate(path: Path, tree: str | None) -> dict[str, float]:
    """Wall time, and the CPU time of the process itself (less at the mercy of the
    machine's other load than wall time: a steadier figure for a before/after)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [common.CROND, "validate", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env_for(tree),
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"validate failed with status {proc.returncode}")
    return {"validate": wall, "validate, cpu": usage.ru_utime + usage.ru_stime}


def phases(path: Path, tree: str | None) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-P", "-c", PHASES, str(path)],  # -P: not the current directory's
        capture_output=True,
        env=env_for(tree),
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def rss_mb(pid: int) -> float:
    return int(common.status_fields(Path(f"/proc/{pid}/status"))["VmRSS"].split()[0]) / 1024


def cpu_s(pid: int) -> float:
    """User and system CPU time of `pid` so far (/proc/PID/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Events:
    """Reads a daemon's JSON log on a thread; `wait(name, after)` gives when it came."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.seen: list[tuple[str, float]] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:  # read to the end: a full pipe would stall the daemon
            now = time.perf_counter()
            try:
                event = str(json.loads(raw).get("event", ""))
            except ValueError:
                event = ""
            with self.cond:
                self.seen.append((event, now))
                self.cond.notify_all()

    def wait(self, name: str, after: float, timeout: float = 120) -> float:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for event, at in self.seen:
                    if event == name and at >= after:
                        return at
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit(f"no {name} within {timeout} s: {self.seen[-5:]}")
                self.cond.wait(left)


def daemon(path: Path, tree: str | None, settle: float) -> dict[str, float]:
    """Spawn `crond run`; ready, then RSS; SIGHUP, reloaded, then RSS; stop."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [common.CROND, "run", str(path), "--log-format", "json"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env_for(tree),
    )
    events = Events(proc)
    try:
        ready = events.wait("daemon.started", start) - start
        ready_cpu = cpu_s(proc.pid)  # a little late: the line was read, then this
        time.sleep(settle)
        rss = rss_mb(proc.pid)
        hup = time.perf_counter()
        proc.send_signal(signal.SIGHUP)
        before = cpu_s(proc.pid)
        reload = events.wait("config.reloaded", hup) - hup
        reload_cpu = cpu_s(proc.pid) - before
        time.sleep(settle)
        rss_reloaded = rss_mb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {
        "ready": ready,
        "ready, cpu": ready_cpu,
        "reload": reload,
        "reload, cpu": reload_cpu,
        "rss": rss,
        "rss after reload": rss_reloaded,
    }


def plain_yaml(path: Path) -> dict[str, float]:
    """PyYAML's C loader and json.loads of the same data, in this process."""
    import yaml  # noqa: PLC0415  (only this figure needs it)

    text = path.read_text()
    start = time.perf_counter()
    data = yaml.load(text, Loader=yaml.CSafeLoader)
    loaded = time.perf_counter()
    encoded = json.dumps(data)
    again = time.perf_counter()
    json.loads(encoded)
    return {"yaml.load (CSafeLoader)": loaded - start, "json.loads": time.perf_counter() - again}


def measure(runs: int, trees: dict[str, str | None], path: Path) -> dict[str, Figures]:
    results: dict[str, Figures] = {name: {} for name in [*trees, "baseline"]}
    steps: list[tuple[str, Callable[[], dict[str, float]]]] = []
    for name, tree in trees.items():
        steps.append((name, functools.partial(validate, path, tree)))
        steps.append((name, functools.partial(phases, path, tree)))
        steps.append((name, functools.partial(daemon, path, tree, 1.0)))
    steps.append(("baseline", functools.partial(plain_yaml, path)))
    for run in range(runs):
        print(f"   run {run + 1}/{runs}", flush=True)
        for name, step in steps:  # interleaved: the machine's noise hits each tree alike
            for key, value in step().items():
                results[name].setdefault(key, []).append(value)
    return results


def report(results: dict[str, Figures]) -> None:
    for name, figures in results.items():
        system = "crond" if name == "current" else name
        for key, values in figures.items():
            unit = "MB" if key.startswith("rss") else "s"
            text = summary(values, unit) if unit == "s" else _mb(values)
            note = ""
            if key in TARGETS and name != "baseline":
                passed = statistics.median(values) < TARGETS[key]
                note = f"target < {TARGETS[key]:g} {unit}: {verdict(passed)}"
            row(key, system, text, note)
    if "compared" in results:
        new, old = results["current"], results["compared"]
        for key in new:
            if key in old:
                ratio = common.ratio(statistics.median(new[key]), statistics.median(old[key]))
                row(key, "ratio", f"{ratio} (current / compared, medians)")
    plain = statistics.median(results["baseline"]["yaml.load (CSafeLoader)"])
    loads = statistics.median(results["current"]["loader.loads"])
    row("loader.loads / yaml.load", "ratio", common.ratio(loads, plain))


def _mb(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):.1f} MB  "
        f"(min {min(values):.1f}, max {max(values):.1f}, n={len(values)})"
    )


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--compare-with", metavar="DIR", help="another tree to measure too")
    args = parser.parse_args()
    trees: dict[str, str | None] = {"current": None}
    if args.compare_with:
        trees["compared"] = str(Path(args.compare_with).resolve())
    common.header(f"loading {JOBS:,} jobs: validate, daemon ready and reload, RSS")
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        path = Path(tmp) / "jobs.yaml"
        make_file(path, JOBS)
        report(measure(3 if args.quick else 5, trees, path))


if __name__ == "__main__":
    main()
