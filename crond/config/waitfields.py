"""The fields by which jobs wait for each other (docs/workflows.md): the file's `locks:`
(names to capacities), a job's `locks` (a list of those names) and a job's `after` (a
job's name, or a map of jobs to ends). The three are easily written one for another
(`locks: {db: 1}` in a job, `after: [extract]`): what is not of its field's shape is
told what to write, with the file's own names where it gives some.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

from crond.config.fieldtypes import MAX_RUNNING, NAME, ChainOn
from crond.config.wording import show

# A lock's name (checked against the file's `locks:` by crond/config/waits.py) and its
# capacity: how many runs may hold it at once.
LockName = Annotated[str, Field(min_length=1, max_length=64)]
# A job named by another (`after`): checked against the file's jobs by config/waits.py.
JobRef = Annotated[str, Field(min_length=1, max_length=64)]
LockCapacity = Annotated[int, Field(ge=1, le=MAX_RUNNING, strict=True)]

_SHOWN_NAMES = 4  # names of the file written back into an example, at most


def _names(value: object) -> list[str]:
    """The names a list (or a mapping's keys) gives, to be written back into an example:
    [] unless each is a valid name (anything else could not be written as is)."""
    names = list(value) if isinstance(value, (list, dict)) else [value]
    if not 0 < len(names) <= _SHOWN_NAMES:
        return []
    ok = all(isinstance(name, str) and NAME.fullmatch(name) for name in names)
    return list(dict.fromkeys(str(name) for name in names)) if ok else []


def _error(message: str) -> PydanticCustomError:
    return PydanticCustomError("crond", message)


def _after(value: object) -> object:
    # A job's name is its successes: `after: extract` is `after: {extract: success}`.
    if isinstance(value, str):
        return {value: ChainOn.SUCCESS.value}
    if value is None or isinstance(value, dict):
        return value
    said = f"{show(value)} is not a job's name or a map of jobs to ends"
    names = _names(value)
    if len(names) > 1:
        ends = ", ".join(f"{name}: success" for name in names)
        raise _error(
            f"{said}: write several parents as a map, after: {{{ends}}} (each parent's "
            "end starts a run of its own, not one after all of them)"
        )
    one = names[0] if names else "extract"
    other = "extract" if one == "clean" else "clean"
    raise _error(
        f"{said}: write one parent as after: {one}, several as a map, after: "
        f"{{{one}: success, {other}: success}} (each parent's end starts a run of its own)"
    )


def _end(value: object) -> object:
    # A misspelt end is the enum's (with the end meant); what is no text at all, here:
    # `after: {extract, clean}` is a map whose ends YAML reads as null.
    if isinstance(value, str):
        return value
    said = "no end is given" if value is None else f"{show(value)} is not an end"
    message = (
        f"{said}: write success, failure (failed, timeout or killed) or finished (any "
        "end) after the parent's name, e.g. after: {extract: success}"
    )
    if value is None:  # (nothing written: located at the parent's name, not after it)
        raise PydanticCustomError("crond_field", message, {"field": ""})
    raise _error(message)


def _lock_list(value: object) -> object:
    if value is None or isinstance(value, list):
        return value
    said = f"{show(value)} is not a list of lock names"
    names = _names(value) or ["db"]
    listed = ", ".join(names)
    if isinstance(value, dict):
        capacity = {name: value.get(name) for name in names}  # (the example's: no key)
        places = (f"{n}: {c if _capacity(c) else 1}" for n, c in capacity.items())
        raise _error(
            f"{said}: a job names the locks it takes, locks: [{listed}]; their capacities "
            f"go in the file's top-level locks:, locks: {{{', '.join(places)}}}"
        )
    write = ": write" if _names(value) else ", e.g."
    raise _error(f"{said}{write} locks: [{listed}] (names of the file's top-level locks:)")


def _capacity(value: object) -> bool:
    return type(value) is int and 1 <= value <= MAX_RUNNING


def _capacities(value: object) -> object:
    if value is None or isinstance(value, dict):
        return value  # (null: the type check's)
    write = ": write" if _names(value) else ", e.g."
    names = _names(value) or ["db-heavy", "gpu"]
    example = ", ".join(f"{name}: 1" for name in names)
    listed = ", ".join(names)
    raise _error(
        f"{show(value)} is not a map of lock names to capacities{write} locks: "
        f"{{{example}}} (how many runs may hold each at once); a job names the ones it "
        f"takes in its own locks: [{listed}]"
    )


# A job's `locks` (its `defaults` too), its `after`, and the file's `locks:`.
Locks = Annotated[list[LockName], BeforeValidator(_lock_list)]
After = Annotated[dict[JobRef, Annotated[ChainOn, BeforeValidator(_end)]], BeforeValidator(_after)]
LockCapacities = Annotated[dict[str, LockCapacity], BeforeValidator(_capacities)]
