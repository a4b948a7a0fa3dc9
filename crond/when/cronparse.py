"""The cron grammar: a cron expression's text -> a CronExpr, or a CronError whose message
a person can act on.

Owns the grammar of docs/schedules.md (`*`, `a-b`, `*/n`, `a-b/n`, `n/s`, lists,
names, macros, and the richer fields: `?`, `H`, `L`, `W`, `#`, whose forms and words are
cronforms.py's), the R2/R3 facts as written, and the messages. It parses by itself rather
than through croniter: crond's messages name the field, the bad value and the allowed
range, and croniter 7.0.0 reads a written equal range such as `5-5` as the whole field
(see tests/when/test_timing_oracle.py for the comparison).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from crond.when import cronforms
from crond.when.cronexpr import NEVER, CronExpr
from crond.when.cronforms import DayForm, FormError

__all__ = ["CronError", "parse_cron"]

FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
# A bare `H` picks within these: every month has days 1-28, and 7 is Sunday again.
_H_RANGES = ((0, 59), (0, 23), (1, 28), (1, 12), (0, 6))
_HASHED = re.compile(r"[Hh](\(|/|$)")  # an H item: H, H(a-b), H/n
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES: tuple[dict[str, int], ...] = (
    {},
    {},
    {},
    {name: i + 1 for i, name in enumerate(_MONTHS)},
    {name: i for i, name in enumerate(_WEEKDAYS)},
)
_NAMED_ENDS = {3: ("dec", "jan"), 4: ("sun", "sun")}  # a field's last and first, as names
_HINTS = ("0-59", "0-23", "1-31", "jan..dec, 1-12", "mon..sun, 0-7")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # at most, leap years included
_HASH_MARK = re.compile(r"(?:^|,)h", re.IGNORECASE)  # a field whose values the name picks
_EVERYDAY = 99  # a field's "worst" without a plain value (only forms)


class _Read(NamedTuple):
    """A field as read: its plain values, its day forms, its text with `H` resolved, the
    largest its smallest value could be for any job's name, and whether it has an `H`."""

    values: frozenset[int]
    forms: frozenset[DayForm]
    text: str
    worst: int
    hashed: bool


MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}


class CronError(ValueError):
    """A bad cron expression; `str(e)` is a complete message naming the field and value."""

    def __init__(self, message: str, *, field: str | None, value: str) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


# The caches below are applied by assignment rather than with `@`: mutmut, which
# `make mutate` runs, leaves decorated functions alone, and these hold rules.


def parse_cron(expr: str, seed: str = "") -> CronExpr:
    """Parse and fully validate a cron expression or macro; raise CronError. `seed` (the
    job's name) picks the values of `H`; what is refused does not depend on it."""
    text = expr.strip()
    if text.startswith("@"):
        return _parse_macro(text, expr)
    parts = text.split()
    if len(parts) != 5:
        raise CronError(_count_message(len(parts)), field=None, value=expr)
    read = [
        _field(i, part, seed if _HASH_MARK.search(part) else "") for i, part in enumerate(parts)
    ]
    minutes, hours, days, months, weekdays = (r.values for r in read)
    # R2 and R3 go by how the fields are written: whether they start with "*" (or "?").
    day_and = parts[2][0] in "*?" or parts[4][0] in "*?"
    if day_and and not read[2].forms:  # a day must match the day-of-month written
        _check_day_exists(read[2].worst, months, parts[2])
    source = " ".join(parts)
    hashed = any(r.hashed for r in read)
    found = CronExpr(
        source=expr if source == expr else source,  # the job's own text when written so
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=weekdays,
        day_and=day_and,
        wildcard=parts[0][0] == "*" or parts[1][0] == "*",
        day_forms=read[2].forms | read[4].forms,
        resolved=" ".join(r.text for r in read) if hashed else "",
    )
    if found.day_forms and found.next_day(0) >= NEVER:
        index = 2 if read[2].forms else 4
        names = ",".join(_MONTHS[m - 1] for m in sorted(months))
        longest = max(_MONTH_DAYS[m - 1] for m in months)
        raise _error(
            index,
            parts[index],
            f'"{parts[index]}" never occurs in {names} (at most {longest} days); '
            "the job would never run",
        )
    return found


def _parse_macro(text: str, original: str) -> CronExpr:
    name = text.lower()
    if name == "@reboot":
        empty: frozenset[int] = frozenset()
        return CronExpr("@reboot", empty, empty, empty, empty, empty, False, False, reboot=True)
    if name not in MACROS:
        known = " ".join([*MACROS, "@reboot"])
        raise CronError(f'"{text}" is not a known macro ({known})', field=None, value=original)
    return replace(parse_cron(MACROS[name]), source=name)


def _count_message(count: int) -> str:
    head = f"expected 5 fields ({' '.join(FIELDS)}), got {count}"
    if count == 0:
        return "empty cron expression: " + head
    if count == 6:
        return head + "; seconds are not supported"
    if count == 7:
        return head + "; seconds and years are not supported"
    return head


def _field_values(index: int, text: str, seed: str) -> _Read:
    """A field's values (Sunday as 0), day forms and resolved text."""
    if text == "?" and index in (2, 4):  # the Quartz habit: the same as *
        return _Read(_field_values(index, "*", seed).values, frozenset(), "?", 1, False)
    values: set[int] = set()
    forms: set[DayForm] = set()
    texts: list[str] = []
    worst, hashed = _EVERYDAY, False
    for item in text.split(","):
        if not item:
            raise _error(index, text, f'"{text}" has an empty list item')
        try:
            got, form = _special(index, item, seed)
        except FormError as exc:
            raise _error(index, exc.value, str(exc)) from None
        if form is not None:
            forms.add(form)
            texts.append(item)
            continue
        if got is not None:
            values.update(got.values)
            texts.append(got.text)
            worst, hashed = min(worst, got.worst), True
            continue
        plain = _parse_item(index, item)
        values.update(plain)
        texts.append(item)
        worst = min(worst, plain[0])
    if index == 4:
        values = {d % 7 for d in values}
    return _Read(frozenset(values), frozenset(forms), ",".join(texts), worst, hashed)


# Files repeat `*`, `mon-fri`, hours and minutes across thousands of expressions, which
# then share one set each (a field with `H` is its job's own: its seed is in the key).
_field = functools.lru_cache(maxsize=1024)(_field_values)


def _special(index: int, item: str, seed: str) -> tuple[cronforms.Hashed | None, DayForm | None]:
    """An `H` item resolved, or a day form, or neither (a plain item)."""

    def value_of(text: str, end: bool) -> int:
        try:
            return _parse_value(index, text, text, range_end=end)
        except CronError as exc:  # "minute field: ..." without the field, which _error adds
            low, high = _RANGES[index]
            said = str(exc).partition(": ")[2]
            hint = f"; H(a-b) picks within the field ({low}-{high})" if _HASHED.match(item) else ""
            raise FormError(item, f'{said} in "{item}"{hint}') from None

    got = cronforms.hashed(index, item, seed, _H_RANGES[index], value_of)
    if got is not None or index not in (2, 4):
        return got, None
    weekday_of: Callable[[str], int] = functools.partial(value_of, end=False)
    return None, cronforms.day_form(index, item, weekday_of)


def _parse_item(index: int, item: str) -> range:
    low, high = _RANGES[index]
    base, slash, step_text = item.partition("/")
    step = _parse_step(index, item, step_text) if slash else 1
    if base == "*":
        return range(low, high + 1, step)
    first_text, dash, last_text = base.partition("-")
    first = _parse_value(index, first_text, item)
    if dash:
        last = _parse_value(index, last_text, item, range_end=True)
    else:
        last = high if slash else first  # "n/s" means "n-max/s"
    if first > last:
        top, bottom = str(high), str(low)
        if first_text.isalpha() and index in _NAMED_ENDS:
            top, bottom = _NAMED_ENDS[index]
        raise _error(
            index,
            item,
            f'"{item}" is a backwards range; write it as two ranges '
            f"({first_text}-{top},{bottom}-{last_text})",
        )
    return range(first, last + 1, step)


def _parse_step(index: int, item: str, text: str) -> int:
    low, high = _RANGES[index]
    if not text.isdigit():
        raise _error(index, item, f'step "{text}" in "{item}" is not a whole number')
    step = int(text)
    if not 1 <= step <= high - low:
        unit = {0: "m", 1: "h"}.get(index)
        hint = f"; for a fixed interval use `every: {step}{unit}`" if unit and step else ""
        raise _error(
            index, item, f'step {step} in "{item}" must be between 1 and {high - low}{hint}'
        )
    return step


def _parse_value(index: int, text: str, item: str, *, range_end: bool = False) -> int:
    low, high = _RANGES[index]
    if text.isdigit():
        value = int(text)
        if not low <= value <= high:
            raise _error(index, text, f'"{text}" is out of range {low}-{high}')
        return value
    name = text.lower()
    if name in _NAMES[index]:
        value = _NAMES[index][name]
        return 7 if range_end and value == 0 and index == 4 else value  # "fri-sun" = 5-7
    hint = cronforms.misfit(index, item)
    if hint:
        raise _error(index, item, hint)
    kind = {3: "a month", 4: "a weekday"}.get(index, "a number")
    shown = text or item
    raise _error(index, shown, f'"{shown}" is not {kind} ({_HINTS[index]})')


def _check_day_exists(worst: int, months: frozenset[int], day_text: str) -> None:
    """A day-of-month that no chosen month has would silently never run: refuse it.
    `worst`: the largest the field's first day can be, whatever `H` picks."""
    if _day_exists(worst, months):
        return
    names = ",".join(_MONTHS[m - 1] for m in sorted(months))
    hashed = " for some job names" if _HASH_MARK.search(day_text) else ""
    raise _error(
        2, day_text, f'"{day_text}" never occurs in {names}{hashed}; the job would never run'
    )


def _some_month_has(first: int, months: frozenset[int]) -> bool:
    """Whether some month of `months` has the day `first`."""
    return first <= max(_MONTH_DAYS[m - 1] for m in months)


# Field sets are shared, so a file's expressions ask a few hundred of these.
_day_exists = functools.lru_cache(maxsize=1024)(_some_month_has)


def _error(index: int, value: str, message: str) -> CronError:
    return CronError(f"{FIELDS[index]} field: {message}", field=FIELDS[index], value=value)
