"""YAML text -> plain data, plus where every node came from.

PyYAML silently keeps the last of two equal keys; crond refuses them, so mappings are
built here from PyYAML's event stream rather than by its constructor. Every mapping key
and every value gets a 1-based (line, column) so that config errors can point at the
exact place. Working from events (the C parser's, when libyaml is there) also skips
PyYAML's node graph and its Python-level resolver, which dominate the time for a file
of thousands of jobs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import yaml

# The C parser is several times faster; fall back to the pure one where libyaml is absent.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Path = tuple[str | int, ...]
_STR = "tag:yaml.org,2002:str"
# PyYAML's YAML 1.1 implicit resolvers key on a plain scalar's first character: one that
# starts with any other character is a string, and skips the resolver.
_MAYBE_TYPED = frozenset("yYnNtTfFoO-+0123456789.<~=")


class Mark(NamedTuple):
    """A 1-based position in the source file."""

    line: int
    column: int


@dataclass(frozen=True)
class SourceProblem:
    """Something wrong with the YAML itself (syntax, duplicate keys, unsupported nodes)."""

    mark: Mark
    path: Path
    message: str


@dataclass
class Source:
    """Parsed YAML: the data, where each path's key and value stand, and problems found."""

    data: Any
    keys: dict[Path, Mark] = field(default_factory=dict)
    values: dict[Path, Mark] = field(default_factory=dict)
    problems: list[SourceProblem] = field(default_factory=list)

    def locate(self, path: Path, *, key: bool = False) -> Mark:
        """The position of `path`, or of its nearest ancestor that has one.

        With key=True the mapping key's position is preferred (for "unknown field"),
        otherwise the value's (for "bad value").
        """
        first, second = (self.keys, self.values) if key else (self.values, self.keys)
        for i in range(len(path), -1, -1):
            sub = path[:i]
            if sub in first:
                return first[sub]
            if sub in second:
                return second[sub]
        return Mark(1, 1)


def _mark(event: yaml.Event) -> Mark:
    start = event.start_mark
    return Mark(start.line + 1, start.column + 1) if start is not None else Mark(1, 1)


class _Builder:
    def __init__(self, events: Iterator[yaml.Event], source: Source) -> None:
        self.events = events
        self.source = source
        self.helper = yaml.SafeLoader("")  # its resolver and constructor, for typed scalars
        self.anchors: dict[str, Any] = {}
        self._resolved: dict[tuple[str, tuple[bool, bool]], str] = {}

    def _resolve(self, value: str, implicit: tuple[bool, bool]) -> str:
        """The implicit tag of a plain scalar; values like `5m` repeat, so it is cached."""
        key = (value, implicit)
        tag = self._resolved.get(key)
        if tag is None:
            resolved = self.helper.resolve(yaml.ScalarNode, value, implicit)  # type: ignore[no-untyped-call]
            tag = self._resolved[key] = str(resolved)
        return tag

    def scalar(self, event: yaml.ScalarEvent) -> Any:
        value: str = event.value
        tag = event.tag
        if tag in (None, "!", _STR) and (
            not event.implicit[0] or tag == _STR or (value and value[0] not in _MAYBE_TYPED)
        ):
            return value
        if tag in (None, "!"):
            tag = self._resolve(value, event.implicit)
        if tag == _STR:
            return value
        node = yaml.ScalarNode(tag, value, style=event.style)
        return self.helper.construct_object(node, deep=True)

    def node(self, event: yaml.Event, path: Path) -> Any:
        self.source.values[path] = _mark(event)
        if isinstance(event, yaml.AliasEvent):
            anchor = event.anchor or ""
            if anchor not in self.anchors:
                self._problem(event, path, f'unknown alias "*{anchor}"')
            return self.anchors.get(anchor)
        if isinstance(event, yaml.ScalarEvent):
            value = self.scalar(event)
        elif isinstance(event, yaml.SequenceStartEvent):
            value = self._sequence(path)
        elif isinstance(event, yaml.MappingStartEvent):
            value = self._mapping(path)
        else:  # pragma: no cover - the parser emits nothing else inside a document
            raise TypeError(f"unexpected YAML event {event}")
        new_anchor: str | None = getattr(event, "anchor", None)
        if new_anchor:
            self.anchors[new_anchor] = value
        return value

    def _sequence(self, path: Path) -> list[Any]:
        items: list[Any] = []
        for event in self.events:
            if isinstance(event, yaml.SequenceEndEvent):
                break
            items.append(self.node(event, (*path, len(items))))
        return items

    def _mapping(self, path: Path) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merges: list[Any] = []
        for key_event in self.events:
            if isinstance(key_event, yaml.MappingEndEvent):
                break
            value_event = next(self.events)
            if not isinstance(key_event, yaml.ScalarEvent):
                self._problem(key_event, path, "a key must be a plain value")
                self.node(key_event, (*path, "?"))
                self.node(value_event, (*path, "?"))
                continue
            if key_event.value == "<<" and key_event.implicit[0]:
                merged = self.node(value_event, (*path, "<<"))
                merges.extend(merged if isinstance(merged, list) else [merged])
                continue
            key = self.scalar(key_event)
            key = key if isinstance(key, str) else str(key)
            if key in result:
                first = self.source.keys[(*path, key)]
                self._problem(
                    key_event,
                    (*path, key),
                    f'duplicate key "{key}" (first defined at line {first.line}); '
                    "YAML would silently keep only the last one: remove or rename one",
                )
                self.node(value_event, (*path, key, "(duplicate)"))
                continue
            self.source.keys[(*path, key)] = _mark(key_event)
            result[key] = self.node(value_event, (*path, key))
        for merged in merges:  # `<<`: keys of the mapping itself win over merged ones
            if isinstance(merged, dict):
                for key, value in merged.items():
                    result.setdefault(key, value)
        return result

    def _problem(self, event: yaml.Event, path: Path, message: str) -> None:
        self.source.problems.append(SourceProblem(_mark(event), path, message))


def parse(text: str) -> Source:
    """Parse YAML text (its first document). Syntax errors become a problem with their
    line; never raises."""
    source = Source(data=None)
    loader = _Loader(text)
    try:
        events = iter(loader.get_event, None)
        builder = _Builder(_until_document_end(events), source)
        for event in builder.events:
            source.data = builder.node(event, ())
            break
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
        what = " ".join(part for part in (exc.context, exc.problem) if part)
        return Source(data=None, problems=[SourceProblem(where, (), f"YAML syntax error: {what}")])
    except yaml.YAMLError as exc:
        return Source(data=None, problems=[SourceProblem(Mark(1, 1), (), f"YAML error: {exc}")])
    finally:
        loader.dispose()
    return source


def _until_document_end(events: Iterator[yaml.Event]) -> Iterator[yaml.Event]:
    """The events of the first document's content."""
    for event in events:
        if isinstance(event, (yaml.StreamStartEvent, yaml.DocumentStartEvent)):
            continue
        if isinstance(event, (yaml.DocumentEndEvent, yaml.StreamEndEvent)):
            return
        yield event
