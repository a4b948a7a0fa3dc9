"""A fast first pass for the common shape of a schedules file, or None.

Loading a file of thousands of jobs (`crond validate`, the daemon's start and reload)
spends a good part of its time in YAML: PyYAML's C parser, then the event builder in
`yamlsource`. Yet such a file is, almost always, nothing but nested mappings of one-line
values: `job-7:`, `  every: 5m`, `  command: [echo, '7']`. Reading those lines with one
regular expression and one loop takes about two thirds of the time. This module does
that, for a strict subset of YAML, and gives up (returns None) on anything else:
`yamlsource.parse_quick` then reads the file with PyYAML, which is always right. So the
one rule here is: never return data that PyYAML would not. When in doubt, give up.
tests/test_yamlfast.py holds it to that, with PyYAML as the oracle.

The subset:

- the file: an optional first `---` line, then a block mapping starting at column 0;
  full-line comments and blank lines anywhere; no tabs, CRs, BOM or control characters;
- block mappings nested by spaces, whose keys are plain words (`[A-Za-z0-9_][...-.]*`,
  up to 200 characters) followed directly by `:`, taken as written (as by
  `yamlsource._key_text`: `off:` is the text "off"); a duplicate key gives up (`parse`
  reports it);
- block sequences (`- item`) under a key, deeper or at the key's own indent, whose
  items are one-line values (not empty);
- one-line values: a plain scalar (typed as PyYAML's SafeLoader types it: `5` is an
  int, `on` True, `2026-01-01` a date), a single-quoted one (`''` for a quote), a
  double-quoted one without backslashes, or a flow sequence or mapping of such scalars
  (`[echo, '1']`, `{LANG: C.UTF-8}`), without nesting; a trailing ` # comment`;
- an empty value (`key:` with nothing nested below) is None.

Anything else gives up: anchors, aliases, tags, merge keys, block scalars (`|`, `>`),
scalars over several lines, quoted keys, complex keys, directives, more documents, and
every character or shape not named above (a plain value with `: ` in it, or starting
with an indicator like `*`, `?` or `-` followed by a space).

The marks recorded are those `yamlsource._QuickBuilder` records, where PyYAML puts
them: every mapping and sequence, and every value under a key in `keep`.

A plain scalar is typed by PyYAML's own rules (its implicit resolvers, copied below), and
the usual values (strings, null, booleans, decimal integers and floats) are built here:
a file of the subset with no other typed value is read without importing PyYAML.
"""

from __future__ import annotations

import re
from typing import Any

from crond import yamlsource
from crond.yamlsource import _MAYBE_TYPED, _STR, Mark, Path, Source

# The characters outside printable YAML (controls, DEL, C1 controls, surrogates, BOM,
# U+FFFE/U+FFFF), and tab, CR, NEL, LS and PS, which YAML treats as spaces or line
# breaks of their own. One of them anywhere: give up. (Named thus, not as the complement
# of what is printable: that class takes ten times longer to compile, at every start.)
_UNUSUAL = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]"
).search

# The pieces of a line. A key: a plain word, taken as written. PyYAML allows simple keys
# of up to 1024 characters.
_KEY = r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}"
# A plain value in a block: it starts with no indicator (`-` only before a non-space),
# has no `: ` and no ` #` (a comment), and does not end with `:` or a space.
_BLOCK_PLAIN = (
    r"(?:-(?=[^ \n])|[^-?:,\[\]{}#&*!|>'\"%@` \n])"  # the first character
    r"[^ :\n]*(?:(?::(?=[^ \n])| +(?=[^ #\n]))[^ :\n]*)*"  # no `: `, ` #` or trailing space
)
# A quoted value on one line: single-quoted (`''` is a quote), or double-quoted without
# escapes.
_QUOTED = r"""'(?:[^'\n]|'')*'|"[^"\\\n]*\""""
# A scalar in a flow collection: quoted, or plain words with none of the characters that
# mean something in a flow (or might, to one of PyYAML's two parsers).
_FLOW_CHAR = r"""[^ ,\[\]{}#:?'"\n]"""
_FLOW_SCALAR = (
    rf"""{_QUOTED}|(?:-(?={_FLOW_CHAR})|[^ \-?:,\[\]{{}}#&*!|>'"%@`\n])"""
    rf"""{_FLOW_CHAR}*(?: +{_FLOW_CHAR}+)*"""
)
# A flow sequence of such scalars, or a flow mapping of keys to them, on one line.
_FLOW = (
    rf"\[ *(?:(?:{_FLOW_SCALAR}) *(?:, *(?:{_FLOW_SCALAR}) *)*)?\]"
    rf"|{{ *(?:{_KEY}: +(?:{_FLOW_SCALAR}) *(?:, *{_KEY}: +(?:{_FLOW_SCALAR}) *)*)?}}"
)
# After a value: spaces, or spaces and a comment.
_TRAILER = r"(?: +#.*| *)"

# Every line of the text, in order: one match per line, with its line break (the text
# must end with one), which is why no part above may match a line break. Its parts:
# its indent; a mapping key and the spaces after its colon, or a sequence item's dash and
# the spaces after it; then a plain value, a quoted one or a flow collection, and its
# trailer; or else the rest of the line: empty or a comment after a key alone, or a
# shape that this module leaves to PyYAML. findall gives "" for a part that is not there.
_LINES = re.compile(
    rf"( *)(?:({_KEY}):( +|(?=\n))|(- +))?"
    rf"(?:(?:({_BLOCK_PLAIN})|({_QUOTED})|({_FLOW})){_TRAILER}|(.*))\n"
).findall
# In a flow collection (once the line is matched), each scalar, or each key and value.
_FLOW_ITEMS = re.compile(_FLOW_SCALAR).findall
_FLOW_ENTRIES = re.compile(rf"({_KEY}): +({_FLOW_SCALAR})").finditer


# PyYAML's implicit resolvers (yaml/resolver.py, YAML 1.1; the patterns verbatim): a plain
# scalar's type is that of the first one, among those for its first character, whose
# pattern matches; a string when none does. tests/test_yamlfast.py checks the copy.
_BOOL = "tag:yaml.org,2002:bool"
_FLOAT = "tag:yaml.org,2002:float"
_INT = "tag:yaml.org,2002:int"
_NULL = "tag:yaml.org,2002:null"


def _implicit_resolvers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    """PyYAML's `Resolver.yaml_implicit_resolvers`: per first character, (tag, pattern)."""
    resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for tag, regexp, first in [
        (
            _BOOL,
            re.compile(
                r"""^(?:yes|Yes|YES|no|No|NO
                    |true|True|TRUE|false|False|FALSE
                    |on|On|ON|off|Off|OFF)$""",
                re.X,
            ),
            list("yYnNtTfFoO"),
        ),
        (
            _FLOAT,
            re.compile(
                r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""",
                re.X,
            ),
            list("-+0123456789."),
        ),
        (
            _INT,
            re.compile(
                r"""^(?:[-+]?0b[0-1_]+
                    |[-+]?0[0-7_]+
                    |[-+]?(?:0|[1-9][0-9_]*)
                    |[-+]?0x[0-9a-fA-F_]+
                    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$""",
                re.X,
            ),
            list("-+0123456789"),
        ),
        ("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"]),
        (
            _NULL,
            re.compile(
                r"""^(?: ~
                    |null|Null|NULL
                    | )$""",
                re.X,
            ),
            ["~", "n", "N", ""],
        ),
        (
            "tag:yaml.org,2002:timestamp",
            re.compile(
                r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
                    |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
                     (?:[Tt]|[ \t]+)[0-9][0-9]?
                     :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
                     (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$""",
                re.X,
            ),
            list("0123456789"),
        ),
        ("tag:yaml.org,2002:value", re.compile(r"^(?:=)$"), ["="]),
        ("tag:yaml.org,2002:yaml", re.compile(r"^(?:!|&|\*)$"), list("!&*")),
    ]:
        for char in first:
            resolvers.setdefault(char, []).append((tag, regexp))
    return resolvers


_IMPLICIT = _implicit_resolvers()
# The values of those types that are built here as PyYAML's SafeConstructor builds them.
_BOOLS = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]{0,17})").fullmatch  # int() of it, exactly
_POINT = re.compile(r"[-+]?[0-9]+\.[0-9]*(?:[eE][-+][0-9]+)?").fullmatch  # float() of it


class _GiveUp(Exception):  # noqa: N818  (a signal to let PyYAML read the file)
    """The text is outside the subset this module reads."""


def parse_fast(text: str, keep: frozenset[str] = frozenset()) -> Source | None:
    """`yamlsource.parse_quick(text, keep)` for a file in the subset above, else None."""
    if _UNUSUAL(text):
        return None
    try:
        data, values = _read(text, keep)
    except _GiveUp:
        return None
    return Source(data=data, values=values)


def _mark(line: int, column: int) -> Mark:
    # tuple.__new__: Mark(...) would go through a Python-level __new__
    return tuple.__new__(Mark, (line, column))


# What `_read` keeps of each mapping or sequence around the one it fills: the dict or
# list, its indent, its path, whether it is a mapping, and whether it is a sequence at
# its key's own indent.
_Frame = tuple[Any, int, Path, bool, bool]


def _read(  # noqa: PLR0912, PLR0915  (the loop over every line, in one piece for speed)
    text: str, keep: frozenset[str]
) -> tuple[dict[str, Any], dict[Path, Mark]]:
    """The data and marks of `text`; raises _GiveUp outside the subset.

    One loop over the lines, with the mapping or sequence being filled (`into`, at
    `indent`, with `path`) and those around it on `stack`. A key alone on its line is
    `pending` until the next line with content says what its value is: a mapping or
    sequence below it, or None.
    """
    values: dict[Path, Mark] = {}
    scalars = _Scalars(keep, values)
    typed, flow = scalars.typed, scalars.flow
    # Globals as locals, and _mark written out: the loop runs for every line.
    new_mark, mark_type, maybe_typed, unquote = tuple.__new__, Mark, _MAYBE_TYPED, _unquote
    root: dict[str, Any] = {}
    into: Any = root  # the dict or list being filled
    indent, is_map, indentless = 0, True, False
    path: Path = ()
    stack: list[_Frame] = []
    pending: str | None = None
    pending_line = 0
    first = 1  # the first line with content, while only blank lines and comments are seen
    started = False  # whether a `---` was seen
    lines = _LINES(text + "\n")
    for number, (spaces, key, gap, dash, plain, quoted, collection, rest) in enumerate(lines, 1):
        if not key and not dash:
            if not plain and not quoted and not collection and (not rest or rest[0] == "#"):
                if first == number:
                    first += 1
                continue  # a blank line, or a comment
            if plain == "---" and first == number and not spaces and not started:
                started, first = True, first + 1
                continue  # a document start, only as the first line with content
            raise _GiveUp
        column = len(spaces)

        if pending is not None:  # the value of the key on the line above
            if column > indent or (column == indent and dash):
                sub = (*path, pending)
                # The mapping starts at its first key, the sequence at its first `-`.
                values[sub] = new_mark(mark_type, (number, column + 1))
                stack.append((into, indent, path, is_map, indentless))
                new: dict[str, Any] | list[Any] = {} if key else []
                into[pending] = new
                is_map, indentless = not dash, column == indent
                into, indent, path = new, column, sub
            else:
                into[pending] = None
                if pending in keep:  # PyYAML puts an empty value just after the colon
                    values[(*path, pending)] = _mark(pending_line, indent + len(pending) + 2)
            pending = None

        if column != indent or (indentless and key):
            # Leave the mappings and sequences that this line is not part of.
            while column < indent or (indentless and key and column == indent):
                into, indent, path, is_map, indentless = stack.pop()
            if column != indent:
                raise _GiveUp  # indented more than the line above allows, or not as any

        if key:
            if not is_map or key in into:
                raise _GiveUp  # an item expected, or a duplicate key (`parse` reports it)
            if plain:
                into[key] = typed(plain) if plain[0] in maybe_typed else plain
            elif quoted:
                into[key] = unquote(quoted)
            elif collection:
                at = column + len(key) + len(gap) + 2
                into[key] = flow(collection, number, at, (*path, key))
            elif not rest or rest[0] == "#":
                pending, pending_line = key, number
                continue
            else:
                raise _GiveUp  # not a value of the subset (see the docstring)
            if key in keep:
                at = column + len(key) + len(gap) + 2
                values[(*path, key)] = new_mark(mark_type, (number, at))
        else:
            if is_map:
                raise _GiveUp  # a key expected
            if plain:
                into.append(typed(plain) if plain[0] in maybe_typed else plain)
            elif quoted:
                into.append(unquote(quoted))
            elif collection:
                at = column + len(dash) + 1
                into.append(flow(collection, number, at, (*path, len(into))))
            else:
                raise _GiveUp  # not a value of the subset, or none (below, or null)

    if not root and pending is None:
        raise _GiveUp  # no content: let PyYAML say what an empty file is
    if pending is not None:
        into[pending] = None
        if pending in keep:
            values[(*path, pending)] = _mark(pending_line, indent + len(pending) + 2)
    values[()] = _mark(first, 1)  # the top mapping starts at its first key
    return root, values


def _unquote(quoted: str) -> str:
    text = quoted[1:-1]
    return text.replace("''", "'") if quoted[0] == "'" else text


class _Scalars:
    """Typed plain scalars, and flow collections."""

    def __init__(self, keep: frozenset[str], values: dict[Path, Mark]) -> None:
        self.keep = keep
        self.values = values
        self.scalars: yamlsource._Scalars | None = None  # PyYAML's, at the first need
        self.known: dict[str, Any] = {}  # plain scalars that may be typed, each once

    def typed(self, text: str) -> Any:
        """A plain scalar that may be typed (`5`, `on`, `~`), resolved as PyYAML does."""
        known = self.known
        if text in known:
            return known[text]
        value: Any
        tag = _STR
        for candidate, regexp in _IMPLICIT.get(text[0], ()):
            if regexp.match(text):
                tag = candidate
                break
        if tag == _STR:
            value = text
        elif tag == _NULL:
            value = None
        elif tag == _BOOL:
            value = _BOOLS[text.lower()]
        elif tag == _INT and _DECIMAL(text):
            value = int(text)
        elif tag == _FLOAT and _POINT(text):
            value = float(text)
        else:
            value = self._by_pyyaml(text)
        known[text] = value
        return value

    def _by_pyyaml(self, text: str) -> Any:
        """A typed plain scalar of another kind (`0x1f`, `1_000`, `.inf`, `2026-01-01`,
        `<<`, `=`), built by PyYAML."""
        import yaml  # noqa: PLC0415  (only here: see the module docstring)

        if self.scalars is None:
            self.scalars = yamlsource._Scalars()
        event = yaml.ScalarEvent(None, None, (True, False), text)
        try:
            return self.scalars.value(event)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            raise _GiveUp from exc  # e.g. `=` or `2026-02-30`: PyYAML has its say

    def flow(self, text: str, line: int, column: int, path: Path) -> Any:
        """A flow sequence or mapping of scalars, at 1-based `column` of `line`."""
        result: list[Any] | dict[str, Any]
        if text[0] == "[":
            result = [self.scalar(item) for item in _FLOW_ITEMS(text, 1, len(text) - 1)]
        else:
            keep, values, result = self.keep, self.values, {}
            for entry in _FLOW_ENTRIES(text, 1, len(text) - 1):
                key, value = entry.group(1, 2)
                if key in result:
                    raise _GiveUp  # a duplicate key (`parse` reports it)
                if key in keep:
                    values[(*path, key)] = _mark(line, column + entry.start(2))
                result[key] = self.scalar(value)
        self.values[path] = _mark(line, column)
        return result

    def scalar(self, text: str) -> Any:
        """A scalar in a flow collection, as written."""
        first = text[0]
        if first == "'":
            return text[1:-1].replace("''", "'")
        if first == '"':
            return text[1:-1]
        return self.typed(text) if first in _MAYBE_TYPED else text
