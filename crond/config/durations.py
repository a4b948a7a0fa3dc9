"""Durations as users write them: an integer of seconds, or unit parts like `1h30m`."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d)")
_WHOLE = re.compile(r"(?:\d+(?:ms|s|m|h|d))+")
# Common spellings people try, mapped to crond's unit, for the "try 15m" hint.
_ALIASES = {
    "msec": "ms", "msecs": "ms", "millisecond": "ms", "milliseconds": "ms",
    "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "m", "mins": "m", "minute": "m", "minutes": "m",
    "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "day": "d", "days": "d",
}  # fmt: skip

MAX = timedelta(days=3650)


class DurationError(ValueError):
    """str(e) is the user-facing message, naming the bad value and a fix."""


def parse_duration(value: object) -> timedelta:
    """`500ms`, `90s`, `5m`, `1h30m`, `2d`, or a whole number of seconds."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise DurationError(
            f"{_show(value)} is not a duration (use whole seconds or units like 90s, 5m, 1h30m)"
        )
    if isinstance(value, int):
        if value < 0:
            raise DurationError(f"{value} is negative; a duration is 0 or more")
        return _bounded(timedelta(seconds=value), value)
    text = value.strip().lower()
    if text.isdigit():
        return _bounded(timedelta(seconds=int(text)), value)
    if not _WHOLE.fullmatch(text):
        raise DurationError(f'"{value}" is not a duration{_hint(text)}')
    millis = sum(int(n) * _UNITS_MS[unit] for n, unit in _PART.findall(text))
    return _bounded(timedelta(milliseconds=millis), value)


def format_duration(delta: timedelta) -> str:
    """The shortest unit string that parses back to `delta` (at millisecond resolution)."""
    millis = round(delta.total_seconds() * 1000)
    if millis == 0:
        return "0s"
    parts = []
    for unit in ("d", "h", "m", "s", "ms"):
        size = _UNITS_MS[unit]
        count, millis = divmod(millis, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _bounded(delta: timedelta, raw: object) -> timedelta:
    if delta > MAX:
        raise DurationError(f"{_show(raw)} is longer than the maximum of 3650d")
    return delta


def _show(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _hint(text: str) -> str:
    """Turn `15 mins` or `1.5h` into a concrete suggestion."""
    words = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text)
    if not words or "".join(f"{n}{u}" for n, u in words) != re.sub(r"[\s,]|and", "", text):
        return " (use whole seconds or units like 90s, 5m, 1h30m, 2d)"
    out = []
    for number, written in words:
        unit = _ALIASES.get(written, written) or "s"
        if unit not in _UNITS_MS:
            return f' (unknown unit "{unit}"; units are ms, s, m, h, d)'
        if "." in number:
            millis = round(float(number) * _UNITS_MS[unit])
            return f" (try {format_duration(timedelta(milliseconds=millis))})"
        out.append(f"{number}{unit}")
    return f" (try {''.join(out)})"
