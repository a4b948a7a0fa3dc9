"""An `ics:` calendar's file (docs/configuration.md, "Calendars"): read as the schedules
file is (as root, only a file root alone can change; at most 4 MiB), parsed by
`icalendar`, its recurring events expanded by `recurring-ical-events` over a bounded
span of years and to at most MAX_EVENTS events. All-day events become days, timed
events windows.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from crond import ownership
from crond.when.calendars import Listed, Window

__all__ = ["MAX_EVENTS", "IcsError", "read_ics"]

MAX_EVENTS = 10_000  # events of one file, recurrences expanded (~1 s at most)
YEARS_BACK, YEARS_AHEAD = 1, 11  # the span expanded around the load's year


class IcsError(Exception):
    """The file cannot be used; the message says why and what to do."""


def read_ics(path: Path, *, enforce: bool, today: date) -> tuple[Listed, list[Window], str]:
    """The file's all-day events as days, its timed events as windows, and the sha256 of
    its bytes (a reload re-times the jobs when it changes)."""
    import hashlib  # noqa: PLC0415

    try:
        raw = ownership.read_schedules_file(path, enforce=enforce)
    except ownership.FileRefused as exc:
        raise IcsError(exc.message) from None
    import icalendar  # noqa: PLC0415  (only for files that use ics)
    import recurring_ical_events  # noqa: PLC0415

    try:
        calendar = icalendar.Calendar.from_ical(raw)
    except (ValueError, IndexError, KeyError) as exc:
        raise IcsError(f"{path}: not an iCalendar file ({exc})") from None
    start = date(max(1, today.year - YEARS_BACK), 1, 1)
    end = date(min(9998, today.year + YEARS_AHEAD), 12, 31)
    days: dict[date, str] = {}
    windows: list[Window] = []
    try:
        for count, event in enumerate(_events(recurring_ical_events.of(calendar), start, end)):
            if count >= MAX_EVENTS:
                _too_many(path, start, end)
            first = event.get("DTSTART")
            if first is None:
                continue
            lo = first.dt
            last = event.get("DTEND")
            label = str(event.get("SUMMARY", ""))
            if isinstance(lo, datetime):
                hi = last.dt if last is not None else lo
                windows.append(Window(lo, hi, label))
                continue
            hi = last.dt if last is not None else lo + timedelta(days=1)
            day = lo
            while day < hi and day <= end:
                days.setdefault(day, label)
                day += timedelta(days=1)
    except IcsError:
        raise
    except Exception as exc:  # noqa: BLE001  (a library's error on a user's file, said)
        raise IcsError(f"{path}: cannot read its events ({type(exc).__name__}: {exc})") from None
    return Listed(days), windows, hashlib.sha256(raw).hexdigest()


def _events(query: Any, start: date, end: date) -> Iterator[Any]:
    """The events from start to end, in spans that grow while they hold few events: the
    library expands a whole span at once, so an endless minutely rule is stopped by
    MAX_EVENTS after a few days' worth, not after 12 years' (an `after` query sorts
    them all first)."""
    span = timedelta(days=1)
    lo = start
    while lo <= end:
        hi = min(lo + span, end + timedelta(days=1))
        found = query.between(lo, hi)
        yield from found
        if len(found) < 100:
            span = min(span * 2, timedelta(days=7))
        lo = hi


def _too_many(path: Path, start: date, end: date) -> None:
    raise IcsError(
        f"{path}: more than {MAX_EVENTS:,} events from {start} to {end}, recurrences "
        "counted (split the file, or end its repeating events)"
    )
