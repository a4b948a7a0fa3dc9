"""The richer cron fields of docs/schedules.md ("Richer cron fields"): the day forms (`L`,
`L-n`, `nW`, `LW` in day-of-month; `nL`, `n#k` in day-of-week), `H` in any field, and
the words for them: what each form is in a given month, the hashed values of a job, the
messages for forms written wrong and the R2 "OR" warning of `crond validate`.

`cronparse` calls this for the items it does not read itself; `cronexpr` asks
`month_days` which days of a month the day forms pick.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

__all__ = [
    "DayForm",
    "FormError",
    "Hashed",
    "day_form",
    "hash_value",
    "hashed",
    "misfit",
    "month_days",
    "or_warning",
]

# (kind, a, b): "L" a = n of L-n (0 for L); "LW"; "W" a = the day; "dL" a = the weekday
# (0 = Sunday) of nL; "#" a = the weekday, b = k of n#k.
DayForm = tuple[str, int, int]
DOM_KINDS = frozenset({"L", "LW", "W"})

_DOM_FORM = re.compile(r"l(?:-(\d+))?|lw|(\d+)w", re.IGNORECASE)
_DOW_FORM = re.compile(r"([a-z]+|\d+)(?:l|#(\d+))", re.IGNORECASE)
_H_FORM = re.compile(r"h(?:\(([^-)]*)-([^)]*)\))?(?:/(.*))?", re.IGNORECASE)
_SATURDAY, _SUNDAY = 6, 0
_WEEKDAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


class FormError(ValueError):
    """A form written wrong: `value` is the bad text, the message says what would be right."""

    def __init__(self, value: str, message: str) -> None:
        super().__init__(message)
        self.value = value


# --- what a form is in a month -----------------------------------------------------------


def month_days(
    forms: frozenset[DayForm], length: int, first: int
) -> tuple[frozenset[int], frozenset[int]]:
    """(the days the day-of-month forms pick, the days the day-of-week forms pick) of a
    month of `length` days whose 1st is weekday `first` (0 = Sunday)."""
    dom: set[int] = set()
    dow: set[int] = set()
    for kind, a, b in forms:
        if kind == "L":  # L-a: a days before the last; none if that is before the 1st
            if length - a >= 1:
                dom.add(length - a)
        elif kind == "LW":
            dom.add(_weekday_near(length, length, first))
        elif kind == "W":  # a month without day a has no aW (as it has no day a)
            if a <= length:
                dom.add(_weekday_near(a, length, first))
        elif kind == "dL":  # the last weekday a: the last day, back to weekday a
            dow.add(length - ((first + length - 1) % 7 - a) % 7)
        else:  # "#": the b-th weekday a, if the month has that many
            day = 1 + (a - first) % 7 + 7 * (b - 1)
            if day <= length:
                dow.add(day)
    return frozenset(dom), frozenset(dow)


def _weekday_near(day: int, length: int, first: int) -> int:
    """The weekday (Mon-Fri) nearest `day`, never leaving the month."""
    weekday = (first + day - 1) % 7
    if weekday == _SATURDAY:
        return day + 2 if day == 1 else day - 1  # 1W on a Saturday: Monday the 3rd
    if weekday == _SUNDAY:
        return day - 2 if day == length else day + 1  # the last on a Sunday: Friday
    return day


# --- parsing the day forms ---------------------------------------------------------------


def day_form(index: int, item: str, weekday_of: Callable[[str], int]) -> DayForm | None:
    """The day form `item` of field `index` (2 day-of-month, 4 day-of-week), None when it
    is not one; FormError when it is one written wrong."""
    if index == 2:
        found = _DOM_FORM.fullmatch(item)
        return None if found is None else _dom_form(item, *found.groups())
    found = _DOW_FORM.fullmatch(item)
    if index != 4 or found is None:
        return None
    weekday = weekday_of(found.group(1)) % 7
    if item.lower().endswith("l"):
        return ("dL", weekday, 0)
    k = int(found.group(2))
    if not 1 <= k <= 5:
        raise FormError(
            item,
            f'"{item}": a month has at most 5 of a weekday (#1 to #5); for the last one '
            f"write {found.group(1)}L",
        )
    return ("#", weekday, k)


def _dom_form(item: str, back: str | None, day: str | None) -> DayForm:
    if item.lower() == "lw":
        return ("LW", 0, 0)
    if day is not None:
        if not 1 <= int(day) <= 31:
            raise FormError(
                item, f'"{item}": W takes a day 1-31 (15W: the weekday nearest the 15th)'
            )
        return ("W", int(day), 0)
    n = 0 if back is None else int(back)
    if back is not None and not 1 <= n <= 30:
        raise FormError(
            item,
            f'"{item}": L-n counts 1 to 30 days back from the month\'s last day '
            "(L-3: three days before it; L alone: the last day)",
        )
    return ("L", n, 0)


# --- H -----------------------------------------------------------------------------------


def hash_value(seed: str, index: int) -> int:
    """A number from the job's name and the field's position: the first 8 bytes of
    SHA-256, never Python's hash(), so that it is the same on every host and Python."""
    digest = hashlib.sha256(f"{seed}\0{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Hashed:
    """An `H` item resolved for one job: its values, as written resolved (`17`,
    `7-59/15`), and the smallest value any job could be given at most (for the
    never-fires check, which must not depend on the name)."""

    __slots__ = ("text", "values", "worst")

    def __init__(self, values: range, text: str, worst: int) -> None:
        self.values, self.text, self.worst = values, text, worst


def hashed(
    index: int,
    item: str,
    seed: str,
    bounds: tuple[int, int],
    value_of: Callable[[str, bool], int],
) -> Hashed | None:
    """The `H` item `item` of field `index`, resolved for `seed`; None if not an H form.
    `bounds` is the field's range for a bare `H` (day-of-month: 1-28, in every month)."""
    found = _H_FORM.fullmatch(item)
    if found is None:
        return None
    low_text, high_text, step_text = found.groups()
    low, high = bounds
    if low_text is not None:
        low, high = value_of(low_text, False), value_of(high_text, True)
        if low > high:
            raise FormError(
                item,
                f'"{item}" is a backwards range; H picks upwards: write H({high_text}-{low_text})',
            )
    h = hash_value(seed, index)
    if step_text is None:
        value = low + h % (high - low + 1)
        return Hashed(range(value, value + 1), str(value), high)
    if not step_text.isdigit() or not 1 <= int(step_text) <= high - low:
        raise FormError(
            item,
            f'"{item}": the step must be a whole number from 1 to {high - low} '
            f"(H/15: every 15 from a start picked by the job's name)",
        )
    step = int(step_text)
    start = low + h % min(step, high - low + 1)
    worst = low + min(step, high - low + 1) - 1
    return Hashed(range(start, high + 1, step), f"{start}-{high}/{step}", worst)


# --- words -------------------------------------------------------------------------------


def misfit(index: int, item: str) -> str:
    """What is wrong with `item`, which field `index` could not read, when it looks like
    one of the forms above; else "" (the plain grammar's words are cronparse's)."""
    low = item.lower()
    if "?" in low:
        if index in (2, 4):
            return f'"{item}": ? stands alone, for the whole field (the same as *)'
        return f'"{item}": ? is only for the day fields; write *'
    return _form_misfit(index, item, low)


def _form_misfit(index: int, item: str, low: str) -> str:
    if low.startswith("h"):
        return f'"{item}" is not an H form (H, H(a-b), H/n or H(a-b)/n, e.g. H(0-29) or H/15)'
    if not _looks_like_a_form(index, low):
        return ""  # "x", and "lun" or "wh" in day-of-week: misspelt weekdays
    if index not in (2, 4):
        return (
            f'"{item}": L, W and # are only for the day fields (L: the month\'s last day, '
            "in day-of-month; friL: its last Friday, in day-of-week)"
        )
    if "-" in low.lstrip("l-") or "/" in low:
        return (
            f'"{item}": L, W and # forms take no range or step; list them instead '
            "(e.g. 1,L or mon#1,mon#3)"
        )
    return _dom_misfit(item, low) if index == 2 else _dow_misfit(item, low)


def _looks_like_a_form(index: int, low: str) -> bool:
    if index != 4:
        return any(mark in low for mark in ("l", "w", "#"))
    return "#" in low or any(part.endswith(("l", "w")) for part in re.split("[-/]", low))


def _dom_misfit(item: str, low: str) -> str:
    if "#" in low:
        return f'"{item}": # belongs in day-of-week (fri#3: the month\'s third Friday)'
    digits = "".join(c for c in low if c.isdigit())
    if low.startswith("w") and digits:
        return f'"{item}" is not a day-of-month form; did you mean {digits}W?'
    last = "L" if int(digits or 1) == 0 else f"L-{digits}"  # L-0 is L itself
    if low.startswith("l") and digits and "w" not in low:
        return f'"{item}" is not a day-of-month form; did you mean {last}?'
    if low.endswith("l") and digits:
        if int(digits) > 7:  # no weekday has that number: nL takes 0-7
            return f'"{item}" is not a day-of-month form; did you mean {last}?'
        return (
            f'"{item}" is not a day-of-month form; did you mean {last} (in day-of-month) '
            f"or {digits}L, the month's last {_WEEKDAY_NAMES[int(digits) % 7]} (in day-of-week)?"
        )
    return (
        f'"{item}" is not a day-of-month form (L, L-n, LW, nW: e.g. L-3 or 15W; '
        "LW is the month's last weekday)"
    )


def _dow_misfit(item: str, low: str) -> str:
    if "w" in low:
        return (
            f'"{item}": W belongs in day-of-month (15W: the weekday nearest the 15th); '
            "in day-of-week write the weekdays, e.g. mon-fri"
        )
    if low == "l":
        return (
            f'"{item}": L in day-of-week follows a weekday (friL: the month\'s last Friday); '
            "for the month's last day put L in day-of-month"
        )
    return (
        f'"{item}" is not a day-of-week form (nL or n#k: e.g. friL, the last Friday; '
        "fri#3, the third Friday)"
    )


def or_warning(dom_text: str, dow_text: str, forms: frozenset[DayForm]) -> str | None:
    """R2's "either" beside an L, W or # form: the job fires on more days than the form
    says. None when a day field is unrestricted or there is no such form."""
    if dom_text[0] in "*?" or dow_text[0] in "*?" or not forms:
        return None
    if any(kind in DOM_KINDS for kind, _, _ in forms):
        form, other, form_field, other_field = dom_text, dow_text, "day-of-month", "day-of-week"
    else:
        form, other, form_field, other_field = dow_text, dom_text, "day-of-week", "day-of-month"
    return (
        f'OR: this also fires on every day {other_field} "{other}" matches, not only on '
        f'{form_field} "{form}" (R2: with both day fields restricted, either one is '
        f'enough); write * in {other_field} for "{form}" alone'
    )
