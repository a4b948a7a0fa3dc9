"""A YAML document's anchors (`&name`) and what their aliases (`*name`) stand for, for the
builder of crond/config/yamlsource.py, within the limits that keep a small file small.

An alias is its anchor's value again, counted as the nodes it stands for: the nodes all
aliases of a file stand for together are at most `MAX_ALIAS_NODES` (an "alias bomb" costs
nothing to write and everything to expand), and an alias may not nest its value deeper
than `MAX_DEPTH`. An anchor defined twice, an alias of an anchor not defined yet, and an
alias inside its own anchor's node (data that contains itself) are problems too.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from crond.config.wording import quote

MAX_DEPTH = 64  # lists and mappings inside each other; a schedules file needs about 5
MAX_ALIAS_NODES = 100_000  # the nodes all aliases of a file stand for, together

TOO_DEEP = (
    f"lists and mappings nested more than {MAX_DEPTH} deep; a schedules file needs a "
    "handful of levels: flatten the data"
)
_UNKNOWN = "is not defined before it (define the anchor, `&name`, first)"


class Anchor(NamedTuple):
    value: Any
    nodes: int  # how many nodes it is, counting what its own aliases stand for
    height: int  # how many lists and mappings deep it is


class Anchors:
    """The anchors of one document, as the builder defines them, and its aliases' cost."""

    def __init__(self) -> None:
        self.known: dict[str, Anchor] = {}
        self.building: set[str] = set()  # anchors whose node is not complete yet
        self.by_alias = 0  # the nodes aliases stood for, together

    def define(self, name: str, anchor: Anchor) -> str | None:
        """`name`'s node is complete: the problem when `name` was defined already (the
        first one stays)."""
        self.building.discard(name)
        if name not in self.known:
            self.known[name] = anchor
            return None
        return (
            f"the anchor {quote('&' + name)} is defined a second time (YAML would let the "
            "second one silently replace the first for the aliases after it); rename one"
        )

    def skipped(self, name: str) -> None:
        """`name` is on a node not built (its problem is said already): known, as null,
        so that its aliases are not unknown."""
        self.known.setdefault(name, Anchor(None, 1, 0))

    def stand_for(self, name: str, depth: int) -> tuple[Anchor | None, str | None]:
        """What an alias of `name`, `depth` lists and mappings deep, stands for (None:
        nothing), and its problem (None: none, or the alias bomb's, said once already)."""
        anchor = self.known.get(name)
        if anchor is None:
            inside = name in self.building
            why = "refers to the node it is in (data that contains itself)" if inside else ""
            return None, f"the alias {quote('*' + name)} {why or _UNKNOWN}"
        if self.by_alias + anchor.nodes > MAX_ALIAS_NODES:
            said = self.by_alias > MAX_ALIAS_NODES  # said once: a bomb has many aliases
            self.by_alias = MAX_ALIAS_NODES + 1
            return None, None if said else _too_many_nodes(name)
        if depth + anchor.height > MAX_DEPTH:
            return None, TOO_DEEP
        self.by_alias += anchor.nodes
        return anchor, None


def _too_many_nodes(name: str) -> str:
    return (
        f"with the alias {quote('*' + name)}, the file's aliases stand for more than "
        f"{MAX_ALIAS_NODES:,} values in all (an alias bomb?); write the data out, or use "
        "fewer or smaller aliases"
    )
