"""The fast first pass reads what it accepts exactly as PyYAML does, or gives up.

PyYAML is the oracle: every document here is read by both `yamlfast.parse_fast` and
the PyYAML quick pass (`yamlsource._parse_quick_pyyaml`), and whenever the fast pass
answers, its data (with types and key order) and marks must be PyYAML's. The documents
come from a grammar of the accepted subset and of its near misses, and from the texts
the config tests use, the example file and the benchmark's 10,000-job file.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crond import yamlfast, yamlsource
from crond.yamlsource import Mark
from tests import test_config

ROOT = Path(__file__).resolve().parent.parent
# Keys as written: the fields of a job, and words YAML 1.1 would read as other types.
NAMES = ["a", "b", "cron", "command", "env", "job-1", "A_B", "x.y"]
KEYS = [*NAMES, "off", "yes", "1", "0x10", "null"]
KEEPS = [frozenset(), frozenset({"cron"}), frozenset(KEYS)]


def shape(value: Any) -> Any:
    """`value` with the type of every part, and key order: `1 == True == 1.0` in Python."""
    if isinstance(value, dict):
        return ("dict", [(shape(k), shape(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [shape(v) for v in value])
    return (type(value), repr(value))  # repr: nan is not == nan


def compare(text: str, keep: frozenset[str] = frozenset({"cron"})) -> bool:
    """Whether the fast pass accepted `text`; if so, that it agrees with PyYAML."""
    fast = yamlfast.parse_fast(text, keep)
    try:
        slow = yamlsource._parse_quick_pyyaml(text, keep)
    except Exception:  # noqa: BLE001  (PyYAML's constructor raises ValueError on `0x_`)
        slow = None
    if slow is None or yamlsource.parse(text).problems:
        assert fast is None, "the fast pass accepted what PyYAML has a problem with"
    if fast is None:
        return False
    assert slow is not None
    assert shape(fast.data) == shape(slow.data)
    assert fast.values == slow.values
    assert all(type(mark) is Mark for mark in fast.values.values())
    assert (fast.keys, fast.problems) == ({}, [])
    return True


# --- a grammar of documents: the subset, and its near misses ------------------------------

# Scalars that PyYAML 1.1 types, or nearly does, or refuses to construct.
TYPED_LOOKING = [
    *["on", "off", "On", "OFF", "yes", "No", "y", "n", "true", "False", "TRUE", "tRue"],
    *["0", "-1", "+1", "007", "08", "0o7", "0o", "0x1f", "0b101", "1_000", "1:30", "1:60"],
    *["190:20:30", "-1:30", ".5", "1.", "-.5", "1e3", "1.5e3", "+1.0e-2", "6.8523015e+5"],
    *[".inf", "-.Inf", ".NaN", "~", "null", "Null", "NULL", "nULL", "<", "1h", "5m", "30s"],
    *["2026-01-01", "2026-1-1", "2026-01-01 10:00:00", "2026-01-01T10:00:00Z", "--", "---"],
    *["2026-01-01t10:00:00.5+01:00", "-c", "...", "é…", "\\n", "a:b", "a#b", "a 'b'", "a:"],
]
# Those the subset holds anywhere, flow collections included.
IN_SUBSET = [word for word in TYPED_LOOKING if not set(word) & set(":#'")]
# Plain scalars that PyYAML cannot construct, or that are not scalars at all.
UNTYPED = ["=", "<<", "0x_", "2026-02-30", "-", "?", ":", "*a", "&a", "!a", "|", ">", "%", "@"]
# Characters for scalars: ordinary ones, indicators, and YAML's special spaces and breaks.
MILD = "ab 0.:#'\"-\\é\U0001f600"
ALPHABET = "ab z09._/:#'\"[]{},-?&*!|>%@`~=\\\xa0é…\U0001f600"
RARE = "\t\r\x85\u2028\ufeff\x00\x7f"
ordinary = st.from_regex(r"[a-z/._][a-z0-9 /._-]{0,8}[a-z0-9/._]", fullmatch=True)


class Grammar:
    """Draws the parts of a document. With odds 0, only the subset; otherwise every choice
    is a near miss once in `odds` times (invalid YAML, or outside the subset, or neither:
    `a#b`, `'it''s'`, `1:30`)."""

    def __init__(self, draw: st.DrawFn, odds: int) -> None:
        self.draw, self.odds = draw, odds

    def rarely(self) -> bool:
        # Once in `odds` times. Not at 0: Hypothesis draws bounds far more often than the
        # values between, and shrinks towards 0, towards usual choices.
        return bool(self.odds) and self.draw(st.integers(0, self.odds)) == self.odds // 2

    def pick(self, usual: st.SearchStrategy[str], odd: st.SearchStrategy[str]) -> str:
        return self.draw(odd if self.rarely() else usual)

    def one(self, usual: list[str], odd: list[str]) -> str:
        return self.pick(st.sampled_from(usual), st.sampled_from(odd))

    def keys(self) -> list[str]:
        """The keys of one mapping; rarely, one of them twice."""
        odd = ["~", "<<", "a b", "'a'", '"a"', "x:y", "-k", "? k", "&a k", "[k]", "!k", "k "]
        names = self.draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
        return [self.one([name], [*odd, names[0]]) for name in names]

    def gap(self) -> str:  # after a key's colon, or a dash
        return self.one([" ", " ", " ", "  "], ["", "\t", " \t"])

    def comment(self) -> str:  # after a value
        return self.one(["", "", "", " # c", "   # c: d #", "  #", "  "], ["#c", " \t# c", "\t"])

    def word(self) -> str:
        usual = [ordinary, st.sampled_from(IN_SUBSET)]
        if self.odds:
            usual.append(st.sampled_from(TYPED_LOOKING))
            usual.append(st.text(alphabet=MILD, min_size=1, max_size=6))
        odd = st.one_of(
            st.sampled_from(UNTYPED),
            st.text(alphabet=ALPHABET, min_size=1, max_size=8),
            st.text(alphabet=ALPHABET + RARE, min_size=1, max_size=3),
        )
        return self.pick(st.one_of(usual), odd)

    def scalar(self) -> str:
        text = self.word()
        style = self.one(["plain", "plain", "plain", "single", "double"], ["raw"])
        if style == "single":
            return "'" + text.replace("'", "''") + "'"
        if style == "double":
            return '"' + text.replace('"', "").replace("\\", "") + '"'
        if style == "raw":  # quotes around the text as it comes
            quote = self.draw(st.sampled_from("'\""))
            return quote + text + quote
        return text

    def flow(self) -> str:
        keys = self.keys()
        items = [self.scalar() for _ in keys[: self.draw(st.integers(0, 3))]]
        comma = self.one([", ", ",", " , "], [",,", " ,", ", ]"])
        inner = self.one(["", "", " "], ["[x]", "{}"])
        if self.draw(st.booleans()):
            return "[" + inner + comma.join(items) + inner + "]"
        pairs = [f"{key}:{self.gap()}{item}" for key, item in zip(keys, items, strict=False)]
        return "{" + inner + comma.join(pairs) + inner + "}"

    def value(self) -> str:
        return self.flow() if self.draw(st.integers(0, 3)) == 0 else self.scalar()

    def mapping(self, lines: list[str], indent: int, depth: int) -> None:
        pad = " " * indent
        for key in self.keys():
            kinds = ["value", "value", "value", "empty"]
            kinds += ["map", "map", "seq"] if depth < 3 else []
            kind = self.draw(st.sampled_from(kinds))
            if kind == "value":
                lines.append(f"{pad}{key}:{self.gap()}{self.value()}{self.comment()}")
            else:
                lines.append(f"{pad}{key}:{self.comment()}")
            if self.draw(st.integers(0, 5)) == 0:
                lines.append(self.one(["", "  ", "# c", "    # deeper", pad + "# c"], ["\t"]))
            if kind == "map":
                self.mapping(lines, indent + self.draw(st.integers(1, 4)), depth + 1)
            elif kind == "seq":  # 0: at the key's own indent, as YAML allows
                self.sequence(lines, indent + self.draw(st.integers(0, 3)))

    def sequence(self, lines: list[str], indent: int) -> None:
        pad = " " * indent
        for _ in range(self.draw(st.integers(1, 3))):
            item = self.pick(st.just(""), st.sampled_from(["", "a: b", "- x", "a:", "# c"]))
            lines.append(f"{pad}-{self.gap()}{item or self.value()}{self.comment()}")


# Lines that, put anywhere, make most documents invalid or unusual.
ODD_LINES = [
    *["\tb: 1", "  continued", "---", "...", "%YAML 1.1", "? a", ": b", "a: |", "  text"],
    *["- x", "<<: {a: 1}", "c: &x 1", "d: *x", "e: !!str x", "a: b: c", "'q': 1", "f : 1"],
    *["g: [1, [2]]", "h: {i: {j: 1}}", "k: [x", "l: 'x", "m:", "  n: 1", "--- # c"],
]


@st.composite
def documents(draw: st.DrawFn, odds: st.SearchStrategy[int]) -> str:
    grammar = Grammar(draw, draw(odds))
    lines: list[str] = []
    if draw(st.integers(0, 3)) == 0:
        lines.append(grammar.one(["# c", "", "---"], ["--- ", "--- # c", "%YAML 1.1\n---"]))
    grammar.mapping(lines, 0, 0)
    if grammar.rarely():
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(ODD_LINES)))
    end = grammar.one(["\n", "\n", "", "\n\n", "\n# c"], ["\n...\n", "\n---\nz: 1\n", "\r\n"])
    return "\n".join(lines) + end


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(st.sampled_from([5, 10, 20, 40])), st.sampled_from(KEEPS))
@example("a: 1\n", frozenset())
@example("jobs:\n  a:\n    cron: '0 * * * *'\n    command: [x, 'y']\n", frozenset({"cron"}))
def test_agrees_with_pyyaml_or_gives_up(text: str, keep: frozenset[str]) -> None:
    compare(text, keep)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(st.just(0)), st.sampled_from(KEEPS))
def test_accepts_the_subset(text: str, keep: frozenset[str]) -> None:
    assert compare(text, keep), text


# One value, on its line or in a flow collection: the lexing of scalars, from any text.
VALUE_PLACES = ["a: ", "a:   ", "a:\n- ", "a:\n  - ", "a:\n  b: ", "a: [", "a: [x, ", "a: {b: "]
CLOSING = {"[": "]", "{": "}"}


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(VALUE_PLACES),
    st.text(alphabet=ALPHABET + RARE, max_size=10),
    st.sampled_from(["", " # c", "#c", "  "]),
)
def test_one_value_agrees_with_pyyaml_or_gives_up(place: str, text: str, comment: str) -> None:
    opened = place.rstrip(" ,")[-1:]
    value = text + CLOSING.get(opened, "")  # in a flow: the text, then the bracket
    compare(f"{place}{value}{comment}\n", frozenset({"a", "b"}))


# Values starting or ending with what may make them something else, in every place.
EDGES = [
    *["-", "- x", "-x", "--", "?", "? x", "?x", ":", ": x", ":x", "x:", "x: y", "x:y", "#", "x #y"],
    *["x#y", "'", '"', "''", '""', ", '", "'x''", "'x'y", "'x' y", '"x"y', '"x\\"'],
    *["&a x", "*a", "!a x", "!!str x", "|", ">", "%x", "@x", "`x", "~", ",", ",x", "]", "}"],
    *["[", "{", "[]", "{}", "[ ]", "x ", "x  y", "=", "<<", "<", "...", "---", "0x_", "1:30"],
]


def test_edges_agree_with_pyyaml_or_give_up() -> None:
    for place in VALUE_PLACES:
        for edge in EDGES:
            value = edge + CLOSING.get(place.rstrip(" ,")[-1:], "")
            for comment in ["", " # c"]:
                compare(f"{place}{value}{comment}\n", frozenset({"a", "b"}))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="ab1 :,'\"#-[]{}?", max_size=5), max_size=4),
    st.sampled_from([", ", ",", " , ", ",,", ", , "]),
    st.sampled_from("[{"),
)
def test_flow_agrees_with_pyyaml_or_gives_up(items: list[str], comma: str, bracket: str) -> None:
    compare(f"a: {bracket}{comma.join(items)}{CLOSING[bracket]}\n", frozenset({"a", "b"}))


# --- real texts ---------------------------------------------------------------------------


def corpus() -> list[str]:
    return [
        test_config.GOOD,
        *test_config.YAML_FEATURES,
        *(textwrap.dedent(bad[1]) for bad in test_config.BAD),
        # Shapes from the grammar's edges, written out.
        "a:\n- x\n- 'y'\nb:\n  - [1, 2]\n  -   z # c\n",
        "---\n# c\na: {A: 1, cron: '0 * * * *'}\nb: []\nc: { }\nd:\n",
        "a:\n  b:\n    c: 1\n\n  # c\n  d: ~\ne: 2026-01-01\n",
        "a: x\n    # a comment below, deeper: not a continuation\nb: y\n",
        "a: 'it''s'  # c\nb: \"#not a comment\"\nc: a#b\nd: a:b\ne: -1\nf: --x\n",
        "a: 1\n---\nb: 2\n",
        "a: 1\n...\n",
        "a:\n  b: 1\n c: 2\n",
        "a:\n  - x\n  b: 1\n",
        "a: b\n  c\n",
        "a:\tb\n",
        "a: b\r\nc: d\r\n",
        "\ufeffa: b\n",
        "a: [a: b]\n",
        "a: [a:, b]\n",
        "a: [c:d, 1:30]\n",
        "a: {b: c:d}\n",
        "a: [x,,y]\n",
        "a: [x, ]\n",
        "a: [, x]\n",
        "a: {b: 1,}\n",
        "a: {b: 1,, c: 2}\n",
        "a: [x] [y]\n",
        "a: [x]# c\n",
    ]


@pytest.mark.parametrize("text", corpus())
def test_texts_of_the_config_tests(text: str) -> None:
    compare(text, frozenset({"cron"}))
    compare(text, frozenset(KEYS))


def test_example_file_is_read_by_the_fast_pass() -> None:
    text = (ROOT / "schedules.example.yaml").read_text()
    assert compare(text, frozenset({"cron"}))


def test_bench_file_is_read_by_the_fast_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    bench_load = importlib.import_module("bench_load")
    path = tmp_path / "schedules.yaml"
    bench_load.make_file(path, 10_000)
    assert compare(path.read_text(), frozenset({"cron"}))


def test_parse_quick_takes_the_fast_pass_first(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pyyaml(text: str, keep: frozenset[str]) -> None:
        raise AssertionError("PyYAML was asked")

    quick = yamlsource._parse_quick_pyyaml(test_config.GOOD, frozenset({"cron"}))
    monkeypatch.setattr(yamlsource, "_parse_quick_pyyaml", no_pyyaml)
    fast = yamlsource.parse_quick(test_config.GOOD, frozenset({"cron"}))
    assert fast is not None
    assert quick is not None
    assert shape(fast.data) == shape(quick.data)
    assert fast.values == quick.values


def test_parse_quick_falls_back_to_pyyaml() -> None:
    quick = yamlsource.parse_quick("a: &x 1\nb: *x\n")  # an alias: not in the subset
    assert quick is not None
    assert quick.data == {"a": 1, "b": 1}


# --- typed scalars without PyYAML -------------------------------------------------------


def test_the_copy_of_pyyamls_implicit_types_is_exact() -> None:
    def table(resolvers: Any) -> Any:
        return {
            char: [(tag, regexp.pattern, regexp.flags) for tag, regexp in pairs]
            for char, pairs in resolvers.items()
        }

    assert table(yamlfast._IMPLICIT) == table(yaml.SafeLoader.yaml_implicit_resolvers)
    assert list(yamlfast._IMPLICIT) == list(yaml.SafeLoader.yaml_implicit_resolvers)


# Those built without PyYAML at their edges, and next to them.
TYPED_EDGES = [
    *["-0", "+0", "-0.0", "+0.", "0.", "00", "-00", "9" * 18, "-" + "9" * 18, "9" * 19],
    *["1" * 5000, "1." + "0" * 400, "1" * 400 + ".5", "-" + "1" * 400 + ".", "1.0e+999"],
    *["1.0E-3", "1.0e3", "1e+3", "1_0", "1_0.5", "0b1", "0x1", "0o1", "1:2", "yes", "YeS"],
    *["n", "N", "No", "nO", "~", "Off", "OFF", "oFF", "t", "True", "T"],
]


@pytest.mark.parametrize("text", [*TYPED_LOOKING, *UNTYPED, *TYPED_EDGES])
def test_typed_scalars_are_built_as_by_pyyaml(text: str) -> None:
    try:
        expected = shape(
            yamlsource._Scalars().value(yaml.ScalarEvent(None, None, (True, False), text))
        )
    except ValueError:
        expected = None  # PyYAML cannot build it: the fast pass gives up
    try:
        got = shape(yamlfast._Scalars(frozenset(), {}).typed(text))
    except yamlfast._GiveUp:
        got = None
    assert got == expected


def test_a_usual_file_is_loaded_without_importing_pyyaml() -> None:
    """`crond run` and `validate` of a file that the fast pass reads, with values of every
    type that it builds itself (~20 ms of every start); in a process of its own."""
    code = (
        "import sys\n"
        "import crond.cli, crond.daemon\n"
        "from crond import config\n"
        "config.loads(sys.stdin.read())\n"
        "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'yaml'))\n"
    )
    text = (ROOT / "schedules.example.yaml").read_text()
    text += (
        "  more:\n    every: 1h\n    python: builtins:print\n    args: [1, -2, 0.5, Off, ~, 5m]\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"
