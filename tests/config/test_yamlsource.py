"""YAML text -> data and marks: PyYAML's data, each node located, unsafe input refused.

PyYAML's SafeLoader is the oracle for what a file means; on top of it, `parse` refuses
(as located problems, never an exception) what SafeLoader would accept or choke on:
alias bombs, deep nesting, tags beyond plain data, merges of non-mappings, duplicate
anchors and keys, unreadable characters.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from crond.config import yamlsource
from crond.config.places import Mark, SourceProblem
from crond.config.yamlanchors import MAX_ALIAS_NODES, MAX_DEPTH


def shape(value: Any) -> Any:
    """`value` with the type of every part, and key order: `1 == True == 1.0` in Python."""
    if isinstance(value, dict):
        return ("dict", sorted((repr(k), shape(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", [shape(v) for v in value])
    return (type(value), repr(value))  # repr: nan is not == nan


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=yaml.SafeLoader)


def only(text: str) -> SourceProblem:
    problems = yamlsource.parse(text).problems
    assert len(problems) == 1, problems
    return problems[0]


# --- the data is PyYAML's ------------------------------------------------------------

# Files without problems, with keys that are text to PyYAML too (crond keeps `off:` as
# the text "off", where YAML 1.1 reads False).
SAME_AS_PYYAML = [
    "jobs:\n  a: &common\n    every: 1m\n    command: echo\n  b:\n    <<: *common\n"
    "    command: echo b\n",
    "x: &b {cron: '30 2 * * *'}\ny: &c {every: 2m, grace: 5m}\n"
    "jobs:\n  a:\n    <<: [*b, *c]\n    command: x\n",
    "jobs:\n  a:\n    every: 60\n    command: [echo, 1, 2.5, true, null, ~, '', 0x1f, 2026-01-01, "
    "'5', \"yes\", -1, .inf, 1:30, 0b101, 0o17, 1_000, 2026-01-01T10:00:00Z]\n",
    "jobs:\n  a:\n    every: !!str 60\n    command: ! 5\n    description: !!int '7'\n"
    "    x: !!float 1\n    y: !!bool yes\n    z: !!null ''\n    t: !!timestamp 2026-01-01\n"
    "    m: !!map {a: 1}\n    s: !!seq [a]\n",
    "jobs:\n  'a':\n    every: 1m\n    command:\n  \"b\": {every: 1m, command: ''}\n",
    "jobs:\n  a:\n    every: &e 1m\n    command: &c [a, b]\n  b:\n    every: *e\n    command: *c\n",
    "jobs:\n  a:\n    cron: >-\n      0 2\n      * * *\n    command: |\n      echo one\n"
    "      echo two\n",
    "jobs:\n  &k a: {every: 1m, command: x}\n  b: *k\n",
    "jobs: []\n",
    "",
    "# only a comment\n",
    "just text\n",
    "a: 1\n...\n",
    "\ufeffa: [1, {b: c}, [d]]\n",
    "a: [" + "[" * (MAX_DEPTH - 2) + "x" + "]" * (MAX_DEPTH - 2) + "]\n",
]


@pytest.mark.parametrize("text", SAME_AS_PYYAML)
def test_data_is_what_pyyaml_reads(text: str) -> None:
    source = yamlsource.parse(text)
    assert source.problems == []
    assert shape(source.data) == shape(safe_load(text))


plain_keys = st.from_regex(r"[a-z][a-z0-9_-]{0,6}", fullmatch=True)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.dates(),
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(plain_keys, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(data=st.dictionaries(plain_keys, documents, max_size=4), flow=st.booleans())
def test_any_dumped_data_reads_back_as_pyyaml_reads_it(data: dict[str, Any], flow: bool) -> None:
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True)
    source = yamlsource.parse(text)
    assert source.problems == []
    assert shape(source.data) == shape(safe_load(text))


def test_every_key_and_value_is_located() -> None:
    source = yamlsource.parse("jobs:\n  a:\n    every: 1m\n    command: [x, 'y']\n")
    assert source.keys[("jobs", "a", "every")] == Mark(3, 5)
    assert source.values[("jobs", "a", "every")] == Mark(3, 12)
    assert source.values[("jobs", "a", "command", 1)] == Mark(4, 18)
    assert source.locate(("jobs", "a", "command", 1, "deeper")) == Mark(4, 18)
    assert source.locate(("jobs", "a", "nope"), key=True) == Mark(2, 3)


def test_keys_are_text_as_written() -> None:
    data = yamlsource.parse("off: 1\nyes: 2\n0x10: 3\nnull: 4\n!!int 0x11: 5\n").data
    assert data == {"off": 1, "yes": 2, "0x10": 3, "null": 4, "17": 5}


def test_a_second_document_is_a_problem() -> None:
    problem = only("a: 1\n---\nb: 2\n")
    assert problem.mark == Mark(2, 1)
    assert "a second YAML document" in problem.message


def test_duplicate_keys_are_located_at_the_second() -> None:
    problem = only("a: 1\nb: 2\na: 3\n")
    assert (problem.mark, problem.path) == (Mark(3, 1), ("a",))
    assert 'duplicate key "a" (first defined at line 1)' in problem.message


# --- B1: aliases are bounded --------------------------------------------------------


def alias_bomb(levels: int, width: int = 9) -> str:
    lines = ["x:", "  a0: &a0 [" + ",".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"  a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    lines += ["jobs:", "  j:", "    every: 1m", "    python: m:f", f"    args: [*a{levels - 1}]"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [7, 9])
def test_an_alias_bomb_is_refused_at_its_alias_at_once(levels: int) -> None:
    start = time.thread_time()  # the work, not the wait for a core on a busy machine
    source = yamlsource.parse(alias_bomb(levels))
    elapsed = time.thread_time() - start
    [problem] = source.problems
    # a5 is the first list past 100,000 values: 9 * 9**5 = 531,441 (with the a4s before)
    assert problem.mark == Mark(7, 12)
    assert problem.path == ("x", "a5", 0)
    assert 'with the alias "*a4"' in problem.message
    assert f"more than {MAX_ALIAS_NODES:,} values" in problem.message
    assert elapsed < 0.5


def test_aliases_may_stand_for_up_to_the_limit() -> None:
    # An anchored list of 999 items is 1,000 values; 100 aliases to it are 100,000.
    items = ",".join(["x"] * 999)
    uses = "\n".join(f"  - *big  # {i}" for i in range(100))
    text = f"big: &big [{items}]\nuses:\n{uses}\n"
    assert yamlsource.parse(text).problems == []
    problem = only(text + "more: *big\n")
    assert problem.mark == Mark(103, 7)


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    problem = only("a: &a [1, *a]\n")
    assert problem.mark == Mark(1, 11)
    assert 'the alias "*a" refers to the node it is in' in problem.message
    assert 'the alias "*b" is not defined' in only("a: *b\n").message


def test_a_duplicate_anchor_is_refused_where_it_is_defined_again() -> None:
    problem = only("x: &a 1\ny: &a 2\nz: *a\n")
    assert (problem.mark, problem.path) == (Mark(2, 4), ("y",))
    assert 'the anchor "&a" is defined a second time' in problem.message
    assert only("&a k: 1\nb: &a [2]\n").mark == Mark(2, 4)  # an anchored key too


# --- B2: nesting is bounded ---------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 300, 490, 999])
def test_deep_nesting_is_refused_without_recursing(depth: int) -> None:
    text = "a: " + "[" * (depth - 1) + "]" * (depth - 1) + "\n"  # with the root: `depth`
    problem = only(text)
    assert problem.mark == Mark(1, 3 + MAX_DEPTH)  # at the first bracket too deep
    assert f"nested more than {MAX_DEPTH} deep" in problem.message


def test_very_deep_nesting_is_refused_at_once() -> None:
    # libyaml itself stops at 1,000 levels of flow collections (a syntax error); the
    # pure-Python parser does not, and crond stops at MAX_DEPTH anyway.
    start = time.thread_time()  # the work, not the wait for a core on a busy machine
    problem = only("a: " + "[" * 200_000 + "\n")
    assert "nest" in problem.message
    assert problem.mark.line == 1
    assert time.thread_time() - start < 0.5


def test_deep_block_mappings_are_refused_too() -> None:
    text = "".join(f"{' ' * i}k{i}:\n" for i in range(MAX_DEPTH + 5))
    problem = only(text)
    assert problem.mark.line == MAX_DEPTH + 1
    assert "nested more than" in problem.message


def test_depth_through_an_alias_counts() -> None:
    inner = "[" * 40 + "]" * 40
    text = f"a: &deep {inner}\nb: {'[' * 30}*deep{']' * 30}\n"
    problem = only(text)
    assert problem.mark == Mark(2, 34)
    assert "nested more than" in problem.message
    ok = f"a: &deep {inner}\nb: {'[' * 20}*deep{']' * 20}\n"
    assert yamlsource.parse(ok).problems == []


# --- B3: tags and merges ------------------------------------------------------------

REFUSED_TAGS = [
    ("command: !!python/object/apply:os.system [echo, hi]", "!!python/object/apply:os.system"),
    ("command: !!python/name:os.system", "!!python/name:os.system"),
    ("command: !!python/object:os.system {}", "!!python/object:os.system"),
    ("x: !!set {a, b}", "!!set"),
    ("x: !!omap [a: 1]", "!!omap"),
    ("x: !!pairs [a: 1]", "!!pairs"),
    ("x: !!binary aGk=", "!!binary"),
    ("x: !custom 5", "!custom"),
    ("x: !<tag:example.com,2026:thing> 5", "tag:example.com,2026:thing"),
    ("x: !!str {a: 1}", "!!str"),
    ("x: !!map [a]", "!!map"),
    ("x: !!seq {a: 1}", "!!seq"),
    ("!!python/name:os.system k: 1", "!!python/name:os.system"),
]


@pytest.mark.parametrize(("text", "tag"), REFUSED_TAGS)
def test_tags_beyond_plain_data_are_refused(text: str, tag: str) -> None:
    problem = only(text + "\n")
    assert problem.mark.line == 1
    assert f'the tag "{tag}" is not allowed' in problem.message
    assert "remove the tag" in problem.message


@pytest.mark.parametrize(
    ("text", "mark", "shown"),
    [
        ("j:\n  <<: 5\n  a: 1\n", Mark(2, 7), "not 5"),
        ("j:\n  <<: [x, y]\n", Mark(2, 8), 'not "x"'),
        ("m: &m {a: 1}\nj:\n  <<: [*m, 5]\n", Mark(3, 12), "not 5"),
        ("j:\n  <<:\n  a: 1\n", Mark(2, 6), "not null"),
        ("s: &s text\nj:\n  <<: *s\n", Mark(3, 7), 'not "text"'),
    ],
)
def test_a_merge_of_anything_but_mappings_is_refused(text: str, mark: Mark, shown: str) -> None:
    problem = yamlsource.parse(text).problems[0]  # (with [x, y], one for each item)
    assert problem.mark == mark
    assert "a merge key (<<) takes a mapping or a list of mappings" in problem.message
    assert shown in problem.message


def test_merged_keys_give_way_to_the_mappings_own_and_the_first_merged_wins() -> None:
    # As YAML 1.1's merge key type says: earlier mappings of the list win over later
    # ones. (PyYAML lets the later ones win; crond keeps the rule.)
    text = "a: &a {x: 1, y: 1}\nb: &b {y: 2, z: 2}\nc:\n  <<: [*a, *b]\n  x: 3\n"
    assert yamlsource.parse(text).data["c"] == {"x": 3, "y": 1, "z": 2}


# --- C: unreadable characters, big integers -------------------------------------------


@pytest.mark.parametrize(
    ("text", "mark"),
    [
        ("jobs:\n  j:\n    command: 'x\x01'\n", Mark(3, 16)),
        ("jobs:\r\n  j:\r\n    command: 'x\x01'\r\n", Mark(3, 16)),
        ("a: 1\rb: 'é\x02'\n", Mark(2, 6)),
        ("a: 1\n\x00\n", Mark(2, 1)),
        ("a: 'x\ud800'\n", Mark(1, 6)),
        ("a: 'x\ufffe'\n", Mark(1, 6)),
    ],
)
def test_an_unreadable_character_is_located_where_it_stands(text: str, mark: Mark) -> None:
    problem = only(text)
    assert problem.mark == mark
    assert "cannot appear in a YAML file" in problem.message
    assert "position" not in problem.message


def test_an_integer_with_too_many_digits_says_so() -> None:
    problem = only("a: " + "1" * 5000 + "\n")
    assert problem.mark == Mark(1, 4)
    assert "an integer with too many digits (more than 1000); quote it" in problem.message
    assert "set_int_max_str_digits" not in problem.message
    assert len(problem.message) < 200  # the value is shortened
    assert "too many digits" in problem.without_value
    assert "111" not in problem.without_value


def test_long_sexagesimal_integers_cost_nothing() -> None:
    # PyYAML builds `1:1:1:...` by repeated multiplication: quadratic in its length.
    start = time.thread_time()  # the work, not the wait for a core on a busy machine
    problem = only("a: 1" + ":1" * 100_000 + "\n")
    assert "too many digits" in problem.message
    assert time.thread_time() - start < 0.5


# --- without libyaml: the pure-Python parser gives the same answers ------------------

WITH_PROBLEMS = [
    alias_bomb(7),
    "a: &a [1, *a]\n",
    "x: &a 1\ny: &a 2\n",
    "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n",
    *(text + "\n" for text, _ in REFUSED_TAGS),
    "j:\n  <<: [x, {a: 1}, 5]\n",
    "a: 1\nb: 2\na: 3\n",
    "a: " + "1" * 2000 + "\n",
    "jobs:\r\n  j:\r\n    command: 'x\x01'\r\n",
    "a: 'x\ud800'\n",
]


@pytest.mark.parametrize("text", SAME_AS_PYYAML + WITH_PROBLEMS)
def test_the_pure_python_parser_gives_the_same_answers(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_libyaml = yamlsource.parse(text)
    monkeypatch.setattr(yamlsource, "_loader", yaml.SafeLoader)
    pure = yamlsource.parse(text)
    assert shape(pure.data) == shape(with_libyaml.data)
    assert pure.problems == with_libyaml.problems
    assert (pure.keys, pure.values) == (with_libyaml.keys, with_libyaml.values)


def test_a_first_pass_locates_only_the_kept_keys_and_builds_the_same_data() -> None:
    text = "jobs:\n  a:\n    cron: '0 1 * * *'\n    command: [x, y]\n  b: {every: 1m}\n"
    full, quick = yamlsource.parse(text), yamlsource.parse(text, keep=frozenset({"cron"}))
    assert quick.data == full.data
    assert quick.keys == {}
    assert quick.values == {("jobs", "a", "cron"): full.values[("jobs", "a", "cron")]}
    # A mistake is still found without the places (the loader then reads it again).
    dup = "jobs:\n  a: {every: 1m}\n  a: {every: 2m}\n"
    assert [p.message[:19] for p in yamlsource.parse(dup, keep=frozenset()).problems] == [
        'duplicate key "a" ('
    ]
