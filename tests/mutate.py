"""`make mutate`: mutation testing of crond.when's pure core, with mutmut.

    .venv/bin/python tests/mutate.py [--only MODULE ...] [--dir DIR] [--max-children N]

mutmut changes one small thing at a time in the code (a `>` into `>=`, a constant, a
dropped argument: a "mutant") and runs the tests that reach it; a mutant no test notices
"survives". The modules are those `[tool.mutmut]` in pyproject.toml names (the cron
grammar, zones, the zone timeline, the timings and their notes, the richer cron fields
`cronforms`, the calendars `calendars` and a job's fires through them `dayfilter`, the
planner's `rules` and `heap`), the tests those it lists. Each mutant runs in a process
of its own, on caches emptied before each test (tests/fresh_caches.py). The brute-force
oracles of the calendar code (tests/when/test_cron_fields_oracle.py,
test_calendar_oracle.py) see MUTANT_UNDER_TEST, which mutmut sets, and compare a few
years that hold every shape instead of 2000-2037.

The run happens in a scratch copy of the checkout (DIR, by default crond-mutate in the
temporary directory, emptied first), so the checkout is never changed and its tests keep
running meanwhile; mutmut's own commands work there afterwards (`cd DIR && mutmut show
NAME`, `mutmut browse`). It prints the score of each module (killed / all), then every
survivor with its change, marked with the reason tests/MUTANTS.md gives when it lists it
as equivalent. It fails when a module scores under 95 % or a survivor is not listed.
It takes long: about 15 minutes on two cores for the modules before the calendar code;
`--only cronforms calendars dayfilter` (1,211 mutants) ran well over an hour with
`--max-children 1` on two cores shared with other test runs (about 10 mutants a
minute, plus some 10 minutes of mutmut's own full runs of the tests first). Not part
of `make test` nor CI.

mutmut is the `mutate` extra of pyproject.toml, not a dev tool: `make mutate` installs it
(`pip install -e '.[dev,mutate]'`) before it runs this; `make test` does not.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANTS_MD = ROOT / "tests" / "MUTANTS.md"
BAR = 0.95
# mutmut's verdicts: these mean some test (or the time limit) caught the mutant.
CAUGHT = {"killed", "timeout", "segfault", "caught by type check"}


@dataclass(frozen=True)
class Survivor:
    name: str  # mutmut's, e.g. crond.schedule.rules.x__due__mutmut_9
    module: str  # rules
    function: str  # _due, or Schedule.put
    old: str  # the changed code, each side's lines stripped and joined
    new: str
    status: str


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="modules, e.g. rules timing")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir(), "crond-mutate"))
    parser.add_argument("--max-children", type=int, default=None)
    args = parser.parse_args(argv)
    if importlib.util.find_spec("mutmut") is None:
        print("mutmut is not installed: `make mutate` installs it (pyproject.toml's `mutate`)")
        return 1
    work: Path = args.dir
    _copy_checkout(work)
    names = [f"crond.{_package(module)}.{module}.*" for module in args.only]
    command = [sys.executable, "-m", "mutmut", "run", *names]
    if args.max_children:
        command += ["--max-children", str(args.max_children)]
    log = work / "mutmut.log"
    print(f"mutmut runs in {work} (its output: {log})", flush=True)
    began = time.monotonic()
    with log.open("wb") as out:
        done = subprocess.run(command, cwd=work, stdout=out, stderr=subprocess.STDOUT, check=False)
    minutes = (time.monotonic() - began) / 60
    if done.returncode != 0:
        print(log.read_text(errors="replace")[-3000:])
        print(f"mutmut failed (exit {done.returncode}) after {minutes:.1f} min")
        return 1
    results = _results(work)
    if args.only:
        results = {n: s for n, s in results.items() if _module(n) in args.only}
    survivors = [_survivor(work, n, s) for n, s in sorted(results.items()) if s not in CAUGHT]
    known = _known()
    ok = _report(results, survivors, known, minutes)
    seen = {(s.module, s.function, s.old, s.new) for s in survivors}
    stale = [k for k in known if k not in seen and (not args.only or k[0] in args.only)]
    for module, function, old, new in stale:
        print(f"no longer a survivor, in tests/MUTANTS.md: {module}.{function}: `{old}` → `{new}`")
    return 0 if ok else 1


def _copy_checkout(work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc")
    for part in ("crond", "tests", "docs"):  # docs: tests compare its tables with crond
        shutil.copytree(ROOT / part, work / part, ignore=skip)
    shutil.copy2(ROOT / "pyproject.toml", work / "pyproject.toml")


def _results(work: Path) -> dict[str, str]:
    text = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {}
    for line in text.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name.startswith("crond."):
            found[name] = status
    return found


def _package(module: str) -> str:
    """The package of a mutated module: the rules of a wake are crond.schedule's."""
    return "schedule" if module in {"rules", "heap"} else "when"


def _module(name: str) -> str:
    """crond.schedule.rules.x__due__mutmut_9 -> rules"""
    return name.split(".x", maxsplit=1)[0].rsplit(".", 1)[-1]


def _function(name: str) -> str:
    """x__due__mutmut_9 -> _due; xǁScheduleǁput__mutmut_2 -> Schedule.put"""
    mangled = name.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]
    if mangled.startswith("xǁ"):
        return ".".join(mangled[2:].split("ǁ"))
    return mangled[2:]


def _survivor(work: Path, name: str, status: str) -> Survivor:
    diff = subprocess.run(
        [sys.executable, "-m", "mutmut", "show", name],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.splitlines()
    old = " ".join(d[1:].strip() for d in diff if d.startswith("-") and not d.startswith("---"))
    new = " ".join(d[1:].strip() for d in diff if d.startswith("+") and not d.startswith("+++"))
    return Survivor(name, _module(name), _function(name), old, new, status)


_ROW = re.compile(r"^\|\s*(\w+)\s*\|\s*([\w.]+)\s*\|\s*`(.*)` → `(.*)`\s*\|\s*(.+?)\s*\|\s*$")


def _known() -> dict[tuple[str, str, str, str], str]:
    """tests/MUTANTS.md's table: (module, function, old, new) -> why it is equivalent."""
    known = {}
    for line in MUTANTS_MD.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line.replace("\\|", "|"))
        if match:
            module, function, old, new, why = match.groups()
            known[(module, function, old, new)] = why
    return known


def _report(
    results: dict[str, str],
    survivors: Iterable[Survivor],
    known: dict[tuple[str, str, str, str], str],
    minutes: float,
) -> bool:
    by_module: dict[str, list[str]] = defaultdict(list)
    for name, status in results.items():
        by_module[_module(name)].append(status)
    print(f"\nmutation score per module ({minutes:.1f} min; the bar: {BAR:.0%})")
    ok = True
    for module, statuses in sorted(by_module.items()):
        caught = sum(s in CAUGHT for s in statuses)
        score = caught / len(statuses)
        ok = ok and score >= BAR
        verdict = "" if score >= BAR else "  UNDER THE BAR"
        print(f"  {module:<10} {score:7.1%}  ({caught} of {len(statuses)} killed){verdict}")
    listed = 0
    lines = []
    for s in survivors:
        why = known.get((s.module, s.function, s.old, s.new))
        listed += why is not None
        mark = f"equivalent: {why}" if why else f"NOT IN tests/MUTANTS.md ({s.status})"
        lines.append(f"  {s.module}.{s.function}: `{s.old}` → `{s.new}`\n      {mark}  [{s.name}]")
    count = len(lines)
    print(f"\nsurvivors: {count}, of which {listed} listed as equivalent in tests/MUTANTS.md")
    print("\n".join(lines))
    ok = ok and listed == count
    print("\nmake mutate:", "PASS" if ok else "FAIL")
    return ok


if __name__ == "__main__":
    sys.exit(main())
