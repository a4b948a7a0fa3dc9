"""crond/when/words.py: a cron expression in words. Tables of what a person reads for each
form crond accepts, and properties over random expressions: words never fail, and when
they list the times of day, those are the times the expression matches (brute force over
its minutes and hours), and when they list weekdays, those are its weekdays."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crond.when.cronparse import parse_cron
from crond.when.words import cron_words, duration_words, ordinal
from tests.when.test_cron_fields_oracle import DAY_PARTS
from tests.when.test_timing_oracle import expressions

WORDS = [
    ("0 2 * * 1-5", "at 02:00, Monday to Friday"),
    ("0 2 * * *", "at 02:00, every day"),
    ("*/15 * * * *", "every 15 minutes"),
    ("* * * * *", "every minute"),
    ("*/7 * * * *", "every 7 minutes from minute 0 of each hour"),
    ("5/10 * * * *", "every 10 minutes from minute 5 of each hour"),
    ("5 * * * *", "at minute 5 of every hour"),
    ("5,35 * * * *", "at minutes 5 and 35 of every hour"),
    ("* 3 * * *", "every minute of hour 03, every day"),
    ("0 */2 * * *", "at minute 0 of every 2 hours, every day"),
    ("0 1/6 * * *", "at 01:00, 07:00, 13:00 and 19:00, every day"),
    ("0,30 9-17 * * mon-fri", "at minutes 0 and 30 of hours 09 to 17, Monday to Friday"),
    ("0-10 0-3,5 * * *", "at minutes 0 to 10 of hours 00 to 03 and 05, every day"),
    ("30 8,20 * * sat,sun", "at 08:30 and 20:30, Saturday and Sunday"),
    ("0 0 * * 0-2,6", "at 00:00, Monday, Tuesday, Saturday and Sunday"),
    ("0 0 * * 7", "at 00:00, Sunday"),
    ("30 8 1-7 * *", "at 08:30, on the 1st to the 7th"),
    ("0 0 1,15 * *", "at 00:00, on the 1st and the 15th"),
    ("0 0 */2 * *", "at 00:00, every 2 days of the month from the 1st"),
    ("0 9 * jan-mar,dec *", "at 09:00, every day, in January to March and December"),
    ("0 0 1 * 1", "at 00:00, on the 1st, or Monday"),  # R2: either field
    ("0 0 */2 * 1", "at 00:00, every 2 days of the month from the 1st, if it is Monday"),
    ("0 0 L * *", "at 00:00, on the last day of the month"),
    ("0 0 L-3 * *", "at 00:00, 3 days before the last day of the month"),
    ("0 0 L-1 * *", "at 00:00, 1 day before the last day of the month"),
    ("0 0 15W * *", "at 00:00, on the weekday nearest the 15th"),
    ("0 0 LW 2 *", "at 00:00, on the last weekday of the month, in February"),
    ("0 0 L,15 * *", "at 00:00, on the 15th or on the last day of the month"),
    ("0 0 * * 5L", "at 00:00, on the last Friday of the month"),
    ("0 0 ? * fri#3", "at 00:00, on the third Friday of the month"),
    ("0 0 ? * mon#1,fri#3", "at 00:00, on the first Monday of the month or on the third "
     "Friday of the month"),
    ("0 0 */2 * friL", "at 00:00, every 2 days of the month from the 1st, if it is the last "
     "Friday of the month"),
    ("0 0 L * mon", "at 00:00, on the last day of the month, or Monday"),
    ("@daily", "at 00:00, every day"),
    ("@midnight", "at 00:00, every day"),
    ("@hourly", "at minute 0 of every hour"),
    ("@weekly", "at 00:00, Sunday"),
    ("@monthly", "at 00:00, on the 1st"),
    ("@yearly", "at 00:00, on the 1st, in January"),
    ("@reboot", "once when the daemon starts (each boot)"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "said"), WORDS)
def test_words_of_each_form(text: str, said: str) -> None:
    assert cron_words(parse_cron(text)) == said


def test_h_is_said_with_its_resolved_value() -> None:
    expr = parse_cron("H H(1-4) * * *", "backup")
    hour, minute = min(expr.hours), min(expr.minutes)
    assert cron_words(expr) == f"at {hour:02d}:{minute:02d}, every day (H: {expr.resolved})"
    assert expr.resolved == f"{minute} {hour} * * *"


@pytest.mark.parametrize(
    ("every", "said"),
    [
        (timedelta(minutes=15), "every 15 minutes"),
        (timedelta(hours=1), "every hour"),
        (timedelta(days=1), "every day"),
        (timedelta(hours=1, minutes=30), "every 1 hour 30 minutes"),
        (timedelta(seconds=90), "every 1 minute 30 seconds"),
        (timedelta(days=2, seconds=5), "every 2 days 5 seconds"),
    ],
)
def test_intervals(every: timedelta, said: str) -> None:
    assert duration_words(every) == said


def test_ordinals() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st",
    ]  # fmt: skip


_TIMES = re.compile(r"^at (\d\d:\d\d(?:, \d\d:\d\d)*(?: and \d\d:\d\d)?),")


def _check(text: str) -> None:
    expr = parse_cron(text, "job")
    said = cron_words(expr)
    assert said
    assert "None" not in said
    assert "  " not in said
    listed = _TIMES.match(said)
    if listed:  # the times listed are the times it matches, each once
        shown = re.findall(r"\d\d:\d\d", listed.group(1))
        assert shown == sorted(f"{h:02d}:{m:02d}" for h in expr.hours for m in expr.minutes)
    if not expr.day_forms and expr.days == frozenset(range(1, 32)):
        assert _weekdays_said(said) == set(expr.weekdays) or expr.weekdays == frozenset(range(7))


_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_SPAN = re.compile(r"(\w+day) to (\w+day)")


def _weekdays_said(said: str) -> set[int]:
    """The weekdays (0 = Sunday) the words name, "Monday to Friday" read as five."""
    found = set()
    for a, b in _SPAN.findall(said):
        found |= {(d + 1) % 7 for d in range(_NAMES.index(a), _NAMES.index(b) + 1)}
    rest = _SPAN.sub("", said)
    return found | {(d + 1) % 7 for d, name in enumerate(_NAMES) if name in rest}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions(), st.sampled_from(DAY_PARTS), st.booleans())
def test_every_expression_has_words(text: str, day_part: str, forms: bool) -> None:
    if forms:  # the day forms of the oracle's set, under random times of day
        text = " ".join(text.split()[:2]) + " " + day_part
    try:
        parse_cron(text, "job")
    except ValueError:
        return  # refused by the parser (e.g. "0 0 30 feb *"), tested elsewhere
    _check(text)
    _check("H H(0-5) " + " ".join(text.split()[2:]))  # H in the time fields
