"""YAML's own errors in crond's words: a character YAML cannot read, at its line and
column, and what usually causes the syntax errors people meet in a schedules file.
"""

from __future__ import annotations

import re

# What YAML refuses to read: controls (but tab and line breaks), surrogates, U+FFFE/F.
_UNREADABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def unreadable(text: str) -> tuple[int, int, str]:
    """(line, column, message) of the first character YAML refuses to read (PyYAML says
    only "position N", counted differently by its two readers)."""
    found = _UNREADABLE.search(text)
    if found is None:  # pragma: no cover - the reader refused a character we allow
        return 1, 1, "unreadable text"
    at = found.start()
    line, line_start = 1, 0
    for brk in _LINE_BREAK.finditer(text, 0, at):
        line, line_start = line + 1, brk.end()
    code = ord(found.group())
    message = (
        f"the character U+{code:04X} cannot appear in a YAML file (control characters, lone "
        "surrogates, U+FFFE and U+FFFF cannot); remove it, or inside a double-quoted value "
        f'write it as an escape ("\\u{code:04x}")'
    )
    return line, at - line_start + 1, message


def syntax_hint(text: str, line_number: int, column: int, what: str) -> str:
    """What usually causes the syntax errors people meet most in a schedules file."""
    lines = text.splitlines()
    line = lines[line_number - 1] if 0 < line_number <= len(lines) else ""
    if "\t" in line[:column]:
        return " (a tab: YAML indents with spaces only)"
    if "mapping values are not allowed" in what:
        return ' (a value with ": " in it must be quoted, e.g. command: "echo a: b")'
    if "expected <document start>" in what:
        first = next((x for x in lines if x.strip() and not x.lstrip().startswith("#")), "")
        indent = len(first) - len(first.lstrip(" "))
        if len(line) - len(line.lstrip(" ")) < indent:
            return " (this line is indented less than the file's first line)"
    return ""
