"""`crond validate` answers any file, at once, in lines it cannot be tricked into forging.

Hypothesis writes schedules-like files: mutations of a valid one, random structures, odd
scalars, anchors and aliases, tags, deep nesting, control characters and line breaks of
every kind. For each, the validation `crond validate` runs (`loader.loads`, and the
command itself through click) must raise nothing but ConfigError, render each problem
as exactly one line, and answer within a second. The real binary is run on the worst
files known (an alias bomb, deep nesting) too.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crond.cli import main
from crond.config import loader, model, problems

ROOT = Path(__file__).resolve().parents[2]
# CPU seconds for any one file: the work it costs, not the waits for a core on a busy
# machine (the suite runs on several workers), which would count in wall time.
BUDGET = 1.0
BASE = """\
timezone: Europe/Berlin
notifiers:
  ops:
    webhook: https://hooks.example.com/crond
    headers: {Authorization: "Bearer ${CROND_FUZZ_TOKEN}"}
  page: {command: [page, --to, ops], repeat: 0s}
defaults:
  grace: 2m
  env: {LANG: C.UTF-8}
  notify: {ops: [failed, lost]}
daemon:
  metrics: 127.0.0.1:9464
jobs:
  base: &common
    every: 5m
    command: [echo, common]
  backup:
    cron: "30 2 * * *"
    command: pg_dump app
    timeout: 2h
    env: {A: "2", PORT: 8080}
    ping: https://hc-ping.com/${CROND_FUZZ_PING}
    warn_after: 45m
    notify: {page: [failed, long_running], ops: []}
  merged:
    <<: *common
    jitter: 30s
  report:
    cron: "0 9 * * mon-fri"
    timezone: America/New_York
    python: myapp.reports:send_daily
    args: [eu, 1, {k: v}]
    kwargs: {limit: 100}
    retry: {attempts: 3, delay: 10s}
"""

# The pieces files are made of: what people write, and what attackers and accidents do.
FIELDS = [*model.Job.model_fields, *model.Config.model_fields, "<<", "x-a", "attempts"]
FIELDS += [*model.Notifier.model_fields, "ops", "page"]
ODD_KEYS = ['"a\\nb.yaml:1:1: forged"', "'it''s'", "? [a, b]", "&k key", "!!int 0x10", "~"]
ODD_SCALARS = [
    *["", "~", "null", "yes", "off", "0x_", "0o17", "1:30", "2026-02-30", "2026-01-01"],
    *["2026-01-01T10:00:00Z", ".inf", ".nan", "-0", "1e400", "=", "<<", "'quoted'", '"\\x01"'],
    *['"\\u2028"', '"a\\nb"', "15 mins", "1.5h", "* * * * *", "@reboot", "m:f", "[]", "{}"],
    *["1" * 5000, "1" + ":1" * 3000, "0x" + "f" * 2000, "a" * 3000, "9" * 1001],
]
TAGS = [*["!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!!binary", "!!set"]]
TAGS += ["!!map", "!!seq", "!!omap", "!!python/object/apply:os.system", "!local", "!"]
CHARS = [*"\x00\x01\x1b\x7f\x85\t\r\n\u2028\u2029\ufeff\ufffe\u202e", "\r\n", " ", "#", ":"]
CHARS += [*"-?[]{},&*!|>'\"%@`", "\ud800", "é", "\U0001f600"]


def deep(levels: int, opener: str = "[") -> str:
    closer = {"[": "]", "{": "}"}[opener]
    inner = "x" if opener == "[" else "k: x"
    if opener == "{":
        return "{k: " * levels + "x" + "}" * levels
    return opener * levels + inner + closer * levels


def bomb(levels: int, width: int) -> str:
    lines = ["b0: &b0 [" + ",".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"b{i}: &b{i} [" + ",".join([f"*b{i - 1}"] * width) + "]")
    return "\n".join(lines) + f"\nuse: *b{levels - 1}\n"


@st.composite
def values(draw: st.DrawFn) -> str:
    """One value: a scalar, maybe tagged or anchored, an alias, or a flow collection."""
    choice = draw(st.integers(0, 7))
    if choice == 0:
        value = draw(st.sampled_from(ODD_SCALARS))
    elif choice == 1:
        value = f"{draw(st.sampled_from(TAGS))} {draw(st.sampled_from(ODD_SCALARS[:20]))}"
    elif choice == 2:
        value = f"*{draw(st.sampled_from(['common', 'a', 'b', 'k', 'nope']))}"
    elif choice == 3:
        value = deep(draw(st.sampled_from([3, 63, 64, 65, 300, 490, 1200])))
    elif choice == 4:
        value = deep(draw(st.sampled_from([10, 70, 200])), "{")
    elif choice == 5:
        items = draw(st.lists(st.sampled_from(ODD_SCALARS[:25]), max_size=5))
        value = f"{draw(st.sampled_from(TAGS))} [{', '.join(items)}]"
    elif choice == 6:
        value = "".join(draw(st.lists(st.sampled_from([*CHARS, *"ab1 "]), max_size=12)))
    else:
        value = draw(st.sampled_from(["x", "5m", "[echo, hi]", "{A: '1'}", "Europe/Berlin"]))
    if draw(st.integers(0, 5)) == 0:
        value = f"&{draw(st.sampled_from(['a', 'b', 'common']))} {value}"
    return value


@st.composite
def structured(draw: st.DrawFn) -> str:
    """A schedules-shaped file built line by line from the pieces above."""
    lines = []
    if draw(st.booleans()):
        lines.append(bomb(draw(st.integers(2, 9)), draw(st.integers(2, 12))))
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(FIELDS + ODD_KEYS))
        lines.append(f"{key}: {draw(values())}")
    lines.append("jobs:")
    for i in range(draw(st.integers(0, 3))):
        lines.append(f"  {draw(st.sampled_from([f'j{i}', *ODD_KEYS]))}:")
        for _ in range(draw(st.integers(0, 5))):
            key = draw(st.sampled_from(FIELDS + ODD_KEYS))
            lines.append(f"    {key}: {draw(values())}")
    return "\n".join(lines) + "\n"


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """BASE with a few random edits: characters in, spans out, lines moved or replaced."""
    text = BASE
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.integers(0, 4))
        if edit == 0:
            text = text[:at] + draw(st.sampled_from(CHARS)) + text[at:]
        elif edit == 1:
            text = text[:at] + text[at + draw(st.integers(1, 20)) :]
        elif edit == 2:
            text = text[:at] + f" {draw(values())}" + text[at:]
        elif edit == 3:
            lines = text.splitlines(keepends=True)
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(lines)))
            text = "".join(lines)
        else:
            text = re.sub(r": [^\n]*", f": {draw(values())}".replace("\\", "\\\\"), text, count=1)
    return text


files = st.one_of(mutated(), structured())


def test_the_file_the_mutations_start_from_is_valid() -> None:
    assert len(loader.loads(BASE).jobs) == 4


def check(text: str) -> None:
    """The properties every answer has: ConfigError or a Config, one line a problem,
    within BUDGET."""
    start = time.thread_time()
    try:
        loader.loads(text, "s.yaml")
        found = []
    except problems.ConfigError as exc:
        found = exc.problems
        assert found
        rendered = str(exc)
    elapsed = time.thread_time() - start
    assert elapsed < BUDGET, f"{elapsed:.2f} s"
    for problem in found:
        assert len(str(problem).splitlines()) == 1, str(problem)
        assert str(problem).startswith("s.yaml")
        assert problem.line >= 1
    if found:
        assert len(rendered.splitlines()) == len(found)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=files)
def test_any_file_is_answered_in_one_line_a_problem_within_a_second(text: str) -> None:
    check(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=files)
def test_the_validate_command_answers_any_file(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.yaml"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))  # a lone surrogate: not UTF-8
        start = time.thread_time()
        result = CliRunner().invoke(main, ["validate", str(path)])
        elapsed = time.thread_time() - start
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert elapsed < BUDGET
    if result.exit_code == 1:
        lines = result.stderr.splitlines()
        assert lines[-1].startswith(f"{path}: ")
        assert lines[-1].endswith(("error", "errors"))
        count = int(lines[-1].rsplit(" ", 2)[-2])
        assert len(lines) == count + 1  # each problem one line, then the count


# --- the real binary on the worst files known -------------------------------------------


def alias_bomb(levels: int) -> str:
    lines = ["x-a:", "  a0: &a0 [x,x,x,x,x,x,x,x,x]"]
    for i in range(1, levels):
        lines.append(f"  a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    lines += ["jobs:", "  j:", "    every: 1m", "    python: m:f", f"    args: [*a{levels - 1}]"]
    return "\n".join(lines) + "\n"


DEEP_ARGS = "jobs:\n  j:\n    every: 1m\n    python: m:f\n    args: " + deep(490) + "\n"


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        (alias_bomb(9), ":7:12: x-a.a5.0: ", 'with the alias "*a4"'),
        (alias_bomb(7), ":7:12: x-a.a5.0: ", "more than 100,000 values"),
        (DEEP_ARGS, ":5:72: jobs.j.args.0.0.0.", "nested more than 64 deep"),
        (
            "jobs:\n  j:\n    every: 1m\n    command: !!python/object/apply:os.system [echo, hi]\n",
            ":4:14: jobs.j.command: ",
            'the tag "!!python/object/apply:os.system" is not allowed',
        ),
    ],
    ids=["alias-bomb-9", "alias-bomb-7", "deep-490", "python-tag"],
)
def test_crond_validate_refuses_the_worst_files_at_once(
    tmp_path: Path, text: str, where: str, says: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "crond", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        cwd=ROOT,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child is reaped: counted
    elapsed = sum(after[:2]) - sum(before[:2])  # its user and system CPU time
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{path}{where}" in done.stderr
    assert says in done.stderr
    assert elapsed < BUDGET
