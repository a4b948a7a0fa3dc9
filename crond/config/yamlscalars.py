"""What a YAML scalar or tag may be in a schedules file: plain scalars typed as PyYAML's
SafeLoader types them (YAML 1.1: `5` is an int, `on` is True), explicit tags of plain
data honoured, every other tag refused, and a value that cannot be built refused with
crond's words (never PyYAML's exception).
"""

from __future__ import annotations

from typing import Any

import yaml

from crond.config.wording import quote

MAX_INT_TEXT = 1000  # characters of an integer (past this, building it costs too much)
TAG = "tag:yaml.org,2002:"
_STR, _INT = TAG + "str", TAG + "int"
# The tags of plain data, which a schedules file may spell out (`!!str 5`). `!` is
# YAML's "non-specific" tag: the value is typed as if untagged.
SCALAR_TAGS = frozenset(TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp"))
SEQUENCE_TAGS = frozenset({None, "!", TAG + "seq"})
MAPPING_TAGS = frozenset({None, "!", TAG + "map"})
# PyYAML's YAML 1.1 implicit resolvers key on a plain scalar's first character: one that
# starts with any other character is a string, and skips the resolver. "" (for the
# empty value, null) must resolve too.
_MAYBE_TYPED = frozenset("yYnNtTfFoO-+0123456789.<~=") | {""}


class BadScalarError(ValueError):
    """A scalar that cannot be built: a bad tag, or a typed value that is not valid
    (`0x_`, `2026-02-30`). args: (message, message without the value)."""


class Scalars:
    """Scalars (`5`, `true`, `null`, `!!str 5`) as PyYAML's SafeLoader types them."""

    def __init__(self) -> None:
        self.helper = yaml.SafeLoader("")  # its resolver and constructor, for typed scalars
        self.resolved: dict[str, str] = {}  # `5m`, `1h` repeat thousands of times

    def value(self, event: Any) -> Any:
        text: str = event.value
        tag = event.tag
        if tag is None or tag == "!":
            if not event.implicit[0] or text[:1] not in _MAYBE_TYPED:
                return text
            tag = self.resolved.get(text)
            if tag is None:
                node_type = yaml.ScalarNode
                resolved = self.helper.resolve(node_type, text, (True, False))  # type: ignore[no-untyped-call]
                tag = self.resolved[text] = str(resolved)
        elif tag not in SCALAR_TAGS:
            message = unsupported_tag(tag, "a scalar")
            raise BadScalarError(message, message)
        if tag == _STR:
            return text
        if tag == _INT and len(text) > MAX_INT_TEXT:
            why = f"an integer with too many digits (more than {MAX_INT_TEXT})"
            fix = "quote it to keep it as text"
            raise BadScalarError(f"{quote(text)} is {why}; {fix}", f"the value is {why}; {fix}")
        try:
            return self.helper.construct_object(yaml.ScalarNode(tag, text), deep=True)
        # PyYAML's constructors fail in many ways on values they cannot build (`0x_`,
        # `2026-02-30`, `!!bool foo`: ValueError, KeyError, AttributeError, IndexError...):
        # every one of them is a mistake in the file, never crond's.
        except Exception as exc:  # noqa: BLE001
            raise _bad_scalar(event, tag, exc) from None


def _bad_scalar(event: Any, tag: str, exc: Exception) -> BadScalarError:
    kind = tag.rsplit(":", 1)[-1]
    why = f" ({exc})" if type(exc) is ValueError else ""  # PyYAML's own words
    if event.tag in (None, "!"):
        reads = f"reads as a YAML {kind} but is not a valid one"
        fix = "quote it to keep it as text"
    else:
        shown = event.tag.replace(TAG, "!!")
        reads, fix = f"is not a valid {shown}", f"remove the {shown} tag or fix the value"
    return BadScalarError(f"{quote(event.value)} {reads}{why}; {fix}", f"the value {reads}; {fix}")


def unsupported_tag(tag: str, what: str) -> str:
    shown = quote(tag.replace(TAG, "!!"))
    return (
        f"the tag {shown} is not allowed on {what}: crond reads plain data (text, numbers, "
        "true/false, null, timestamps, lists and mappings); remove the tag"
    )
