"""The job fields that say when a person means (docs/schedules.md, "Schedules as a
person writes them"): `cron` as one expression or a list, `at` (one-shot instants),
`start`/`end` bounds, `max_runs`; and the checks between them.

An instant is ISO-8601 with an offset (`2026-12-04T14:00:00+01:00`, `...Z`), or a local
time without one (`2026-12-04T14:00`), read in the job's zone (crond/when/instants.py).
The models keep what was written; `LoadedJob` resolves it once (config/loaded.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, ValidationInfo, WithJsonSchema
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from crond.config.fieldtypes import field_error
from crond.config.wording import show
from crond.when import cronparse
from crond.when.instants import resolve
from crond.when.zones import ZoneError, get_zone

if TYPE_CHECKING:
    from crond.when.cronexpr import CronExpr

__all__ = [
    "CRONS_SCHEMA",
    "MAX_AT",
    "MAX_CRONS",
    "At",
    "Instant",
    "check_crons",
    "check_schedule",
    "cron_texts",
    "instants",
]

# How many expressions / instants one job may list: far beyond what a person writes,
# low enough that a generated list by mistake costs no unbounded time at every fire.
MAX_CRONS = 64
MAX_AT = 10_000
_INSTANT_EXAMPLE = "2026-12-04T14:00:00+01:00, or 2026-12-04T14:00 in the job's zone"


def _each(items: list[Any], check: Callable[[Any], Any]) -> list[Any]:
    """`check` of every item; the mistakes of all of them at once, each at its index."""
    found, errors = [], []
    for i, item in enumerate(items):
        try:
            found.append(check(item))
        except PydanticCustomError as exc:
            errors.append(InitErrorDetails(type=exc, loc=(i,), input=item))
    if errors:
        raise ValidationError.from_exception_data("list", errors)
    return found


def _cron_one(value: object, crons: dict[str, Any] | None, parse: Callable[[str], CronExpr]) -> str:
    if not isinstance(value, str):
        raise PydanticCustomError("crond", f"{show(value)} is not a cron expression (text)")
    if crons is None or value not in crons:
        try:
            expr = parse(value)
        except cronparse.CronError as exc:
            raise PydanticCustomError("crond", f'"{value}": {exc}') from None
        if crons is not None:
            crons[value] = expr
    return value


CRONS_SCHEMA = {
    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]
}


def check_crons(
    value: object, info: ValidationInfo, parse: Callable[[str], CronExpr], context_key: str
) -> object:
    """The `cron` field: one expression, or a non-empty list of them (the fires are their
    union), each checked with `parse` (the model's cached parser) and remembered in the
    validation context's `context_key` mapping; every bad entry of a list is said."""
    crons = info.context.get(context_key) if info.context else None
    if not isinstance(value, list):
        return _cron_one(value, crons, parse)
    if not value:
        raise PydanticCustomError(
            "crond",
            "an empty list has no schedule: give one expression or more, "
            'e.g. ["0 8 * * mon-fri", "0 10 * * sat,sun"]',
        )
    if len(value) > MAX_CRONS:
        raise PydanticCustomError(
            "crond", f"{len(value)} expressions: at most {MAX_CRONS} in one job"
        )

    def one(item: object) -> str:
        text = _cron_one(item, crons, parse)
        if text.strip().lower() == "@reboot":
            raise PydanticCustomError(
                "crond", "@reboot stands alone: give it as the job's only cron"
            )
        return text

    return _each(value, one)


def _instant(value: object) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        raise PydanticCustomError(
            "crond",
            f"{value.isoformat()} is a day, not an instant: give a time too ({_INSTANT_EXAMPLE})",
        )
    if isinstance(value, str) and len(value) <= 64:
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            if parsed.time() != time(0) or "T" in value or " " in value.strip():
                return parsed
            raise PydanticCustomError(
                "crond", f'"{value}" is a day, not an instant: give a time too ({_INSTANT_EXAMPLE})'
            )
    raise PydanticCustomError("crond", f"{show(value)} is not an instant (try {_INSTANT_EXAMPLE})")


# Not `format: date-time`: that is RFC 3339, which needs an offset; a local time is valid here.
_INSTANT_SCHEMA = {
    "type": "string",
    "description": "ISO-8601 instant; without an offset, a local time in the job's zone",
}
Instant = Annotated[datetime, BeforeValidator(_instant), WithJsonSchema(_INSTANT_SCHEMA)]


def _at(value: object) -> object:
    if not isinstance(value, list):
        return [_instant(value)]
    if not value:
        raise PydanticCustomError(
            "crond", f"an empty list has no instant: give one or more ({_INSTANT_EXAMPLE})"
        )
    if len(value) > MAX_AT:
        raise PydanticCustomError("crond", f"{len(value)} instants: at most {MAX_AT:,} in one job")
    return _each(value, _instant)


At = Annotated[
    list[datetime],
    BeforeValidator(_at),
    WithJsonSchema(
        {"anyOf": [_INSTANT_SCHEMA, {"type": "array", "items": _INSTANT_SCHEMA, "minItems": 1}]}
    ),
]


def cron_texts(cron: str | list[str] | None) -> list[str]:
    """The job's expressions as a list (none, one or several)."""
    if cron is None:
        return []
    return [cron] if isinstance(cron, str) else list(cron)


def instants(
    written: list[datetime] | None, zone_name: str | None
) -> list[tuple[datetime, str | None]]:
    """The written `at` instants as UTC instants, with the DST note of a local one."""
    if not written:
        return []
    zone = get_zone(zone_name or "UTC")
    return [resolve(w, zone) for w in written]


def check_schedule(job: Any) -> None:
    """The checks between the schedule fields of a merged job (model.Job._shape)."""
    cron, every, at = job.cron, job.every, job.at
    if cron is not None and every is not None:
        field_error("every", "give either cron or every, not both")
    if cron is None and every is None and at is None and job.after is None:
        field_error("", "a schedule is missing: give cron, every or at (or after, to chain it)")
    if (
        every is not None
        and job.timezone is not None
        and at is None
        and job.start is None
        and job.end is None
    ):
        field_error(
            "timezone",
            "an every job runs in absolute time; remove timezone "
            "(or use cron for a local time of day)",
        )
    try:
        zone = get_zone(job.timezone or "UTC")
    except ZoneError:
        return  # said at `timezone`
    if job.start is not None and job.end is not None:
        start, end = resolve(job.start, zone)[0], resolve(job.end, zone)[0]
        if end < start:
            field_error(
                "end",
                f"end {job.end.isoformat()} is before start {job.start.isoformat()}: "
                "the job would never fire (swap them, or remove one)",
                at_key=False,  # (the value is wrong, beside start's: like any bad value)
            )
