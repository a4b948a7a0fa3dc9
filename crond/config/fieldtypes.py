"""The field types and checks the schedules file's models share (crond/config/model.py,
crond/config/sections.py): durations with their bounds, environment values, the frozen
base model, and the small checks several fields make. Messages are crond's own words,
and never echo a value that could be a secret.
"""

from __future__ import annotations

import functools
import re
from datetime import timedelta
from enum import StrEnum
from typing import Annotated

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationInfo,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from crond.config.address import AddressError, split_address
from crond.config.durations import DurationError, parse_duration
from crond.config.wording import kind_of, show
from crond.when.zones import ZoneError, get_zone

_DURATION_SCHEMA = {
    "anyOf": [
        {"type": "integer", "minimum": 0, "description": "seconds"},
        {"type": "string", "pattern": r"^\s*(\d+(ms|s|m|h|d))+\s*$|^\s*\d+\s*$"},
    ]
}
# The validation context's key for the environment `${NAME}`s are expanded from, for the
# checks of what they expand to (config/notifiers.py); without it, only texts that take no
# name are checked.
ENVIRON = "environ"
# The highest `max_running` (a job's, the daemon's): far beyond what a host can run, and
# low enough that a typo (an extra zero or ten) is said rather than taken.
MAX_RUNNING = 100_000
_parse_duration = functools.lru_cache(maxsize=8192)(parse_duration)


def _duration(value: object) -> timedelta:
    # What is not a short text or a whole number is refused here, in crond's words (a
    # list or a long text would be echoed whole).
    if isinstance(value, bool) or not isinstance(value, (str, int)) or len(str(value)) > 100:
        raise PydanticCustomError(
            "crond",
            f"{show(value)} is not a duration (use whole seconds or units like 90s, 5m, 1h30m)",
        )
    try:
        return _parse_duration(value) if isinstance(value, str) else parse_duration(value)
    except DurationError as exc:
        raise PydanticCustomError("crond", str(exc)) from None


# A bound is checked in the same call as the parse: one Python call per value instead of
# two (with an after-validator), over the tens of thousands of durations of a big file.
_ONE_SECOND = timedelta(seconds=1)


def _interval(value: object) -> timedelta:
    delta = _duration(value)
    if delta < _ONE_SECOND:
        raise PydanticCustomError("crond", "an interval must be at least 1s")
    return delta


def _grace(value: object) -> timedelta:
    delta = _duration(value)
    if delta < _ONE_SECOND:
        raise PydanticCustomError(
            "crond", "grace must be at least 1s (a start is always a little late)"
        )
    return delta


def _warn_after(value: object) -> timedelta:
    delta = _duration(value)
    if not delta:
        raise PydanticCustomError(
            "crond",
            "warn_after must be more than 0s (how long after its start a run that is "
            "still going is reported as long_running)",
        )
    return delta


def _replica_timeout(value: object) -> timedelta:
    delta = _duration(value)
    if delta < _ONE_SECOND:
        raise PydanticCustomError(
            "crond",
            "replica_timeout must be at least 1s (and at least 3 heartbeats: how long a "
            "replica may go silent before the others take it for dead)",
        )
    return delta


Duration = Annotated[timedelta, BeforeValidator(_duration), WithJsonSchema(_DURATION_SCHEMA)]
WarnAfter = Annotated[timedelta, BeforeValidator(_warn_after), WithJsonSchema(_DURATION_SCHEMA)]
Interval = Annotated[timedelta, BeforeValidator(_interval), WithJsonSchema(_DURATION_SCHEMA)]
Grace = Annotated[timedelta, BeforeValidator(_grace), WithJsonSchema(_DURATION_SCHEMA)]
ReplicaTimeout = Annotated[
    timedelta, BeforeValidator(_replica_timeout), WithJsonSchema(_DURATION_SCHEMA)
]


def _env_value(value: object) -> str:
    # An env value may be a secret: a message names its kind, never the value (null,
    # true and false say no more than their kind).
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    shown = kind_of(value)
    if value is None or isinstance(value, bool):
        raise PydanticCustomError("crond_unquoted", "not text")  # worded in problems.py
    raise PydanticCustomError(
        "crond",
        f"{shown} is not a string (env values are text; numbers are turned into text); "
        "the value is not shown, it may be a secret",
    )


EnvValue = Annotated[str, BeforeValidator(_env_value), WithJsonSchema({"type": "string"})]


class FrozenModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


def no_nul(value: str | None) -> str | None:
    """No program can be given a NUL character (it ends a C string): refused here,
    rather than failing every run of the job."""
    if value is not None and "\0" in value:
        raise PydanticCustomError(
            "crond", f"{show(value)} holds a NUL character (\\0), which no program can take"
        )
    return value


def check_zone(value: str | None) -> str | None:
    if value is not None:
        try:
            get_zone(value)
        except ZoneError as exc:
            raise PydanticCustomError("crond", str(exc)) from None
    return value


def field_error(field: str, message: str, *, at_key: bool = True) -> None:
    """A model's check on one of its fields: located at the field's key, or with
    at_key=False at its value (a value that is wrong only beside another)."""
    raise PydanticCustomError("crond_field", message, {"field": field, "crond_at_key": at_key})


def environ_of(info: ValidationInfo) -> dict[str, str]:
    context = info.context
    found = context.get(ENVIRON) if context else None
    return found if found is not None else {}


class OnLock(StrEnum):
    """What a due run does when a lock it needs has no room (docs/workflows.md)."""

    WAIT = "wait"  # wait, in slot order, until its grace runs out
    SKIP = "skip"  # skipped at once (`job.skipped`, reason `lock`)


# The rule of job names, which lock, notifier and calendar names follow too.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class ChainOn(StrEnum):
    """Which ends of a parent's run start a run of its child (`after`, docs/workflows.md)."""

    SUCCESS = "success"
    FAILURE = "failure"  # failed, timeout or killed: every end but success
    FINISHED = "finished"  # every end


def check_shape(locks: object, overlap: str, after: object, replicas: str) -> None:
    """What a job's `locks` and `after` may not stand beside (model.Job's check)."""
    if locks and overlap == "replace":
        field_error(
            "locks",
            "locks and overlap: replace do not go together (a replacement would take "
            "the place of a run that holds its locks): use overlap: skip or allow",
        )
    if after is not None and replicas == "all":
        field_error(
            "after",
            "a chained run is one run for each end of its parent's run, claimed once by "
            "one replica: it cannot run on every replica (remove replicas: all)",
        )


def check_address(value: object) -> object:
    """A listen address (`host:port`) checked before the type check: `9464` (a number) is
    told that it has no host, as the command line's flag is. Other kinds are the type
    check's."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        try:
            split_address(value)
        except AddressError as exc:
            raise PydanticCustomError("crond", str(exc)) from None
    return value
