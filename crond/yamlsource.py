"""YAML text -> plain data, plus where every node came from.

PyYAML silently keeps the last of two equal keys; crond refuses them, so mappings are
built here from PyYAML's event stream rather than by its constructor. Every mapping key
and every value gets a 1-based (line, column) so that config errors can point at the
exact place. Working from events (the C parser's, when libyaml is there) also skips
PyYAML's node graph and its Python-level resolver, which dominate the time for a file
of thousands of jobs.

Marks cost more than the data itself (a path tuple and two dict entries for every node),
and only a file with a problem needs them. So `parse_quick` builds the data without them,
keeping only the few places asked for, and gives up (returns None) at the first problem
of any kind; `parse` then reads the file again, locating everything.

PyYAML is imported by the functions that use it, at their first call: a file that
`yamlfast` reads whole (most files) is loaded without it (~20 ms of every start).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import yaml

Path = tuple[str | int, ...]
_STR = "tag:yaml.org,2002:str"
# PyYAML's YAML 1.1 implicit resolvers key on a plain scalar's first character: one that
# starts with any other character is a string, and skips the resolver.
_MAYBE_TYPED = frozenset("yYnNtTfFoO-+0123456789.<~=")
_MAYBE_TYPED_OR_EMPTY = _MAYBE_TYPED | {""}  # for `value[:1]`: "" (null) must resolve too


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


def _mark(event: yaml.Event) -> Mark:
    start = event.start_mark
    return Mark(start.line + 1, start.column + 1) if start is not None else Mark(1, 1)


class BadScalarError(ValueError):
    """A plain scalar that YAML types (int, float, date, ...) but cannot build."""


class _Scalars:
    """Typed plain scalars (`5`, `true`, `null`) as PyYAML's SafeLoader reads them."""

    def __init__(self) -> None:
        import yaml  # noqa: PLC0415  (see the module docstring)

        self.helper = yaml.SafeLoader("")  # its resolver and constructor, for typed scalars
        self.node_type = yaml.ScalarNode
        self._resolved: dict[tuple[str, tuple[bool, bool]], str] = {}
        # Plain untagged scalars that looked typed but resolved to a string (`5m`, `1h`):
        # a file repeats a few of them thousands of times.
        self.texts: set[str] = set()

    def _resolve(self, value: str, implicit: tuple[bool, bool]) -> str:
        """The implicit tag of a plain scalar; values like `5m` repeat, so it is cached."""
        key = (value, implicit)
        tag = self._resolved.get(key)
        if tag is None:
            resolved = self.helper.resolve(self.node_type, value, implicit)  # type: ignore[no-untyped-call]
            tag = self._resolved[key] = str(resolved)
        return tag

    def value(self, event: yaml.ScalarEvent) -> Any:
        value: str = event.value
        tag = event.tag
        if tag in (None, "!", _STR) and (
            not event.implicit[0] or tag == _STR or (value and value[0] not in _MAYBE_TYPED)
        ):
            return value
        if tag in (None, "!"):
            tag = self._resolve(value, event.implicit)
        if tag == _STR:
            if event.tag is None:
                self.texts.add(value)
            return value
        node = self.node_type(tag, value, style=event.style)
        try:
            return self.helper.construct_object(node, deep=True)
        # PyYAML's constructors fail in many ways on values they cannot build (`0x_`,
        # `2026-02-30`, `!!bool foo`: ValueError, KeyError, AttributeError, IndexError...):
        # every one of them is a mistake in the file, never crond's.
        except Exception as exc:  # noqa: BLE001
            kind = tag.rsplit(":", 1)[-1]
            why = f" ({exc})" if type(exc) is ValueError else ""  # PyYAML's own words
            if event.tag in (None, "!"):
                reads = f"reads as a YAML {kind} but is not a valid one"
                fix = "quote it to keep it as text"
            else:
                shown = event.tag.replace("tag:yaml.org,2002:", "!!")
                reads, fix = f"is not a valid {shown}", f"remove the {shown} tag or fix the value"
            raise BadScalarError(f'"{value}" {reads}{why}; {fix}') from None


class _Builder:
    def __init__(self, events: Iterator[yaml.Event], source: Source) -> None:
        self.events = events
        self.source = source
        self.scalar = _Scalars().value
        self.anchors: dict[str, Any] = {}

    def node(self, event: yaml.Event, path: Path) -> Any:
        import yaml  # noqa: PLC0415  (see the module docstring)

        self.source.values[path] = _mark(event)
        if isinstance(event, yaml.AliasEvent):
            anchor = event.anchor or ""
            if anchor not in self.anchors:
                self._problem(event, path, f'unknown alias "*{anchor}"')
            return self.anchors.get(anchor)
        if isinstance(event, yaml.ScalarEvent):
            try:
                value = self.scalar(event)
            except BadScalarError as exc:
                self._problem(event, path, str(exc))
                value = event.value
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
        import yaml  # noqa: PLC0415  (see the module docstring)

        items: list[Any] = []
        for event in self.events:
            if isinstance(event, yaml.SequenceEndEvent):
                break
            items.append(self.node(event, (*path, len(items))))
        return items

    def _mapping(self, path: Path) -> dict[Any, Any]:
        import yaml  # noqa: PLC0415  (see the module docstring)

        result: dict[Any, Any] = {}
        merges: list[Any] = []
        for key_event in self.events:
            if isinstance(key_event, yaml.MappingEndEvent):
                break
            if not isinstance(key_event, yaml.ScalarEvent):
                self._problem(key_event, path, "a key must be a plain value")
                self.node(key_event, (*path, "?"))  # a whole list or mapping: before its value
                self.node(next(self.events), (*path, "?"))
                continue
            value_event = next(self.events)
            if key_event.value == "<<" and key_event.implicit[0]:
                merged = self.node(value_event, (*path, "<<"))
                merges.extend(merged if isinstance(merged, list) else [merged])
                continue
            try:
                key = _key_text(key_event, self.scalar)
            except BadScalarError as exc:  # `!!int 0x_:`
                self._problem(key_event, path, str(exc))
                key = key_event.value
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


def _key_text(event: yaml.ScalarEvent, scalar: Callable[[yaml.ScalarEvent], Any]) -> str:
    """A mapping key as written: job names and env variables are text, so `off:`, `yes:`
    or `0x10:` stay what they say (YAML 1.1 would make them False, True and 16). Only
    an explicit tag (`!!int 10:`) is honoured."""
    if event.tag is None:
        return event.value
    key = scalar(event)
    return key if isinstance(key, str) else str(key)


class _Unlocated(Exception):  # noqa: N818  (a signal to parse again, not an error)
    """The quick pass met a problem; `parse` finds and places it."""


class _QuickBuilder:
    """`_Builder` without marks, for files without problems: the same data, built by one
    tight loop per mapping (type identity instead of isinstance chains; plain strings,
    most of a schedules file, taken on the spot). Records the value marks of containers
    and aliases, and of values under a key in `keep`: with those, `Source.locate` finds a
    path ending in a kept key exactly as after `parse`.
    """

    def __init__(self, get_event: Callable[[], Any], keep: frozenset[str]) -> None:
        self.get = get_event
        self.keep = keep
        self.values: dict[Path, Mark] = {}
        scalars = _Scalars()
        self.scalar, self.texts = scalars.value, scalars.texts
        self.anchors: dict[str, Any] = {}

    def node(self, event: Any, path: Path) -> Any:
        import yaml  # noqa: PLC0415  (see the module docstring)

        kind = type(event)
        if kind is yaml.ScalarEvent:
            value = self.scalar(event)
        else:
            self.mark(event, path)
            if kind is yaml.MappingStartEvent:
                value = self.mapping(path)
            elif kind is yaml.SequenceStartEvent:
                value = self.sequence(path)
            elif kind is yaml.AliasEvent and event.anchor in self.anchors:
                return self.anchors[event.anchor]
            else:
                raise _Unlocated
        if event.anchor:
            self.anchors[event.anchor] = value
        return value

    def mark(self, event: Any, path: Path) -> None:
        start = event.start_mark
        # tuple.__new__: Mark(...) would go through a Python-level __new__
        self.values[path] = tuple.__new__(Mark, (start.line + 1, start.column + 1))

    # In the two loops below, `plain` is a string as it stands: no tag, no anchor, and
    # quoted, or starting with a character no YAML 1.1 type starts with, or known to be
    # text (see `_Scalars.value`). Written out, not a function: it runs for every scalar.

    def sequence(self, path: Path) -> list[Any]:
        import yaml  # noqa: PLC0415  (see the module docstring)

        get, texts = self.get, self.texts
        scalar_event, sequence_end = yaml.ScalarEvent, yaml.SequenceEndEvent
        items: list[Any] = []
        while True:
            event = get()
            if type(event) is scalar_event:
                text = event.value
                plain = (
                    event.tag is None
                    and event.anchor is None
                    and (
                        not event.implicit[0]
                        or text[:1] not in _MAYBE_TYPED_OR_EMPTY
                        or text in texts
                    )
                )
                items.append(text if plain else self.node(event, (*path, len(items))))
            elif type(event) is sequence_end:
                return items
            else:
                items.append(self.node(event, (*path, len(items))))

    def mapping(self, path: Path) -> dict[Any, Any]:
        import yaml  # noqa: PLC0415  (see the module docstring)

        get, keep, texts = self.get, self.keep, self.texts
        scalar_event, mapping_end = yaml.ScalarEvent, yaml.MappingEndEvent
        result: dict[Any, Any] = {}
        merges: list[Any] = []
        while True:
            event = get()
            if type(event) is not scalar_event:
                if type(event) is mapping_end:
                    break
                raise _Unlocated
            key = event.value
            if not (
                event.tag is None
                and event.anchor is None
                and (not event.implicit[0] or key[:1] not in _MAYBE_TYPED_OR_EMPTY or key in texts)
            ):
                if key == "<<" and event.implicit[0]:
                    merged = self.node(get(), (*path, "<<"))
                    merges.extend(merged if isinstance(merged, list) else [merged])
                    continue
                key = _key_text(event, self.scalar)
            if key in result:
                raise _Unlocated
            event = get()
            if key in keep:
                self.mark(event, (*path, key))
            text = event.value if type(event) is scalar_event else None
            if (
                text is not None
                and event.tag is None
                and event.anchor is None
                and (
                    not event.implicit[0] or text[:1] not in _MAYBE_TYPED_OR_EMPTY or text in texts
                )
            ):
                result[key] = text
            else:
                result[key] = self.node(event, (*path, key))
        for merged in merges:  # `<<`: keys of the mapping itself win over merged ones
            if isinstance(merged, dict):
                for key, value in merged.items():
                    result.setdefault(key, value)
        return result


def _loader(text: str) -> yaml.SafeLoader:
    """PyYAML's loader for `text`: the C one, several times faster; the pure one where
    libyaml is absent."""
    import yaml  # noqa: PLC0415  (see the module docstring)

    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return loader(text)


def parse(text: str) -> Source:
    """Parse YAML text (its first document). Syntax errors become a problem with their
    line; never raises."""
    import yaml  # noqa: PLC0415  (see the module docstring)

    source = Source(data=None)
    loader = _loader(text)
    try:
        events = iter(loader.get_event, None)
        builder = _Builder(_until_document_end(events), source)
        for event in builder.events:
            source.data = builder.node(event, ())
            break
        for event in events:  # the rest of the stream: it must end here
            if isinstance(event, yaml.DocumentStartEvent):
                source.problems.append(SourceProblem(_mark(event), (), _SECOND_DOCUMENT))
                break
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
        what = " ".join(part for part in (exc.context, exc.problem) if part)
        message = f"YAML syntax error: {what}{_syntax_hint(text, where, what)}"
        return Source(data=None, problems=[SourceProblem(where, (), message)])
    except yaml.YAMLError as exc:
        return Source(data=None, problems=[SourceProblem(Mark(1, 1), (), f"YAML error: {exc}")])
    finally:
        loader.dispose()
    return source


_SECOND_DOCUMENT = (
    "a second YAML document starts here (after `---`); crond reads one document: put "
    "every job under the first one's `jobs:`"
)


def _syntax_hint(text: str, where: Mark, what: str) -> str:
    """What usually causes the syntax errors people meet most in a schedules file."""
    lines = text.splitlines()
    line = lines[where.line - 1] if 0 < where.line <= len(lines) else ""
    if "\t" in line[: where.column]:
        return " (a tab: YAML indents with spaces only)"
    if "mapping values are not allowed" in what:
        return ' (a value with ": " in it must be quoted, e.g. command: "echo a: b")'
    if "expected <document start>" in what:
        first = next((x for x in lines if x.strip() and not x.lstrip().startswith("#")), "")
        indent = len(first) - len(first.lstrip(" "))
        if len(line) - len(line.lstrip(" ")) < indent:
            return " (this line is indented less than the file's first line)"
    return ""


def _until_document_end(events: Iterator[yaml.Event]) -> Iterator[yaml.Event]:
    """The events of the first document's content."""
    import yaml  # noqa: PLC0415  (see the module docstring)

    for event in events:
        if isinstance(event, (yaml.StreamStartEvent, yaml.DocumentStartEvent)):
            continue
        if isinstance(event, (yaml.DocumentEndEvent, yaml.StreamEndEvent)):
            return
        yield event


def parse_quick(text: str, keep: frozenset[str] = frozenset()) -> Source | None:
    """The data of `parse(text)`, or None when the file has any problem (a YAML error, a
    duplicate key, ...): then `parse` locates it. Records only the marks that
    `Source.locate` needs for paths ending in a key in `keep`.

    A file of the usual shape is read by `yamlfast`, line by line without PyYAML (in
    about two thirds of the time); anything else, or anything `yamlfast` is unsure of,
    by PyYAML's parser.
    """
    from crond import yamlfast  # noqa: PLC0415  (yamlfast imports this module)

    fast = yamlfast.parse_fast(text, keep)
    if fast is not None:
        return fast
    return _parse_quick_pyyaml(text, keep)


def _parse_quick_pyyaml(text: str, keep: frozenset[str]) -> Source | None:
    """`parse_quick` by PyYAML's parser and `_QuickBuilder`: any file."""
    import yaml  # noqa: PLC0415  (see the module docstring)

    loader = _loader(text)
    try:
        get: Callable[[], Any] = loader.get_event
        event = get()
        while isinstance(event, (yaml.StreamStartEvent, yaml.DocumentStartEvent)):
            event = get()
        builder = _QuickBuilder(get, keep)
        if isinstance(event, (yaml.DocumentEndEvent, yaml.StreamEndEvent)):
            return Source(data=None)
        data = builder.node(event, ())
        while not isinstance(event, yaml.StreamEndEvent):  # nothing after the document
            event = get()
            if isinstance(event, yaml.DocumentStartEvent):
                return None
    except (yaml.YAMLError, _Unlocated, BadScalarError):
        return None
    finally:
        loader.dispose()
    return Source(data=data, values=builder.values)
