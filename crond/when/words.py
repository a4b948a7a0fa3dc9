"""A schedule in words, for people reading a page: `0 2 * * 1-5` is "at 02:00, Monday to
Friday". Pure: made from what the parser made of the expression (the value sets of its
fields, its day forms, its `H` values resolved), so every expression crond accepts has
words, and the words say what the expression does, not how it was spelled.

The whole schedule of a job (a `cron` list, `every`, `at`, `start`/`end`, `after`,
calendars) is put together by the caller from these parts (crond/web/words.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta

from crond.when.cronexpr import CronExpr
from crond.when.cronforms import DOM_KINDS, DayForm

__all__ = ["cron_words", "duration_words", "ordinal"]

_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # fmt: skip
_NTH = ("", "first", "second", "third", "fourth", "fifth")
_TIMES_LISTED = 8  # more matching times of day than this: said as minutes and hours
_ALL_MINUTES, _ALL_HOURS = frozenset(range(60)), frozenset(range(24))
_ALL_DAYS, _ALL_MONTHS = frozenset(range(1, 32)), frozenset(range(1, 13))
_ALL_WEEKDAYS = frozenset(range(7))


def cron_words(expr: CronExpr) -> str:
    """The expression in words: "at 02:00, Monday to Friday"; `H` values as resolved for
    the job ("at 03:35, every day (H: 35 3 * * *)")."""
    if expr.reboot:
        return "once when the daemon starts (each boot)"
    days = _day_words(expr)
    said = _time_words(expr.minutes, expr.hours)
    if days != "every day" or expr.hours != _ALL_HOURS:  # "every 15 minutes" says it
        said += f", {days}"
    if expr.resolved:
        said += f" (H: {expr.resolved})"
    return said


def duration_words(every: timedelta) -> str:
    """An interval: "every 15 minutes", "every 1 hour 30 minutes", "every day"."""
    seconds = int(every.total_seconds())
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    if len(parts) == 1 and parts[0].startswith("1 "):
        return f"every {parts[0][2:]}"
    return "every " + (" ".join(parts) or "0 seconds")


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st."""
    tail = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{tail}"


# --- the time of day -----------------------------------------------------------------


def _time_words(minutes: frozenset[int], hours: frozenset[int]) -> str:
    if minutes == _ALL_MINUTES:
        return "every minute" if hours == _ALL_HOURS else f"every minute of {_hours(hours)}"
    if hours == _ALL_HOURS:
        return _hourly(minutes)
    if len(minutes) * len(hours) <= _TIMES_LISTED:
        times = sorted((h, m) for h in hours for m in minutes)
        return "at " + _listed(f"{h:02d}:{m:02d}" for h, m in times)
    said = "minute" if len(minutes) == 1 else "minutes"
    listed = _runs(sorted(minutes), str, " to ")
    return f"at {said} {listed} of {_hours(hours)}"


def _hourly(minutes: frozenset[int]) -> str:
    step = _step(minutes, 60)
    if step is not None:
        start, every = step
        if start or 60 % every:  # "*/7": 0, 7, .. 56, then 0 again
            return f"every {every} minutes from minute {start} of each hour"
        return f"every {every} minutes"
    if len(minutes) == 1:
        return f"at minute {min(minutes)} of every hour"
    return f"at minutes {_listed(str(m) for m in sorted(minutes))} of every hour"


def _hours(hours: frozenset[int]) -> str:
    step = _step(hours, 24)
    if step is not None:
        start, every = step
        return f"every {every} hours" + (f" from {start:02d}:00" if start else "")
    if len(hours) == 1:
        return f"hour {min(hours):02d}"
    return "hours " + _runs(sorted(hours), lambda h: f"{h:02d}", " to ")


# --- the days ------------------------------------------------------------------------


def _day_words(expr: CronExpr) -> str:
    dom_forms = sorted(f for f in expr.day_forms if f[0] in DOM_KINDS)
    dow_forms = sorted(f for f in expr.day_forms if f[0] not in DOM_KINDS)
    dom = None
    if dom_forms or expr.days != _ALL_DAYS:
        dom = _listed([*_month_days(expr.days), *(_form(f) for f in dom_forms)], "or")
    dow = None
    if dow_forms or expr.weekdays != _ALL_WEEKDAYS:
        dow = _listed([*_weekdays(expr.weekdays), *(_form(f) for f in dow_forms)], "or")
    if dom is None and dow is None:
        days = "every day"
    elif dom is None or dow is None:
        days = dom or dow or ""
    elif expr.day_and:  # R2: a field written with "*" or "?": a day must match both
        days = f"{dom}, if it is {dow.removeprefix('on ')}"
    else:  # R2: both fields restricted: either matches
        days = f"{dom}, or {dow}"
    if expr.months != _ALL_MONTHS:
        months = _runs(sorted(expr.months), lambda m: _MONTHS[m - 1], " to ")
        days += f", in {months}"
    return days


def _month_days(days: frozenset[int]) -> list[str]:
    if not days:
        return []
    step = _step(days, 32, first=1)
    if step is not None:
        start, every = step
        return [f"every {every} days of the month from the {ordinal(start)}"]
    said = _runs(sorted(days), lambda d: f"the {ordinal(d)}", " to ")
    return [f"on {said}"]


def _weekdays(weekdays: frozenset[int]) -> list[str]:
    if not weekdays:
        return []
    monday_first = sorted((d - 1) % 7 for d in weekdays)  # 0 = Monday .. 6 = Sunday
    return [_runs(monday_first, lambda d: _WEEKDAYS[(d + 1) % 7], " to ")]


def _form(form: DayForm) -> str:
    kind, a, b = form
    if kind == "L":
        if a:
            return f"{a} day{'s' if a != 1 else ''} before the last day of the month"
        return "on the last day of the month"
    if kind == "LW":
        return "on the last weekday of the month"
    if kind == "W":
        return f"on the weekday nearest the {ordinal(a)}"
    if kind == "dL":
        return f"on the last {_WEEKDAYS[a % 7]} of the month"
    nth = _NTH[b] if 0 < b < len(_NTH) else ordinal(b)
    return f"on the {nth} {_WEEKDAYS[a % 7]} of the month"


# --- lists ---------------------------------------------------------------------------


def _step(values: frozenset[int], size: int, *, first: int = 0) -> tuple[int, int] | None:
    """(start, step) when `values` is every step-th value from start to the field's end
    (`*/15`, `5/10`), with a step above 1 and at least three values; else None."""
    if len(values) < 3:
        return None
    ordered = sorted(values)
    start, every = ordered[0], ordered[1] - ordered[0]
    if every < 2 or start - first >= every:
        return None
    return (start, every) if ordered == list(range(start, size, every)) else None


def _runs(values: list[int], show: Callable[[int], str], joiner: str) -> str:
    """Sorted values as ranges of three or more and single values: "Monday to Friday",
    "the 1st to the 7th and the 15th"."""
    groups: list[list[int]] = []
    for v in values:
        if groups and v == groups[-1][-1] + 1:
            groups[-1].append(v)
        else:
            groups.append([v])
    said: list[str] = []
    for g in groups:
        if len(g) >= 3:
            said.append(f"{show(g[0])}{joiner}{show(g[-1])}")
        else:
            said.extend(show(v) for v in g)
    return _listed(said)


def _listed(items: Iterable[str], last: str = "and") -> str:
    found = list(items)
    if len(found) <= 1:
        return "".join(found)
    return f"{', '.join(found[:-1])} {last} {found[-1]}"
