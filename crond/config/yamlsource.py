"""YAML text -> plain data, where every node came from, and what is wrong with it.

The schedules file is read with PyYAML's event parser (the C one, libyaml, when it is
there) and built into dicts, lists and scalars here, by one builder, rather than by
PyYAML's constructor. That builder:

- gives every mapping key and every value a 1-based (line, column), so that config
  errors point at the exact place (`places.Source.locate`);
- types plain scalars as PyYAML's SafeLoader does (`yamlscalars`), but keeps mapping
  keys as written (`off:` is the text "off");
- refuses, as located problems, what a loader would silently accept or choke on:
  duplicate keys and anchors, tags other than those of plain data, merges (`<<`) of
  anything but mappings, nesting deeper than `MAX_DEPTH`, and aliases that stand for
  more than `MAX_ALIAS_NODES` nodes in all (an "alias bomb" costs nothing to write and
  everything to expand): the anchors and aliases are `yamlanchors`'.

`parse` never raises: every problem is a `SourceProblem` with its place (YAML's own
errors in crond's words: `yamlerrors`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from crond.config import yamlerrors
from crond.config.places import DUPLICATE, Mark, Path, Source, SourceProblem
from crond.config.wording import MAX_PROBLEMS, quote, show
from crond.config.yamlanchors import MAX_DEPTH, TOO_DEEP, Anchor, Anchors
from crond.config.yamlscalars import (
    MAPPING_TAGS,
    SEQUENCE_TAGS,
    BadScalarError,
    Scalars,
    unsupported_tag,
)


def _mark(event: Any) -> Mark:
    start = event.start_mark
    return Mark(start.line + 1, start.column + 1)


class _FirstProblem(Exception):  # noqa: N818  (a signal, not an error)
    """A pass that locates only some nodes (`keep`) met a problem: it stops there."""


class _Builder:
    """The data of one YAML document, from PyYAML's events (see the module docstring)."""

    def __init__(
        self, loader: yaml.SafeLoader, source: Source, keep: frozenset[str] | None
    ) -> None:
        self.get: Callable[[], Any] = loader.get_event
        self.source = source
        self.keep = keep  # see `parse`
        self.scalar = Scalars().value
        self.anchors = Anchors()
        self.depth = 0  # lists and mappings open around the current node
        self.deepest = 0  # the largest depth reached (within the current anchor)
        self.nodes = 0  # nodes built, each alias counting the nodes it stands for

    def document(self) -> Any:
        """The first document's data; a second document is a problem."""
        event = self.get()
        while isinstance(event, (yaml.StreamStartEvent, yaml.DocumentStartEvent)):
            event = self.get()
        if isinstance(event, (yaml.DocumentEndEvent, yaml.StreamEndEvent)):
            return None
        data = self.node(event, ())
        while not isinstance(event, yaml.StreamEndEvent):
            event = self.get()
            if isinstance(event, yaml.DocumentStartEvent):
                self.problem(_mark(event), (), _SECOND_DOCUMENT)
                break
        return data

    def node(self, event: Any, path: Path) -> Any:
        keep = self.keep
        if keep is None or (path and path[-1] in keep):
            self.source.values[path] = _mark(event)
        if type(event) is yaml.AliasEvent:
            return self.alias(event, path)
        anchor: str | None = event.anchor
        if anchor is None:
            return self.build(event, path)
        nodes, deepest, depth = self.nodes, self.deepest, self.depth
        self.deepest = depth
        self.anchors.building.add(anchor)
        value = self.build(event, path)
        height, self.deepest = self.deepest - depth, max(deepest, self.deepest)
        self.define(anchor, Anchor(value, self.nodes - nodes, height), event, path)
        return value

    def define(self, name: str, anchor: Anchor, event: Any, path: Path) -> None:
        problem = self.anchors.define(name, anchor)
        if problem is not None:
            self.problem(_mark(event), path, problem)

    def build(self, event: Any, path: Path) -> Any:
        self.nodes += 1
        kind = type(event)
        if kind is yaml.ScalarEvent:
            try:
                value = self.scalar(event)
            except BadScalarError as exc:
                self.problem(_mark(event), path, *exc.args)
                return event.value
            if (value is None or value is True or value is False) and event.tag is None:
                self.source.written[path] = event.value
            return value
        if kind is yaml.SequenceStartEvent:
            tags, what = SEQUENCE_TAGS, "a list"
        elif kind is yaml.MappingStartEvent:
            tags, what = MAPPING_TAGS, "a mapping"
        else:  # pragma: no cover - the parser emits nothing else inside a document
            raise TypeError(f"unexpected YAML event {event}")
        tag: str | None = event.tag
        if tag not in tags:
            self.problem(_mark(event), path, unsupported_tag(tag or "", what))
        if self.depth >= MAX_DEPTH:
            self.problem(_mark(event), path, TOO_DEEP)
            _skip(self.get, self.anchors)
            return None
        self.depth += 1
        self.deepest = max(self.deepest, self.depth)
        value = self.sequence(path) if kind is yaml.SequenceStartEvent else self.mapping(path)
        self.depth -= 1
        return value

    def alias(self, event: Any, path: Path) -> Any:
        anchor, problem = self.anchors.stand_for(event.anchor or "", self.depth)
        if problem is not None:
            self.problem(_mark(event), path, problem)
        if anchor is None:
            return None
        self.nodes += anchor.nodes
        self.deepest = max(self.deepest, self.depth + anchor.height)
        return anchor.value

    def sequence(self, path: Path) -> list[Any]:
        items: list[Any] = []
        while True:
            event = self.get()
            if type(event) is yaml.SequenceEndEvent:
                return items
            items.append(self.node(event, (*path, len(items))))

    def mapping(self, path: Path) -> dict[str, Any]:
        result: dict[str, Any] = {}
        merges: list[dict[str, Any]] = []
        while True:
            event = self.get()
            kind = type(event)
            if kind is yaml.MappingEndEvent:
                break
            if kind is not yaml.ScalarEvent:  # `? [a, b]\n: value`
                self.problem(_mark(event), path, "a key must be a plain value")
                self.node(event, (*path, "?"))  # a whole list or mapping: before its value
                self.node(self.get(), (*path, "?"))
            elif event.value == "<<" and event.tag is None and event.implicit[0]:
                merges += self.merged(self.get(), (*path, "<<"))
            else:
                self.entry(event, path, result)
        for merged in merges:  # `<<`: keys of the mapping itself win over merged ones
            for key, value in merged.items():
                result.setdefault(key, value)
        return result

    def entry(self, event: Any, path: Path, result: dict[str, Any]) -> None:
        """One `key: value` of a mapping, into `result`."""
        key = self.key(event, path)
        where = (*path, key)
        if key in result:
            first = self.source.keys.get(where, Mark(0, 0))
            self.problem(
                _mark(event),
                where,
                f"duplicate key {quote(key)} (first defined at line {first.line}); "
                "YAML would silently keep only the last one: remove or rename one",
            )
            value = self.node(self.get(), (*where, DUPLICATE))
            if len(self.source.duplicates) < MAX_PROBLEMS:
                self.source.duplicates.append((where, value))
            return
        if self.keep is None:
            self.source.keys[where] = _mark(event)
        result[key] = self.node(self.get(), where)

    def key(self, event: Any, path: Path) -> str:
        """A mapping key as written: job names and env variables are text, so `off:`,
        `yes:` or `0x10:` stay what they say (YAML 1.1 would make them False, True and 16).
        Only an explicit tag (`!!int 10:`) is honoured."""
        self.nodes += 1
        key: str = event.value
        if event.tag is not None:
            try:
                typed = self.scalar(event)
                key = typed if isinstance(typed, str) else str(typed)
            except BadScalarError as exc:  # `!!int 0x_:`
                self.problem(_mark(event), path, *exc.args)
        if event.anchor is not None:  # `&name key:`, then `*name` elsewhere
            self.define(event.anchor, Anchor(key, 1, 0), event, path)
        return key

    def merged(self, event: Any, path: Path) -> list[dict[str, Any]]:
        """The mappings a merge key (`<<: *common`, `<<: [*a, *b]`) brings in."""
        problems = len(self.source.problems)
        value = self.node(event, path)
        said = len(self.source.problems) > problems  # (a bad alias is null: said already)
        items, paths = [value], [path]
        if isinstance(value, list):
            items, paths = value, [(*path, i) for i in range(len(value))]
        found = []
        for item, where in zip(items, paths, strict=True):
            if isinstance(item, dict):
                found.append(item)
            elif not (item is None and said):
                without = _bad_merge(None).replace("not null", "not this value")
                self.problem(self.source.locate(where), where, _bad_merge(item), without)
        return found

    def problem(self, mark: Mark, path: Path, message: str, without_value: str = "") -> None:
        problems = self.source.problems
        if len(problems) <= MAX_PROBLEMS:  # one more than is shown: `capped` says so
            problems.append(SourceProblem(mark, path, message, without_value))
        if self.keep is not None:
            raise _FirstProblem  # a first pass stops here: the located pass says it all


_SECOND_DOCUMENT = (
    "a second YAML document starts here (after `---`); crond reads one document: put "
    "every job under the first one's `jobs:`"
)


def _bad_merge(value: Any) -> str:
    return (
        "a merge key (<<) takes a mapping or a list of mappings (e.g. `<<: *common`), "
        f"not {show(value)}"
    )


def _loader(text: str) -> yaml.SafeLoader:
    """PyYAML's loader for `text`: the C one, several times faster; the pure one where
    libyaml is absent."""
    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return loader(text)


def parse(text: str, keep: frozenset[str] | None = None) -> Source:
    """Parse YAML text (its first document), locating every node. Never raises: syntax
    errors and unsafe input become problems with their line and column.

    `keep`: locate only the values of these keys (and no key), and stop at the first
    problem. The places of every node of a 10,000-job file come to about 10 MB of the
    daemon's idle RSS (bench_idle.py, target < 80 MB), and only a file with a mistake
    needs them: `loader.loads` reads a file this way first, and again, locating
    everything, when it has a problem."""
    source = Source(data=None)
    try:
        loader = _loader(text)
    # The pure loader checks every character here; the C one cannot encode a surrogate.
    except (yaml.reader.ReaderError, UnicodeEncodeError):
        return _unreadable(text)
    try:
        source.data = _Builder(loader, source, keep).document()
    except _FirstProblem:
        source.data = None
    except yaml.reader.ReaderError:
        return _unreadable(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
        what = " ".join(part for part in (exc.context, exc.problem) if part)
        hint = yamlerrors.syntax_hint(text, where.line, where.column, what)
        message = f"YAML syntax error: {what}{hint}"
        return Source(data=None, problems=[SourceProblem(where, (), message)])
    except yaml.YAMLError as exc:
        return Source(data=None, problems=[SourceProblem(Mark(1, 1), (), f"YAML error: {exc}")])
    finally:
        loader.dispose()
    return source


def _skip(get: Callable[[], Any], anchors: Anchors) -> None:
    """Past the end of the list or mapping just started, building nothing; its anchors
    are known (as null: its problem is said already), so their aliases are not unknown."""
    open_collections = 1
    while open_collections:
        event = get()
        kind = type(event)
        if kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
            open_collections += 1
        elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
            open_collections -= 1
        anchor = getattr(event, "anchor", None)
        if anchor is not None and kind is not yaml.AliasEvent:
            anchors.skipped(anchor)


def _unreadable(text: str) -> Source:
    line, column, message = yamlerrors.unreadable(text)
    return Source(data=None, problems=[SourceProblem(Mark(line, column), (), message)])
