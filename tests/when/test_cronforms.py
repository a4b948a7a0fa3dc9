"""The richer cron fields (docs/schedules.md, "Richer cron fields"): what each form parses
to, H's values (stable, spread, bounded), the messages for forms written wrong, and the
R2 "OR" warning. Which days the forms pick is test_cron_fields_oracle.py's."""

from __future__ import annotations

import collections
import itertools
from datetime import UTC, datetime
from pathlib import Path

import pytest

from crond.when.cronforms import hash_value, or_warning
from crond.when.cronparse import CronError, parse_cron
from crond.when.timing import CronTiming


def _next(text: str, seed: str = "", n: int = 3) -> list[str]:
    fires = CronTiming(parse_cron(text, seed), UTC).fires(datetime(2026, 1, 1, tzinfo=UTC))
    return [f"{next(fires).at:%a %m-%d %H:%M}" for _ in range(n)]


# (expression, its first three fires after 2026-01-01T00:00Z, computed by hand)
FIRES = [
    ("0 9 L * *", ["Sat 01-31 09:00", "Sat 02-28 09:00", "Tue 03-31 09:00"]),
    ("0 9 L-3 * *", ["Wed 01-28 09:00", "Wed 02-25 09:00", "Sat 03-28 09:00"]),
    ("0 9 15W * *", ["Thu 01-15 09:00", "Mon 02-16 09:00", "Mon 03-16 09:00"]),
    ("0 9 1W 2,3,8 *", ["Mon 02-02 09:00", "Mon 03-02 09:00", "Mon 08-03 09:00"]),
    ("0 9 LW 1,5 *", ["Fri 01-30 09:00", "Fri 05-29 09:00", "Fri 01-29 09:00"]),
    ("0 9 31W * *", ["Fri 01-30 09:00", "Tue 03-31 09:00", "Fri 05-29 09:00"]),
    ("0 9 ? * friL", ["Fri 01-30 09:00", "Fri 02-27 09:00", "Fri 03-27 09:00"]),
    ("0 9 * * 5#3", ["Fri 01-16 09:00", "Fri 02-20 09:00", "Fri 03-20 09:00"]),
    ("0 9 ? 1-3 sun#5", ["Sun 03-29 09:00", "Sun 01-31 09:00", "Sun 01-30 09:00"]),
    ("0 9 1,L 1 *", ["Thu 01-01 09:00", "Sat 01-31 09:00", "Fri 01-01 09:00"]),
    ("0 9 * 1 mon#1,fri#3", ["Mon 01-05 09:00", "Fri 01-16 09:00", "Mon 01-04 09:00"]),
    ("0 9 L 1 mon", ["Mon 01-05 09:00", "Mon 01-12 09:00", "Mon 01-19 09:00"]),  # R2: or
    ("0 9 L * 7L", ["Sun 01-25 09:00", "Sat 01-31 09:00", "Sun 02-22 09:00"]),
]


@pytest.mark.parametrize(("text", "fires"), FIRES, ids=[t for t, _ in FIRES])
def test_forms_fire_on_the_days_they_say(text: str, fires: list[str]) -> None:
    assert _next(text) == fires


def test_question_mark_is_a_star_for_r2() -> None:
    assert parse_cron("0 9 ? * fri").day_and
    assert parse_cron("0 9 15 * ?").day_and
    assert parse_cron("0 9 ? * fri").days == parse_cron("0 9 * * fri").days
    assert not parse_cron("0 9 L * fri").day_and


# --- H --------------------------------------------------------------------------------


def test_h_values_are_pinned() -> None:
    """The hash is SHA-256 of the name and the field's position: these values are the
    same on every host and Python, and a change of hash changes them."""
    assert hash_value("nightly-backup", 0) == 0x4D88168934DD2355
    names = ["nightly-backup", "cleanup", "a"]
    resolved = {name: parse_cron("H H * * *", name).resolved for name in names}
    assert resolved == {
        "nightly-backup": "45 5 * * *",
        "cleanup": "3 16 * * *",
        "a": "51 0 * * *",
    }
    assert parse_cron("H/15 H(1-4) H * H", "report").resolved == "13-59/15 1 5 * 1"
    assert parse_cron("H 2 * * *", "nightly-backup").minutes == frozenset({45})


def test_h_does_not_depend_on_python_hash() -> None:
    """hash() of a str changes per process (PYTHONHASHSEED); ours does not."""
    import hashlib  # noqa: PLC0415

    digest = hashlib.sha256(b"cleanup\x000").digest()
    assert hash_value("cleanup", 0) == int.from_bytes(digest[:8], "big")


def test_h_spreads_jobs_over_the_day() -> None:
    """10,000 jobs at `H H * * *`: no hour, and no minute, holds more than twice its share."""
    exprs = [parse_cron("H H * * *", f"job-{i}") for i in range(10_000)]
    hours = collections.Counter(h for e in exprs for h in e.hours)
    minutes = collections.Counter(m for e in exprs for m in e.minutes)
    assert len(hours) == 24
    assert len(minutes) == 60
    assert max(hours.values()) <= 2 * 10_000 / 24
    assert max(minutes.values()) <= 2 * 10_000 / 60


@pytest.mark.parametrize(
    ("text", "field", "allowed"),
    [
        ("0 H(1-4) * * *", "hours", set(range(1, 5))),
        ("H(0-29) 0 * * *", "minutes", set(range(30))),
        ("0 0 H * *", "days", set(range(1, 29))),  # every month has it
        ("0 0 H(29-31) * *", "days", {29, 30, 31}),
        ("0 0 * * H", "weekdays", set(range(7))),
        ("0 0 * * H(mon-fri)", "weekdays", set(range(1, 6))),
        ("0 0 * H * ", "months", set(range(1, 13))),
    ],
)
def test_h_stays_in_its_range(text: str, field: str, allowed: set[int]) -> None:
    seen: set[int] = set()
    for i in range(500):
        values = getattr(parse_cron(text, f"j{i}"), field)
        assert len(values) == 1
        seen |= values
    assert seen == allowed  # inside, and all of it used


def test_h_steps() -> None:
    for i in range(200):
        minutes = sorted(parse_cron("H/15 * * * *", f"j{i}").minutes)
        assert len(minutes) == 4
        assert minutes[0] < 15
        assert [b - a for a, b in itertools.pairwise(minutes)] == [15, 15, 15]
        hours = sorted(parse_cron("0 H(8-17)/3 * * *", f"j{i}").hours)
        assert 8 <= hours[0] < 11
        assert hours == list(range(hours[0], 18, 3))


def _picks(text: str, field: str, names: int = 300) -> set[int]:
    """Every value `field` takes for `text` over many job names."""
    return {v for i in range(names) for v in getattr(parse_cron(text, f"j{i}"), field)}


def test_h_step_bounds_range_ends_and_starts() -> None:
    """A step is a whole number from 1 to the range's width; a range may be one value;
    a weekday name is 0 at a range's start and 7 at its end (Sunday, as cron reads it);
    the start a step allows takes every value below the step; and the largest first day
    `H` may pick decides whether the day exists in the months asked for."""
    assert parse_cron("H/1 * * * *", "a").minutes == frozenset(range(60))
    assert len(parse_cron("H/59 * * * *", "a").minutes) in (1, 2)
    assert len(parse_cron("H(10-20)/10 * * * *", "a").minutes) in (1, 2)
    for bad, width in [("H/60", 59), ("H/0", 59), ("H(10-20)/11", 10), ("H(0-9)/10", 9)]:
        with pytest.raises(CronError, match=f"the step must be a whole number from 1 to {width} "):
            parse_cron(f"{bad} * * * *", "a")
    assert parse_cron("H(5-5) * * * *", "a").minutes == frozenset({5})
    assert _picks("0 0 * * H(sun-tue)", "weekdays") == {0, 1, 2}
    assert _picks("0 0 * * H(fri-sun)", "weekdays") == {5, 6, 0}
    assert {
        min(m) for i in range(300) if (m := parse_cron("H(0-10)/10 * * * *", f"j{i}").minutes)
    } == set(range(10))
    assert {
        min(m) for i in range(300) if (m := parse_cron("H(5-15)/10 * * * *", f"j{i}").minutes)
    } == set(range(5, 15))
    parse_cron("0 0 H(1-31)/29 2 *", "a")  # the first day is at most the 29th: leap years
    with pytest.raises(CronError, match="never occurs in feb for some job names"):
        parse_cron("0 0 H(1-31)/30 2 *", "a")  # some names would pick the 30th


def test_the_name_changes_only_h() -> None:
    assert parse_cron("0 9 L * *", "a") == parse_cron("0 9 L * *", "b")
    assert parse_cron("0 9 L * *", "a").resolved == ""
    assert parse_cron("H 9 * * *", "a").source == "H 9 * * *"


# --- messages ---------------------------------------------------------------------------

ERRORS = [
    ("0 0 * * fri#6", "day-of-week", "fri#6",
     '"fri#6": a month has at most 5 of a weekday (#1 to #5); for the last one write friL'),
    ("0 0 * * 5#0", "day-of-week", "5#0",
     '"5#0": a month has at most 5 of a weekday (#1 to #5); for the last one write 5L'),
    ("0 0 32W * *", "day-of-month", "32W",
     '"32W": W takes a day 1-31 (15W: the weekday nearest the 15th)'),
    ("0 0 L-40 * *", "day-of-month", "L-40",
     "\"L-40\": L-n counts 1 to 30 days back from the month's last day "
     "(L-3: three days before it; L alone: the last day)"),
    ("0 0 L-31 * *", "day-of-month", "L-31",  # 30 back from a 31st is the 1st: no more
     "\"L-31\": L-n counts 1 to 30 days back from the month's last day "
     "(L-3: three days before it; L alone: the last day)"),
    ("H(50-10) * * * *", "minute", "H(50-10)",
     '"H(50-10)" is a backwards range; H picks upwards: write H(10-50)'),
    ("0 0 * * 5W", "day-of-week", "5W",
     '"5W": W belongs in day-of-month (15W: the weekday nearest the 15th); in day-of-week '
     "write the weekdays, e.g. mon-fri"),
    ("0 L * * *", "hour", "L",
     "\"L\": L, W and # are only for the day fields (L: the month's last day, in "
     "day-of-month; friL: its last Friday, in day-of-week)"),
    ("H(0-70) * * * *", "minute", "H(0-70)",
     '"70" is out of range 0-59 in "H(0-70)"; H(a-b) picks within the field (0-59)'),
    ("0 H(20-24) * * *", "hour", "H(20-24)",
     '"24" is out of range 0-23 in "H(20-24)"; H(a-b) picks within the field (0-23)'),
    ("H/0 * * * *", "minute", "H/0",
     "\"H/0\": the step must be a whole number from 1 to 59 (H/15: every 15 from a start "
     "picked by the job's name)"),
    ("Hx * * * *", "minute", "Hx",
     '"Hx" is not an H form (H, H(a-b), H/n or H(a-b)/n, e.g. H(0-29) or H/15)'),
    ("0 0 W15 * *", "day-of-month", "W15",
     '"W15" is not a day-of-month form; did you mean 15W?'),
    ("0 0 L3 * *", "day-of-month", "L3", '"L3" is not a day-of-month form; did you mean L-3?'),
    ("0 0 5L * *", "day-of-month", "5L",
     '"5L" is not a day-of-month form; did you mean L-5 (in day-of-month) or 5L, the '
     "month's last Friday (in day-of-week)?"),
    ("0 0 7L * *", "day-of-month", "7L",
     '"7L" is not a day-of-month form; did you mean L-7 (in day-of-month) or 7L, the '
     "month's last Sunday (in day-of-week)?"),
    ("0 0 0L * *", "day-of-month", "0L",  # L-0 is L itself: say L
     '"0L" is not a day-of-month form; did you mean L (in day-of-month) or 0L, the '
     "month's last Sunday (in day-of-week)?"),
    ("0 0 L0 * *", "day-of-month", "L0", '"L0" is not a day-of-month form; did you mean L?'),
    ("0 0 * * x#1", "day-of-week", "x#1",  # no H here: no word of H
     '"x" is not a weekday (mon..sun, 0-7) in "x#1"'),
    ("0 0 8L * *", "day-of-month", "8L",  # no weekday 8: no nL to suggest
     '"8L" is not a day-of-month form; did you mean L-8?'),
    ("0 0 LW5 * *", "day-of-month", "LW5",
     '"LW5" is not a day-of-month form (L, L-n, LW, nW: e.g. L-3 or 15W; LW is the '
     "month's last weekday)"),
    ("0 0 5W5 * *", "day-of-month", "5W5",
     '"5W5" is not a day-of-month form (L, L-n, LW, nW: e.g. L-3 or 15W; LW is the '
     "month's last weekday)"),
    ("0 0 L-x * *", "day-of-month", "L-x",  # L- is not a range
     '"L-x" is not a day-of-month form (L, L-n, LW, nW: e.g. L-3 or 15W; LW is the '
     "month's last weekday)"),
    ("0 0 * * x#", "day-of-week", "x#",
     '"x#" is not a day-of-week form (nL or n#k: e.g. friL, the last Friday; fri#3, the '
     "third Friday)"),
    ("0 0 * * fril-sat", "day-of-week", "fril-sat",
     '"fril-sat": L, W and # forms take no range or step; list them instead '
     "(e.g. 1,L or mon#1,mon#3)"),
    ("0 0 * * fri#2-3", "day-of-week", "fri#2-3",
     '"fri#2-3": L, W and # forms take no range or step; list them instead '
     "(e.g. 1,L or mon#1,mon#3)"),
    ("0 0 L/2 * *", "day-of-month", "L/2",
     '"L/2": L, W and # forms take no range or step; list them instead '
     "(e.g. 1,L or mon#1,mon#3)"),
    ("0 0 * * L", "day-of-week", "L",
     "\"L\": L in day-of-week follows a weekday (friL: the month's last Friday); for the "
     "month's last day put L in day-of-month"),
    ("0 0 3#1 * *", "day-of-month", "3#1",
     "\"3#1\": # belongs in day-of-week (fri#3: the month's third Friday)"),
    ("? * * * *", "minute", "?", '"?": ? is only for the day fields; write *'),
    ("0 0 1,? * *", "day-of-month", "?",
     '"?": ? stands alone, for the whole field (the same as *)'),
    ("0 0 * * 1,?", "day-of-week", "?",
     '"?": ? stands alone, for the whole field (the same as *)'),
    # never fires
    ("0 0 31W 2 *", "day-of-month", "31W",
     '"31W" never occurs in feb (at most 29 days); the job would never run'),
    ("30 0 L-30 2 *", "day-of-month", "L-30",
     '"L-30" never occurs in feb (at most 29 days); the job would never run'),
    ("0 0 31W 4,6 ?", "day-of-month", "31W",
     '"31W" never occurs in apr,jun (at most 30 days); the job would never run'),
    ("0 0 H(29-31) 2 *", "day-of-month", "H(29-31)",
     '"H(29-31)" never occurs in feb for some job names; the job would never run'),
]  # fmt: skip


@pytest.mark.parametrize(("text", "field", "value", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_wrong_forms_say_what_would_be_right(
    text: str, field: str, value: str, message: str
) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(text, "some-job")
    assert (str(caught.value), caught.value.field, caught.value.value) == (
        f"{field} field: {message}",
        field,
        value,
    )


@pytest.mark.parametrize(
    "text", ["0 0 L-28 2 *", "0 0 * 2 mon#5", "0 0 31W 2 mon", "0 0 29W 2 *", "0 0 H(1-29) 2 *"]
)
def test_rare_forms_are_accepted(text: str) -> None:
    """They fire in some years (leap years); R2's "or" keeps `31W` with a weekday."""
    assert parse_cron(text, "x").source == text


# --- the OR warning ---------------------------------------------------------------------


def test_or_warning_beside_a_form() -> None:
    expr = parse_cron("0 9 L * mon")
    assert or_warning("L", "mon", expr.day_forms) == (
        'OR: this also fires on every day day-of-week "mon" matches, not only on '
        'day-of-month "L" (R2: with both day fields restricted, either one is enough); '
        'write * in day-of-week for "L" alone'
    )
    expr = parse_cron("0 9 1-7 * fri#3")
    assert or_warning("1-7", "fri#3", expr.day_forms) == (
        'OR: this also fires on every day day-of-month "1-7" matches, not only on '
        'day-of-week "fri#3" (R2: with both day fields restricted, either one is enough); '
        'write * in day-of-month for "fri#3" alone'
    )


@pytest.mark.parametrize(
    ("dom", "dow"), [("L", "*"), ("?", "fri#3"), ("15", "mon"), ("*/2", "friL"), ("1W", "?")]
)
def test_no_or_warning(dom: str, dow: str) -> None:
    expr = parse_cron(f"0 9 {dom} * {dow}")
    assert or_warning(dom, dow, expr.day_forms) is None


# --- docs/schedules.md -------------------------------------------------------------------


def _docs_rows() -> list[tuple[str, str]]:
    text = (Path(__file__).parents[2] / "docs" / "schedules.md").read_text()
    table = text.split("Fires of each, in UTC, after 2026-01-01T00:00Z", 1)[1]
    table = table.split("\n\n", 2)[1]  # the table itself, after its caption
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    return [(expr.strip("| `"), fires.rstrip(" |").split(" (")[0]) for expr, fires in rows]


def _shown(text: str) -> str:
    fires = CronTiming(parse_cron(text), UTC).fires(datetime(2026, 1, 1, tzinfo=UTC))
    ats = [next(fires).at for _ in range(4)]
    return ", ".join(
        f"{at:%a %Y-%m-%d}" if i == 0 or at.year != ats[0].year else f"{at:%a %m-%d}"
        for i, at in enumerate(ats)
    )


def test_the_docs_table_is_what_crond_computes() -> None:
    rows = _docs_rows()
    assert len(rows) == 12
    assert [(expr, _shown(expr)) for expr, _ in rows] == rows


def test_h_is_a_value_not_a_star() -> None:
    """R3: `H H * * *` is fixed-time; R2: `H` restricts its day field."""
    assert not parse_cron("H H * * *", "x").wildcard
    assert parse_cron("H * * * *", "x").wildcard
    assert not parse_cron("0 0 H * mon", "x").day_and
