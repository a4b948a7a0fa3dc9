"""The start of a `crond` command: wall and CPU time, and what it imports.

    .venv/bin/python bench/bench_cli_start.py [--quick] [--before REV]

Commands that need none of the daemon's machinery (`--version`; `ps`, `pause`, `status`
against no daemon; `health`) are run as whole processes, median of 10 (3 with --quick),
beside `crond validate` of a one-job file (which loads the file: pydantic). For each:
the wall time, the CPU time (user + system, from the child's rusage), and which of the
heavy modules it imported (asyncio, pydantic, structlog, yaml, the scheduler, sqlite3,
httpx). The tests start the binary hundreds of times: its start is paid each time.

With `--before REV`, the same commands from this repository's crond/ at REV, run the
same way in the same run, and the ratio (now / before) of each median. Both are run as
`python -c "...main()"` with crond's directory first on sys.path (the bytecode written
first), so that the two differ only by crond's own code.

Figures are printed, never asserted.
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import common
from common import row

HEAVY = ("asyncio", "pydantic", "structlog", "yaml", "crond.schedule", "sqlite3", "httpx")

# Runs crond's main with `root` first on sys.path; at exit, writes the heavy modules that
# were imported to the file named by CROND_BENCH_IMPORTS (when set).
_WRAPPER = """
import os, sys
sys.path.insert(0, {root!r})
sys.argv[0] = "crond"
try:
    from crond.cli import main
    main()
finally:
    out = os.environ.get("CROND_BENCH_IMPORTS")
    if out:
        heavy = {heavy!r}
        seen = sorted(h for h in heavy if h in sys.modules)
        with open(out, "w") as f:
            f.write(" ".join(seen))
"""

FILE = """\
daemon:
  control_socket: {sock}
jobs:
  tick: {{cron: '0 3 * * *', command: 'true'}}
"""


def commands(work: Path) -> list[tuple[str, list[str]]]:
    config = work / "jobs.yaml"
    config.write_text(FILE.format(sock=work / "no-daemon.sock"))
    config.chmod(0o600)
    return [
        ("--version", ["--version"]),
        ("ps --socket P (no daemon)", ["ps", str(config), "--socket", str(work / "none.sock")]),
        ("ps FILE (no daemon)", ["ps", str(config)]),
        ("pause FILE JOB (no daemon)", ["pause", str(config), "tick"]),
        ("health (no liveness file)", ["health", "--liveness-file", str(work / "none")]),
        ("status FILE (no store)", ["status", str(config), "--state-dir", "none"]),
        ("validate FILE (1 job)", ["validate", str(config)]),
    ]


def one(argv: list[str], imports: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run."""
    env = {**os.environ, "CROND_BENCH_IMPORTS": str(imports)}
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    proc.returncode = 0  # reaped here: Popen must not wait for it again
    return wall, usage.ru_utime + usage.ru_stime


def measure(
    roots: list[Path], args: list[str], runs: int, work: Path
) -> list[tuple[float, float, str]]:
    """For each root: median wall s, median CPU s, and the heavy modules imported. The
    roots take turns, run by run, so that a change of the machine's load hits them alike."""
    imports = work / "imports.txt"
    walls: list[list[float]] = [[] for _ in roots]
    cpus: list[list[float]] = [[] for _ in roots]
    seen = ["?" for _ in roots]
    for _ in range(runs):
        for i, root in enumerate(roots):
            code = _WRAPPER.format(root=str(root), heavy=HEAVY)
            imports.unlink(missing_ok=True)
            wall, cpu = one([sys.executable, "-c", code, *args], imports)
            walls[i].append(wall)
            cpus[i].append(cpu)
            seen[i] = (imports.read_text() or "-") if imports.exists() else "?"
    return [
        (statistics.median(w), statistics.median(c), s)
        for w, c, s in zip(walls, cpus, seen, strict=True)
    ]


def checkout(rev: str, into: Path) -> Path:
    """crond/ of this repository at `rev`, compiled, under `into`."""
    archive = subprocess.run(["git", "-C", str(common.ROOT), "archive", rev, "crond"],
                             check=True, capture_output=True).stdout  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    compileall.compile_dir(into / "crond", quiet=1)
    return into


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--before", metavar="REV", help="also crond at this revision, and ratios")
    args = p.parse_args()
    runs = 3 if args.quick else 10
    common.header(f"a command's start: median of {runs} (wall, CPU = user + sys)")
    with tempfile.TemporaryDirectory(prefix="bench-cli-start-") as tmp:
        work = Path(tmp)
        roots = [common.ROOT] + ([checkout(args.before, work / "before")] if args.before else [])
        for label, argv in commands(work):
            figures = measure(roots, argv, runs, work)
            for (wall, cpu, seen), who in zip(figures, ["crond", args.before], strict=False):
                text = f"wall {wall * 1000:6.1f} ms  CPU {cpu * 1000:6.1f} ms"
                row(label if who == "crond" else "", str(who)[:11], text, f"imports: {seen}")
            if len(figures) == 2:
                (wall, cpu, _), (wall0, cpu0, _) = figures
                row("", "now/before", f"wall {wall / wall0:.2f}x  CPU {cpu / cpu0:.2f}x")


if __name__ == "__main__":
    main()
