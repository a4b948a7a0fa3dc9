"""A parsed schedules file and where each of its parts stands: `Source` (the data, the
1-based line and column of every key and value by its `Path`, and the YAML's own problems)
and `Source.locate`, which finds the place a problem found later is reported at.
`yamlsource` builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

Path = tuple[str | int, ...]

DUPLICATE = "(duplicate)"  # the last part of a path under which a duplicate's value stands


class Mark(NamedTuple):
    """A 1-based position in the source file."""

    line: int
    column: int


@dataclass(frozen=True)
class SourceProblem:
    """Something wrong with the YAML itself (syntax, duplicate keys, unsafe nodes).

    `without_value` is the message without the bad value in it (when it has one), for
    a place whose value must not be echoed: an `env` value is a secret.
    """

    mark: Mark
    path: Path
    message: str
    without_value: str = ""


@dataclass
class Source:
    """Parsed YAML: the data, where each path's key and value stand, and problems found."""

    data: Any
    keys: dict[Path, Mark] = field(default_factory=dict)
    values: dict[Path, Mark] = field(default_factory=dict)
    problems: list[SourceProblem] = field(default_factory=list)
    # The text of each plain scalar YAML 1.1 read as true, false or null (`yes`, `off`,
    # `~`): a message about it says what was written, not what YAML made of it.
    written: dict[Path, str] = field(default_factory=dict)
    # The values of duplicate keys (each also a problem), located under
    # (*path, DUPLICATE): a duplicated job's own mistakes are reported in the same pass.
    duplicates: list[tuple[Path, Any]] = field(default_factory=list)

    def duplicate_view(self, path: Path) -> Source:
        """The places of the duplicate at `path` as if it stood there alone."""
        inner = (*path, DUPLICATE)
        n = len(inner)

        def moved(marks: dict[Path, Any]) -> dict[Path, Any]:
            return {(*path, *p[n:]): m for p, m in marks.items() if p[:n] == inner}

        view = Source(None, moved(self.keys), moved(self.values))
        view.written = moved(self.written)
        return view

    def locate(self, path: Path, *, key: bool = False) -> Mark:
        """The position of `path`, or of its nearest ancestor that has one.

        With key=True the mapping key's position is preferred (for "unknown field"),
        otherwise the value's (for "bad value").
        """
        first, second = (self.keys, self.values) if key else (self.values, self.keys)
        found = first.get(path)  # the usual case, first
        if found is not None:
            return found
        for i in range(len(path), -1, -1):
            sub = path[:i]
            if sub in first:
                return first[sub]
            if sub in second:
                return second[sub]
        return Mark(1, 1)
