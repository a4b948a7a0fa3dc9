"""crond.when.cronparse and the CronExpr it makes: the cron grammar of docs/schedules.md,
its field facts (R2's day rule, R3's two kinds of job) and the parser's messages, as
tables."""

from __future__ import annotations

import dataclasses

import pytest

from crond.when.cronparse import CronError, parse_cron

FIVE = "expected 5 fields (minute hour day-of-month month day-of-week)"
MACROS = "(@hourly @daily @midnight @weekly @monthly @yearly @annually @reboot)"


MINUTES, HOURS = set(range(60)), set(range(24))
DAYS, MONTHS, WEEK = set(range(1, 32)), set(range(1, 13)), set(range(7))

# (expression, minutes, hours, days, months, weekdays, R2 "and", R3 wildcard)
PARSED = [
    ("30 2 * * *", {30}, {2}, DAYS, MONTHS, WEEK, True, False),
    ("*/15 9-17 * * mon-fri", {0, 15, 30, 45}, set(range(9, 18)), DAYS, MONTHS, {1, 2, 3, 4, 5},
     True, True),
    ("0 */2 * * *", {0}, set(range(0, 24, 2)), DAYS, MONTHS, WEEK, True, True),
    ("0 0-23/2 * * *", {0}, set(range(0, 24, 2)), DAYS, MONTHS, WEEK, True, False),
    ("* 0 * * *", MINUTES, {0}, DAYS, MONTHS, WEEK, True, True),
    ("5-5 1 1 1 1", {5}, {1}, {1}, {1}, {1}, False, False),
    ("59 23 31 12 6", {59}, {23}, {31}, {12}, {6}, False, False),
    ("10/20 0 1 JAN-Mar SUN", {10, 30, 50}, {0}, {1}, {1, 2, 3}, {0}, False, False),
    ("0 22/1 * * *", {0}, {22, 23}, DAYS, MONTHS, WEEK, True, False),
    ("0 0 * * 7", {0}, {0}, DAYS, MONTHS, {0}, True, False),
    ("0 0 * * 0-7", {0}, {0}, DAYS, MONTHS, WEEK, True, False),
    ("0 0 * * fri-sun", {0}, {0}, DAYS, MONTHS, {5, 6, 0}, True, False),
    ("0 0 * * Sat,SUN", {0}, {0}, DAYS, MONTHS, {6, 0}, True, False),
    ("0 0 * * 1/2", {0}, {0}, DAYS, MONTHS, {1, 3, 5, 0}, True, False),
    ("0 0 * * 6/1", {0}, {0}, DAYS, MONTHS, {6, 0}, True, False),
    ("0 0 * jan,DEC *", {0}, {0}, DAYS, {1, 12}, WEEK, True, False),
    ("0 0 * feb-jun/2 *", {0}, {0}, DAYS, {2, 4, 6}, WEEK, True, False),
    ("0 0 1-10/3,20 */5 *", {0}, {0}, {1, 4, 7, 10, 20}, {1, 6, 11}, WEEK, True, False),
    ("0 12 1,15 * fri", {0}, {12}, {1, 15}, MONTHS, {5}, False, False),
    ("0 12 */2 * fri", {0}, {12}, set(range(1, 32, 2)), MONTHS, {5}, True, False),
    ("0 12 1 * */2", {0}, {12}, {1}, MONTHS, {0, 2, 4, 6}, True, False),
    # the largest step of each field
    ("*/59 * * * *", {0, 59}, HOURS, DAYS, MONTHS, WEEK, True, True),
    ("0 */23 * * *", {0}, {0, 23}, DAYS, MONTHS, WEEK, True, True),
    ("0 0 */30 * *", {0}, {0}, {1, 31}, MONTHS, WEEK, True, False),
    ("0 0 1 */11 *", {0}, {0}, {1}, {1, 12}, WEEK, True, False),
    ("0 0 * * */7", {0}, {0}, DAYS, MONTHS, {0}, True, False),
    # macros
    ("@hourly", {0}, HOURS, DAYS, MONTHS, WEEK, True, True),
    ("@daily", {0}, {0}, DAYS, MONTHS, WEEK, True, False),
    ("@midnight", {0}, {0}, DAYS, MONTHS, WEEK, True, False),
    ("@weekly", {0}, {0}, DAYS, MONTHS, {0}, True, False),
    ("@monthly", {0}, {0}, {1}, MONTHS, WEEK, True, False),
    ("@yearly", {0}, {0}, {1}, {1}, WEEK, True, False),
    ("@ANNUALLY", {0}, {0}, {1}, {1}, WEEK, True, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "minutes", "hours", "days", "months", "weekdays", "day_and", "wildcard"),
    PARSED,
    ids=[c[0] for c in PARSED],
)
def test_parse(
    text: str,
    minutes: set[int],
    hours: set[int],
    days: set[int],
    months: set[int],
    weekdays: set[int],
    day_and: bool,
    wildcard: bool,
) -> None:
    expr = parse_cron(text)
    fields = (expr.minutes, expr.hours, expr.days, expr.months, expr.weekdays)
    assert tuple(set(f) for f in fields) == (minutes, hours, days, months, weekdays)
    assert (expr.day_and, expr.wildcard, expr.reboot) == (day_and, wildcard, False)
    assert expr.times == tuple(sorted(h * 3600 + m * 60 for h in hours for m in minutes))
    assert expr.month_list == tuple(sorted(months))


SOURCES = [
    (" 30  2 * *\t* ", "30 2 * * *"),
    ("@daily", "@daily"),
    ("@DAILY", "@daily"),
    (" @Midnight ", "@midnight"),
    ("@reboot", "@reboot"),
    ("@ReBoot", "@reboot"),
]


@pytest.mark.parametrize(("text", "source"), SOURCES)
def test_an_expression_shows_as_written_or_as_its_macro(text: str, source: str) -> None:
    expr = parse_cron(text)
    assert expr.source == str(expr) == source


def test_a_macro_is_its_expression_under_its_own_name() -> None:
    daily, plain = parse_cron("@daily"), parse_cron("0 0 * * *")
    assert daily != plain  # the source is part of an expression's value
    assert dataclasses.replace(daily, source=plain.source) == plain


def test_reboot_has_no_wall_time() -> None:
    expr = parse_cron("@reboot")
    empty: frozenset[int] = frozenset()
    assert (expr.minutes, expr.hours, expr.days, expr.months, expr.weekdays) == (empty,) * 5
    assert (expr.reboot, expr.day_and, expr.wildcard, expr.times) == (True, False, False, ())


def test_expression_derived_fields_and_value_semantics() -> None:
    expr = parse_cron("*/20 13,2,7 * 11,2 *")
    times = sorted(h * 3600 + m * 60 for h in expr.hours for m in expr.minutes)
    assert (expr.times, expr.month_list) == (tuple(times), (2, 11))
    again = parse_cron(" */20  13,2,7 * 11,2 * ")
    assert again == expr
    assert hash(again) == hash(expr)
    assert dataclasses.replace(expr, source="other") != expr
    assert hash(dataclasses.replace(expr, source="other")) != hash(expr)
    assert dataclasses.replace(expr, source="other").times == expr.times
    with pytest.raises(dataclasses.FrozenInstanceError):
        expr.source = "other"  # type: ignore[misc]


PARSE_ERRORS = [
    ("61 * * * *", "minute", "61", 'minute field: "61" is out of range 0-59'),
    ("0 24 * * *", "hour", "24", 'hour field: "24" is out of range 0-23'),
    ("0 0 0 * *", "day-of-month", "0", 'day-of-month field: "0" is out of range 1-31'),
    ("0 0 * 13 *", "month", "13", 'month field: "13" is out of range 1-12'),
    ("0 0 * * 8", "day-of-week", "8", 'day-of-week field: "8" is out of range 0-7'),
    (
        "0 0 * * fry",
        "day-of-week",
        "fry",
        'day-of-week field: "fry" is not a weekday (mon..sun, 0-7)',
    ),
    ("0 0 * janu *", "month", "janu", 'month field: "janu" is not a month (jan..dec, 1-12)'),
    ("x 0 * * *", "minute", "x", 'minute field: "x" is not a number (0-59)'),
    (
        "0 22-2 * * *",
        "hour",
        "22-2",
        'hour field: "22-2" is a backwards range; write it as two ranges (22-23,0-2)',
    ),
    (
        "0 0 * * sat-tue",
        "day-of-week",
        "sat-tue",
        'day-of-week field: "sat-tue" is a backwards range; '
        "write it as two ranges (sat-sun,sun-tue)",
    ),
    ("*/0 * * * *", "minute", "*/0", 'minute field: step 0 in "*/0" must be between 1 and 59'),
    (
        "*/90 * * * *",
        "minute",
        "*/90",
        'minute field: step 90 in "*/90" must be between 1 and 59; '
        "for a fixed interval use `every: 90m`",
    ),
    ("0 */x * * *", "hour", "*/x", 'hour field: step "x" in "*/x" is not a whole number'),
    ("1,,2 * * * *", "minute", "1,,2", 'minute field: "1,,2" has an empty list item'),
    (
        "0 0 30 feb *",
        "day-of-month",
        "30",
        'day-of-month field: "30" never occurs in feb; the job would never run',
    ),
    (
        "0 0 31 4,6 *",
        "day-of-month",
        "31",
        'day-of-month field: "31" never occurs in apr,jun; the job would never run',
    ),
    ("0 0 0 * * *", None, "0 0 0 * * *", f"{FIVE}, got 6; seconds are not supported"),
    (
        "0 0 0 * * * 2030",
        None,
        "0 0 0 * * * 2030",
        f"{FIVE}, got 7; seconds and years are not supported",
    ),
    ("0 0 *", None, "0 0 *", f"{FIVE}, got 3"),
    ("", None, "", f"empty cron expression: {FIVE}, got 0"),
    ("@weekdays", None, "@weekdays", f'"@weekdays" is not a known macro {MACROS}'),
    # each field's bounds, and one past them
    ("60 * * * *", "minute", "60", 'minute field: "60" is out of range 0-59'),
    ("0 0 32 * *", "day-of-month", "32", 'day-of-month field: "32" is out of range 1-31'),
    ("0 0 * 0 *", "month", "0", 'month field: "0" is out of range 1-12'),
    ("0 0 1-32 * *", "day-of-month", "32", 'day-of-month field: "32" is out of range 1-31'),
    # steps: from 1 to the field's span (docs/schedules.md, R2)
    ("*/60 * * * *", "minute", "*/60",
     'minute field: step 60 in "*/60" must be between 1 and 59; '
     "for a fixed interval use `every: 60m`"),
    ("0 */24 * * *", "hour", "*/24",
     'hour field: step 24 in "*/24" must be between 1 and 23; '
     "for a fixed interval use `every: 24h`"),
    ("0 */0 * * *", "hour", "*/0", 'hour field: step 0 in "*/0" must be between 1 and 23'),
    ("0 0 */31 * *", "day-of-month", "*/31",
     'day-of-month field: step 31 in "*/31" must be between 1 and 30'),
    ("0 0 * */12 *", "month", "*/12", 'month field: step 12 in "*/12" must be between 1 and 11'),
    ("0 0 * * */8", "day-of-week", "*/8",
     'day-of-week field: step 8 in "*/8" must be between 1 and 7'),
    ("0 0 1-5/0 * *", "day-of-month", "1-5/0",
     'day-of-month field: step 0 in "1-5/0" must be between 1 and 30'),
    ("0 0 * * mon/x", "day-of-week", "mon/x",
     'day-of-week field: step "x" in "mon/x" is not a whole number'),
    ("*/ * * * *", "minute", "*/", 'minute field: step "" in "*/" is not a whole number'),
    # ranges
    ("30-10 * * * *", "minute", "30-10",
     'minute field: "30-10" is a backwards range; write it as two ranges (30-59,0-10)'),
    ("0 0 * * 5-3", "day-of-week", "5-3",
     'day-of-week field: "5-3" is a backwards range; write it as two ranges (5-7,0-3)'),
    ("0 0 * nov-feb *", "month", "nov-feb",
     'month field: "nov-feb" is a backwards range; write it as two ranges (nov-dec,jan-feb)'),
    ("0 0 20-10 * *", "day-of-month", "20-10",
     'day-of-month field: "20-10" is a backwards range; write it as two ranges (20-31,1-10)'),
    ("0 0 1-x * *", "day-of-month", "x", 'day-of-month field: "x" is not a number (1-31)'),
    ("0 0 * * 1-", "day-of-week", "1-", 'day-of-week field: "1-" is not a weekday (mon..sun, 0-7)'),
    ("-1 * * * *", "minute", "-1", 'minute field: "-1" is not a number (0-59)'),
    ("0 0 * 1,x *", "month", "x", 'month field: "x" is not a month (jan..dec, 1-12)'),
    # names
    ("0 0 * * lun", "day-of-week", "lun",
     'day-of-week field: "lun" is not a weekday (mon..sun, 0-7)'),
    ("0 0 * * 1,wh", "day-of-week", "wh",
     'day-of-week field: "wh" is not a weekday (mon..sun, 0-7)'),
    # a date that never comes (R2 "and")
    ("0 0 30,31 feb *", "day-of-month", "30,31",
     'day-of-month field: "30,31" never occurs in feb; the job would never run'),
    ("0 0 31 4,6,9,11 *", "day-of-month", "31",
     'day-of-month field: "31" never occurs in apr,jun,sep,nov; the job would never run'),
    ("0 0 30 feb */2", "day-of-month", "30",
     'day-of-month field: "30" never occurs in feb; the job would never run'),
    # counts and macros
    ("*", None, "*", f"{FIVE}, got 1"),
    ("0 0 * *", None, "0 0 * *", f"{FIVE}, got 4"),
    ("0 0 0 * * * 2030 x", None, "0 0 0 * * * 2030 x", f"{FIVE}, got 8"),
    ("  ", None, "  ", f"empty cron expression: {FIVE}, got 0"),
    ("@", None, "@", f'"@" is not a known macro {MACROS}'),
    (" @every 5m", None, " @every 5m", f'"@every 5m" is not a known macro {MACROS}'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "field", "value", "message"), PARSE_ERRORS, ids=[c[0] or "empty" for c in PARSE_ERRORS]
)
def test_parse_errors(text: str, field: str | None, value: str, message: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(text)
    assert (str(caught.value), caught.value.field, caught.value.value) == (message, field, value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "text", ["0 0 29 2 *", "0 0 29-31 feb *", "0 0 31 2 mon", "0 0 31 */2 *", "0 0 */30 2 *"]
)
def test_a_date_some_year_has_is_accepted(text: str) -> None:
    """29 February fires in leap years; with R2's "either" the 31st of February stands
    for the Mondays of February; `*/30` is the 1st too."""
    assert parse_cron(text).source == text
