"""How a value is shown in a message: text quoted and shortened, other values by what
they are (for a secret: only its kind), and whatever could break a line or hide text
escaped, so that a message is always one line a person can read.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

# What must not reach a terminal or a log line as is: controls (line breaks among them:
# everything str.splitlines splits on), lone surrogates, and the invisible characters
# that reorder or hide text (bidi controls, BOM).
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff"  # controls, line breaks, surrogates
    "\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]"  # bidi controls, BOM
)
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape(text: str) -> str:
    """`text` with every unsafe character (see UNSAFE) written as a Python escape."""

    def one(found: re.Match[str]) -> str:
        char = found.group()
        code = ord(char)
        return _ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")

    return UNSAFE.sub(one, text)


_SHOWN = 60  # characters of a text value shown in a message


def quote(text: str) -> str:
    """A text value as a message shows it: in double quotes, shortened when long."""
    if len(text) <= _SHOWN:
        return f'"{text}"'
    return f'"{text[:_SHOWN]}..." ({len(text):,} characters)'


def show(value: Any) -> str:
    """A value as a message shows it: text quoted and shortened, containers by kind."""
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, (int, float, date)) and not isinstance(value, bool):
        text = str(value)  # (a date as written: 2026-01-01)
        return text if len(text) <= _SHOWN else f"a number of {len(text):,} digits"
    return kind_of(value)


_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (str, "text"),
    ((int, float), "a number"),
    (datetime, "a timestamp"),  # before date: a datetime is a date
    (date, "a date"),
    (dict, "a mapping"),
    (list, "a list"),
)


def kind_of(value: Any) -> str:
    """What `value` is, without showing it (but for null and booleans, which say no more
    than their kind): for values that must not be echoed."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return next((word for types, word in _KINDS if isinstance(value, types)), "a value")


# A file can hold 100,000 mistakes (one list of bad values, repeated by aliases; a
# mapping of 600,000 duplicate keys): no one reads past the first screens, and finding,
# wording and sorting them all would take seconds. The first this many are shown.
MAX_PROBLEMS = 1000


def close_matches(word: str, choices: list[str], *, cutoff: float) -> list[str]:
    """[The one of `choices` closest to `word`], or [] when none is close enough."""
    import difflib  # noqa: PLC0415  (only to word a problem: ~1 ms of every start)

    return difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
