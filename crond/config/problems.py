"""Located config problems, and pydantic's errors turned into crond's messages.

Every message names the bad value (but never an `env` value: those are secrets) and
what would be right; every problem carries the file, line and column it came from and a
dotted path that names jobs by name. A problem is one line of text, whatever the file
holds: control characters in its parts are shown escaped, and long values shortened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from crond.config.places import DUPLICATE
from crond.config.wording import MAX_PROBLEMS, UNSAFE, close_matches, escape, kind_of, show

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

    from crond.config.places import Mark, Path, Source


@dataclass(frozen=True, order=True)
class Problem:
    """One mistake in a schedules file. line/column are 1-based; 0 when not in the text."""

    file: str
    line: int
    column: int
    path: str
    message: str

    def __post_init__(self) -> None:
        # Keys and values come from the file: a key `"a\nb.yaml:1:1: ..."` must not
        # print as a second problem.
        for name in ("file", "path", "message"):
            text = getattr(self, name)
            if UNSAFE.search(text):
                object.__setattr__(self, name, escape(text))

    @classmethod
    def at(cls, file: str, mark: Mark, path: Path, message: str) -> Problem:
        return cls(file, mark.line, mark.column, dotted(path), message)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "message": self.message,
        }


class ConfigError(Exception):
    """Every problem found in one schedules file, at once."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def dotted(path: Path) -> str:
    return ".".join(str(part) for part in path)


_SECRET_FIELDS = frozenset({"env", "ping"})


def is_secret(path: Path) -> bool:
    """Whether `path` is, or is inside, a place whose values are passwords and tokens as
    often as not: a job's or the defaults' `env` and `ping`, and a notifier's URLs,
    headers and command (all of it but `repeat`), and the daemon's `database` (a
    connection string may hold a password). A duplicated job's too (its path holds the
    duplicate's marker)."""
    path = tuple(part for part in path if part != DUPLICATE)
    if path[:2] == ("daemon", "database"):
        return True
    if len(path) > 1 and path[0] == "defaults":
        return path[1] in _SECRET_FIELDS
    if len(path) > 2 and path[0] == "jobs":
        return path[2] in _SECRET_FIELDS
    return len(path) > 2 and path[0] == "notifiers" and path[2] != "repeat"


def _model_at(path: Path) -> type[BaseModel] | None:
    """Which model the mapping at `path` is validated against (for "did you mean")."""
    from crond.config import model  # noqa: PLC0415  (config imports this module)

    if len(path) == 2 and path[0] in ("jobs", "notifiers"):
        return model.Job if path[0] == "jobs" else model.Notifier
    if path and path[-1] == "retry":
        return model.Retry
    by_path: dict[Path, type[BaseModel]] = {
        (): model.Config,
        ("defaults",): model.JobFields,
        ("daemon",): model.Daemon,
    }
    return by_path.get(path)


def _inner(kind: str, ctx: dict[str, Any]) -> Path:
    """Where under the path of the model or field checked a crond_field error (one field
    of the model, or the model itself) or a crond_at error (one entry of the mapping)
    stands."""
    if kind == "crond_at":
        return (ctx["crond_key"],)
    name = ctx.get("field", "")
    return (name,) if name else ()


def _real_path(loc: tuple[str | int, ...], data: Any) -> Path:
    """Drop the union-member tags pydantic puts into `loc`, keeping real keys and indexes."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        ):
            node = node[part]  # type: ignore[index]  # (checked just above)
        else:
            continue
        path.append(part)
    return tuple(path)


_TYPE_WORDS = {
    "string_type": "text",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a mapping",
    "list_type": "a list",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}
_FIELD_HINTS = {
    "command": "a string (run by /bin/sh -c) or a list of strings (run directly)",
    "args": "a list of JSON values",
    "kwargs": "a mapping of JSON values",
    "anchor": "an ISO-8601 instant with an offset, e.g. 2026-01-01T00:00:00Z",
    "retry": "a mapping, e.g. retry: {attempts: 3, delay: 10s}",
    "env": 'a mapping of names to strings, e.g. env: {LANG: C.UTF-8, DEBUG: "1"}',
    "jobs": "a mapping of job names to jobs",
    "defaults": "a mapping of job fields",
    "timezone": "a time zone name (an IANA name such as Europe/Berlin or UTC, or local)",
    "daemon": "a mapping, e.g. daemon: {heartbeat: 10s}",
    "notifiers": "a mapping of notifier names to notifiers (docs/alerting.md)",
    "notify": "a mapping of notifier names to lists of events, e.g. notify: {ops: [failed]}",
    "headers": "a mapping of header names to text, e.g. headers: {X-Team: ops}",
    "metrics": "HOST:PORT, e.g. 127.0.0.1:9464",
}


def _said(value: Any, written: str | None) -> str:
    """A value YAML read as true, false or null, as written (`yes`, `~`, nothing), with
    what YAML made of it when that differs."""
    canonical = kind_of(value)
    if written == "":
        return f"an empty value (YAML reads it as {canonical})"
    if written is None or written == canonical:
        return canonical
    return f"{written} (YAML reads it as {canonical})"


# The daemon's settings that a newcomer may switch with `off` or `false` (YAML's false):
# what the field takes, and what to do to turn it off and to keep it on. Quoting `off`
# would name a socket or a directory "off".
_SWITCHES: dict[Path, tuple[str, str, str]] = {
    ("daemon", "control_socket"): (
        "a path",
        "to turn the socket off, write none",
        "the socket is on by default (crond.sock in the state directory): leave the field "
        "out, or give a path",
    ),
    ("daemon", "state_dir"): (
        "a directory",
        "to keep no state store, write none",
        "leave the field out for the default place, or give a directory",
    ),
    ("daemon", "liveness_file"): (
        "a path",
        "to write no liveness file, leave the field out (none is written by default)",
        "give the file's path",
    ),
    ("daemon", "metrics"): (
        "HOST:PORT",
        "to serve no metrics, leave the field out (they are off by default)",
        "give HOST:PORT, e.g. 127.0.0.1:9464",
    ),
}


def _switched(value: bool, written: str | None, path: Path) -> str | None:
    """For a daemon setting written as a switch (`off`, `true`): what to write instead."""
    switch = _SWITCHES.get(path)
    if switch is None:
        return None
    what, off, on = switch
    return f"{_said(value, written)} is not {what}: {on if value else off}"


def _unquoted(value: Any, written: str | None, hint: str | None, path: Path = ()) -> str:
    """Where text was wanted: what was written, and how to keep it as text."""
    said = _said(value, written)
    switched = _switched(value, written, path) if isinstance(value, bool) else None
    if switched is not None:
        return switched
    if hint is not None:
        return f"{said} is not {hint}"
    if written == "":
        return f'{said} is not a string; write "" for empty text'
    text = written if written is not None else kind_of(value)
    return f'{said} is not a string; quote it ("{text}") to pass it as text'


def _message(  # noqa: PLR0911
    err: ErrorDetails, path: Path, written: str | None = None
) -> tuple[Path, str, bool]:
    # (one return per kind of pydantic error: a table would read no better)
    """(path, message, points_at_key) for one pydantic error; `written`: the text of a
    scalar YAML read as true, false or null."""
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    field = next((p for p in reversed(path) if isinstance(p, str)), "")
    shown = kind_of(value) if is_secret(path) else show(value)
    if kind == "crond_unquoted" or (
        kind == "string_type" and (value is None or isinstance(value, bool))
    ):
        hint = _FIELD_HINTS.get(field) if path and path[-1] == field else None
        return path, _unquoted(value, written, hint, path), False
    if kind == "crond":
        return path, err["msg"], False
    if kind in ("crond_field", "crond_at"):
        return (*path, *_inner(kind, ctx)), err["msg"], ctx.get("crond_at_key", True)
    if kind == "extra_forbidden":
        model = _model_at(path[:-1])
        choices = list(model.model_fields) if model else []
        close = close_matches(str(path[-1]), choices, cutoff=0.6)
        hint = (
            f' (did you mean "{close[0]}"?)'
            if close
            else (f" (known fields: {', '.join(choices)})" if choices else "")
        )
        return path, f"unknown field{hint}", True
    if kind == "missing":
        return path, "required field is missing", True
    if kind == "enum":
        expected = [
            e.strip(" '")
            for e in str(ctx.get("expected", "")).replace(" or ", ",").split(",")
            if e.strip()
        ]
        close = close_matches(value, expected, cutoff=0.5) if isinstance(value, str) else []
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        return path, f"{shown} is not one of {', '.join(expected)}{hint}", False
    if kind == "literal_error" and path == ("version",):
        return path, f"{shown} is not a supported version (only 1 exists)", False
    if field in _FIELD_HINTS and path and path[-1] == field:
        return path, f"{shown} is not {_FIELD_HINTS[field]}", False
    if kind in _TYPE_WORDS:
        return path, f"{shown} is not {_TYPE_WORDS[kind]}", False
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        bound = ctx.get("ge", ctx.get("le", ctx.get("gt", ctx.get("lt"))))
        word = {
            "greater_than_equal": "at least",
            "less_than_equal": "at most",
            "greater_than": "more than",
            "less_than": "less than",
        }[kind]
        return path, f"{shown} is out of range (must be {word} {bound})", False
    if kind == "string_too_short":
        return path, "must not be empty", False
    if field in {"args", "kwargs"} or "json" in kind:
        return path, f"{shown} is not a JSON value", False
    return path, f"{shown}: {err['msg']}", False


def problems_from_validation(
    exc: ValidationError, source: Source, filename: str, data: Any
) -> list[Problem]:
    """One Problem per distinct located mistake in a pydantic ValidationError on `data`:
    the first MAX_PROBLEMS + 1 of them (one more than `capped` keeps, so that it says
    some are not shown)."""
    seen: dict[Path, Problem] = {}
    for err in exc.errors(include_url=False):
        path = _real_path(err["loc"], data)
        path, message, at_key = _message(err, path, source.written.get(path))
        if path in seen:
            continue  # a union reports one error per member; the first says enough
        seen[path] = Problem.at(filename, source.locate(path, key=at_key), path, message)
        if len(seen) > MAX_PROBLEMS:
            break
    return list(seen.values())


def capped(problems: list[Problem], filename: str) -> list[Problem]:
    """`problems` in file order, the first MAX_PROBLEMS of them, then one that says so."""
    # The dataclass's own ordering compares field by field in Python: a key is 3x faster.
    unique = dict.fromkeys(problems)
    problems = sorted(unique, key=lambda p: (p.file, p.line, p.column, p.path, p.message))
    if len(problems) <= MAX_PROBLEMS:
        return problems
    first_not_shown = problems[MAX_PROBLEMS]
    message = f"more problems from here on, not shown (crond shows a file's first {MAX_PROBLEMS:,})"
    return [
        *problems[:MAX_PROBLEMS],
        Problem(filename, first_not_shown.line, first_not_shown.column, "", message),
    ]


__all__ = [
    "MAX_PROBLEMS",
    "ConfigError",
    "Problem",
    "ValidationError",
    "capped",
    "close_matches",
    "dotted",
    "is_secret",
    "problems_from_validation",
]
