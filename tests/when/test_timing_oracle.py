"""crond.when.timing against a brute-force oracle, and against croniter.

The oracle comparison is the gate for any change of timing.py, timeline.py or croniter: zero
differences over real transitions of many zones, with restarts every 10 minutes.

The oracle (first section) walks every UTC minute and applies R1-R7 of docs/schedules.md as written.
It is short and obviously right on purpose, and slow: it shares nothing with crond.when.timing
but the parsed field sets and the wording of the notes.

For each UTC minute u, let w(u) be the wall clock of the zone at u and d the jump between
consecutive minutes, d = w(u) - w(u - 1 min) - 1 min (zero on an ordinary minute).
  d > 0: the wall times strictly between w(u - 1 min) and w(u) were skipped.
    d < 3 h (R4): a fixed-time job that matches any of them fires at u.
    Otherwise, or for a wildcard job (R4, R6): nothing is made up.
  d < 0: the |d| wall times from w(u) on happen a second time in the next |d| minutes.
    d > -3 h (R5): a fixed-time job does not fire on that second pass.
    Otherwise, or for a wildcard job (R5, R6): both passes fire.
  Every other minute whose wall time matches fires (R1, R2). One fire per minute (R7).
"""

from __future__ import annotations

import bisect
import functools
import io
import struct
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crond.when.notes import describe_walls, note_made_up, note_not_made_up, note_pass
from crond.when.timeline import CHUNK, EPOCH  # CHUNK: the span of zone data probed at once
from crond.when.timing import CronExpr, CronTiming, parse_cron

# --- the oracle ----------------------------------------------------------------------

MINUTE = timedelta(minutes=1)
BIG = timedelta(hours=3)
NAIVE_EPOCH = datetime(1970, 1, 1)  # the notes' wall-time numbers are naive


@dataclass(frozen=True)
class OracleFire:
    at: datetime  # UTC, the rule's instant (no jitter)
    note: str | None


def matches(expr: CronExpr, w: datetime) -> bool:
    """R1/R2 by definition."""
    if w.minute not in expr.minutes or w.hour not in expr.hours or w.month not in expr.months:
        return False
    in_month = w.day in expr.days
    in_week = w.isoweekday() % 7 in expr.weekdays
    return (in_month and in_week) if expr.day_and else (in_month or in_week)


def _num(w: datetime) -> int:
    return int((w - NAIVE_EPOCH).total_seconds())


def _hm(w: datetime) -> str:
    return f"{w:%H:%M}"


class Walk:
    """Every UTC minute of [start - 1 day, end), its wall time, and the passes of each
    repeated wall time; computed once, then applied to many expressions."""

    def __init__(self, zone: tzinfo, start: datetime, end: datetime) -> None:
        self.start, self.end = start, end
        first = start.replace(second=0, microsecond=0) - timedelta(days=1)
        count = int((end - first) / MINUTE) + 1
        self.instants = [first + i * MINUTE for i in range(count)]
        self.walls = [u.astimezone(zone).replace(tzinfo=None) for u in self.instants]
        walls = self.walls
        self.dates = [w.date() for w in walls]
        jumps = [(k, walls[k] - walls[k - 1] - MINUTE) for k in range(1, count)]
        self.forward = {k: d for k, d in jumps if d > timedelta(0)}  # minute index -> jump
        self.first_pass: dict[int, bool] = {}  # minute index -> the jump is big (R6)
        self.second_pass: dict[int, bool] = {}
        for k, d in jumps:
            if d < timedelta(0):
                n = int(-d / MINUTE)
                for i in range(k - n, k):
                    self.first_pass[i] = -d >= BIG
                for i in range(k, k + n):
                    self.second_pass[i] = -d >= BIG

    def fires(self, expr: CronExpr) -> list[OracleFire]:
        """Every fire of expr whose instant is in [start, end)."""
        fixed = not expr.wildcard
        walls = self.walls
        hits = [matches(expr, w) for w in walls]
        fires: list[OracleFire] = []
        pending: tuple[list[datetime], bool, date] | None = None  # skipped, big, wall date
        for k in range(1, len(walls)):
            w, d = walls[k], self.forward.get(k)
            if pending is not None and pending[2] != self.dates[k]:
                pending = None
            made_up: str | None = None
            if d is not None:
                pending = None
                skipped = [walls[k - 1] + i * MINUTE for i in range(1, int(d / MINUTE) + 1)]
                skipped = [s for s in skipped if matches(expr, s)]
                text = describe_walls([_num(s) for s in skipped], _num(w) // 86400)
                if skipped and fixed and d < BIG:
                    merged = _hm(w) if hits[k] else None
                    made_up = note_made_up(text, many=len(skipped) > 1, merged=merged)
                elif skipped:
                    pending = (skipped, d >= BIG, w.date())
            if made_up is not None:
                fires.append(OracleFire(self.instants[k], made_up))
                continue
            if not hits[k]:
                continue
            if k in self.second_pass and fixed and not self.second_pass[k]:
                continue  # R5: a fixed-time job skips the second pass
            notes: list[str] = []
            if pending is not None:
                text = describe_walls([_num(s) for s in pending[0]], _num(w) // 86400)
                notes.append(note_not_made_up(text, big=pending[1]))
                pending = None
            if k in self.second_pass:
                notes.append(note_pass(_hm(w), second=True, fixed=fixed, big=self.second_pass[k]))
            if k in self.first_pass:
                notes.append(note_pass(_hm(w), second=False, fixed=fixed, big=self.first_pass[k]))
            fires.append(OracleFire(self.instants[k], "; ".join(notes) or None))
        return [f for f in fires if self.start <= f.at < self.end]


def oracle_fires(expr: CronExpr, zone: tzinfo, start: datetime, end: datetime) -> list[OracleFire]:
    """Every fire whose instant is in [start, end)."""
    return Walk(zone, start, end).fires(expr)


def utc(text: str) -> datetime:
    """An ISO-8601 instant as an aware UTC datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)


# --- transitions ---------------------------------------------------------------------

# (id, zone, the UTC instant its offset changes): checked by test_transitions_are_real.
TRANSITIONS = [
    ("new_york_spring", "America/New_York", "2026-03-08T07:00Z"),
    ("new_york_fall", "America/New_York", "2026-11-01T06:00Z"),
    ("london_spring", "Europe/London", "2026-03-29T01:00Z"),
    ("london_fall", "Europe/London", "2026-10-25T01:00Z"),
    ("berlin_spring", "Europe/Berlin", "2026-03-29T01:00Z"),
    ("berlin_fall", "Europe/Berlin", "2026-10-25T01:00Z"),
    ("dublin_spring", "Europe/Dublin", "2026-03-29T01:00Z"),  # negative DST in tzdata
    ("dublin_fall", "Europe/Dublin", "2026-10-25T01:00Z"),
    ("sydney_fall", "Australia/Sydney", "2026-04-04T16:00Z"),
    ("sydney_spring", "Australia/Sydney", "2026-10-03T16:00Z"),
    ("lord_howe_back_30m", "Australia/Lord_Howe", "2026-04-04T15:00Z"),
    ("lord_howe_forward_30m", "Australia/Lord_Howe", "2026-10-03T15:30Z"),
    ("chatham_back", "Pacific/Chatham", "2026-04-04T14:00Z"),
    ("chatham_forward", "Pacific/Chatham", "2026-09-26T14:00Z"),
    ("sao_paulo_2016_forward", "America/Sao_Paulo", "2016-10-16T03:00Z"),
    ("sao_paulo_2017_back", "America/Sao_Paulo", "2017-02-19T02:00Z"),
    ("sao_paulo_2017_forward", "America/Sao_Paulo", "2017-10-15T03:00Z"),
    ("sao_paulo_2018_back", "America/Sao_Paulo", "2018-02-18T02:00Z"),
    ("sao_paulo_2018_forward", "America/Sao_Paulo", "2018-11-04T03:00Z"),
    ("sao_paulo_2019_back", "America/Sao_Paulo", "2019-02-17T02:00Z"),
    ("tehran_2019_forward", "Asia/Tehran", "2019-03-21T20:30Z"),
    ("tehran_2019_back", "Asia/Tehran", "2019-09-21T19:30Z"),
    ("tehran_2020_forward", "Asia/Tehran", "2020-03-20T20:30Z"),
    ("tehran_2020_back", "Asia/Tehran", "2020-09-20T19:30Z"),
    ("tehran_2021_forward", "Asia/Tehran", "2021-03-21T20:30Z"),
    ("tehran_2021_back", "Asia/Tehran", "2021-09-21T19:30Z"),
    ("tehran_2022_forward", "Asia/Tehran", "2022-03-21T20:30Z"),
    ("tehran_2022_back", "Asia/Tehran", "2022-09-21T19:30Z"),
    ("apia_2011_dst_forward", "Pacific/Apia", "2011-09-24T14:00Z"),
    ("apia_2011_skipped_day", "Pacific/Apia", "2011-12-30T10:00Z"),
    ("apia_2012_back", "Pacific/Apia", "2012-03-31T14:00Z"),
    ("troll_forward_2h", "Antarctica/Troll", "2026-03-29T01:00Z"),
    ("troll_back_2h", "Antarctica/Troll", "2026-10-25T01:00Z"),
    ("casey_2009_forward_3h", "Antarctica/Casey", "2009-10-17T18:00Z"),
    ("casey_2010_back_3h", "Antarctica/Casey", "2010-03-04T15:00Z"),
    ("kwajalein_1993_skipped_day", "Pacific/Kwajalein", "1993-08-21T12:00Z"),
    ("havana_midnight_forward", "America/Havana", "2026-03-08T05:00Z"),
    ("havana_fall_to_midnight", "America/Havana", "2026-11-01T05:00Z"),
    ("santiago_midnight_back", "America/Santiago", "2026-04-05T03:00Z"),
    ("gaza_fall", "Asia/Gaza", "2026-10-23T23:00Z"),
]

# Realistic expressions of both kinds, both day rules, gaps and repeats at many hours.
EXPRESSIONS = [
    "30 2 * * *",
    "0 2,3 * * *",
    "0,15,30,45 2 * * *",
    "30 1 * * *",
    "0 0 * * *",
    "30 0 * * *",
    "45 23 * * *",
    "0 */2 * * *",
    "*/20 * * * *",
    "*/7 * * * *",
    "15 * * * *",
    "* 2 * * *",
    "*/10 0-3 * * *",
    "0 1-3 * * *",
    "0 1-4/2 * * *",
    "30 2/3 * * *",
    "5,35 0-4,22-23 * * *",
    "0 9 * * mon-fri",
    "0 12 1,15 * fri",
    "0 0 */2 * sun",
    "20 3 * * 0,6",
    "0 4 * * *",
    "@daily",
    "@hourly",
    "*/59 * * * *",  # the largest steps: 0 and 59, 0 and 23
    "0 */23 * * *",
]

JITTERS = [timedelta(0), timedelta(seconds=37, milliseconds=250), timedelta(minutes=95)]


@functools.cache
def _walk(zone: tzinfo, at: datetime) -> Walk:
    return Walk(zone, at - timedelta(hours=30), at + timedelta(hours=54))


# The oracle's answers are kept by expression text: computed once per process, and in
# `make mutate` before any mutant runs (each mutant's tests run in a process forked from
# one that ran the suite), so a mutant is judged against answers its code had no part in,
# and quickly.
@functools.cache
def _oracle(zone: tzinfo, at: datetime, text: str) -> tuple[OracleFire, ...]:
    return tuple(_walk(zone, at).fires(parse_cron(text)))


def _differences(
    text: str, zone: str | tzinfo, jump: str | datetime, jitter: timedelta, hours: int = 24
) -> tuple[int, list[str]]:
    """(comparisons made, differences) for one expression, restarting every 10 minutes
    within `hours` of one transition."""
    at = utc(jump) if isinstance(jump, str) else jump
    tz = ZoneInfo(zone) if isinstance(zone, str) else zone
    walk = _walk(tz, at)
    timing = CronTiming(parse_cron(text), tz, jitter)
    expected = [OracleFire(f.at + jitter, f.note) for f in _oracle(tz, at, text)]
    instants = [f.at for f in expected]
    window_start, window_end = at - timedelta(hours=hours), at + timedelta(hours=hours)
    oracle_end = walk.end + jitter
    problems: list[str] = []
    checks = 0

    def check(t: datetime) -> None:
        nonlocal checks
        checks += 1
        got = timing.next_after(t)
        i = bisect.bisect_right(instants, t)
        if i == len(expected):
            if got.at < oracle_end:
                problems.append(f"after {t}: got {got.at} {got.note!r}, oracle: none")
        elif (got.at, got.note) != (expected[i].at, expected[i].note):
            want = expected[i]
            problems.append(f"after {t}: got {got.at} {got.note!r}, want {want.at} {want.note!r}")
        if got.local != got.at.astimezone(tz) or got.local.utcoffset() is None:
            problems.append(f"after {t}: local {got.local} is not at {got.at} in {zone}")

    t = window_start
    while t <= window_end:  # restarts every 10 minutes, and around the jump itself
        check(t)
        t += timedelta(minutes=10)
    for delta in (-1, 0, 1, 59, 60, 61):
        check(at + timedelta(seconds=delta))
    # The consecutive fires, as the daemon walks them.
    stream = timing.fires(window_start)
    for want in (f for f in expected if window_start < f.at <= window_end):
        checks += 1
        got = next(stream)
        if (got.at, got.note) != (want.at, want.note):
            problems.append(f"stream: got {got.at} {got.note!r}, want {want.at} {want.note!r}")
            break
    return checks, problems


@pytest.mark.parametrize(
    ("zone", "jump"), [c[1:] for c in TRANSITIONS], ids=[c[0] for c in TRANSITIONS]
)
def test_transitions_are_real(zone: str, jump: str) -> None:
    at = utc(jump)
    before = (at - timedelta(seconds=1)).astimezone(ZoneInfo(zone)).utcoffset()
    assert before != at.astimezone(ZoneInfo(zone)).utcoffset()


@pytest.mark.parametrize(
    ("zone", "jump"), [c[1:] for c in TRANSITIONS], ids=[c[0] for c in TRANSITIONS]
)
def test_named_expressions_match_oracle(zone: str, jump: str) -> None:
    problems: dict[str, list[str]] = {}
    for i, text in enumerate(EXPRESSIONS):
        jitter = JITTERS[i % len(JITTERS)]
        _, found = _differences(text, zone, jump, jitter)
        if found:
            problems[f"{text} jitter={jitter}"] = found[:3]
    assert problems == {}


# --- synthetic zones: transitions at the edges of the zone data timeline.py probes ---


def _tzif(initial: int, changes: list[tuple[int, int]]) -> ZoneInfo:
    """A TZif v1 zone: `initial` offset, then (instant, new offset) changes; all standard."""
    offsets = [initial, *sorted({o for _, o in changes} - {initial})]
    names = b"".join(b"T%d\0" % i for i in range(len(offsets)))
    data = b"TZif" + b"\0" * 16
    data += struct.pack(">6l", 0, 0, 0, len(changes), len(offsets), len(names))
    data += b"".join(struct.pack(">l", at) for at, _ in changes)
    data += bytes(offsets.index(o) for _, o in changes)
    data += b"".join(struct.pack(">lbb", o, 0, 3 * i) for i, o in enumerate(offsets))
    return ZoneInfo.from_file(io.BytesIO(data + names), key="Test/Zone")


EDGE = 50 * CHUNK  # 2022-07-27T00:00Z: an edge of the probed zone data
SYNTHETIC = [
    ("forward_just_after_edge", 0, [(EDGE + 600, 3600), (EDGE + 5 * 86400, 0)]),
    ("forward_at_edge", 0, [(EDGE, 3600), (EDGE + 5 * 86400 - 60, 0)]),
    ("forward_just_before_edge", 0, [(EDGE - 60, 3600), (EDGE + 4 * 86400, 0)]),
    ("back_at_edge", 7200, [(EDGE, 0), (EDGE + 9 * 86400, 7200)]),
    ("repeat_across_edge", 3600, [(EDGE - 1800, 0), (EDGE + 4 * 86400, 3600)]),
    ("half_hour_repeat_after_edge", 37800, [(EDGE + 7200, 36000), (EDGE + 6 * 86400, 37800)]),
]


@pytest.mark.parametrize(
    ("initial", "changes"), [c[1:] for c in SYNTHETIC], ids=[c[0] for c in SYNTHETIC]
)
def test_transitions_at_the_edges_of_probed_data(
    initial: int, changes: list[tuple[int, int]]
) -> None:
    """Offsets are probed in chunks; a transition on or near a chunk's edge is found."""
    zone = _tzif(initial, changes)
    problems = {}
    for at, _ in changes:
        jump = EPOCH + timedelta(seconds=at)
        for text in EXPRESSIONS:
            found = _differences(text, zone, jump, timedelta(0), hours=6)[1]
            if found:
                problems[f"{text} at {jump}"] = found[:3]
    assert problems == {}


# --- random expressions --------------------------------------------------------------

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


@st.composite
def _item(draw: st.DrawFn, low: int, high: int, names: list[str] | None, hot: list[int]) -> str:
    def value() -> str:
        use_hot: bool = bool(hot) and draw(st.booleans())
        n: int = draw(st.sampled_from(hot)) if use_hot else draw(st.integers(low, high))
        if names and draw(st.integers(0, 3)) == 0:
            return names[(n - low) % len(names)]
        return str(n)

    kind = draw(st.sampled_from(["value", "value", "range", "step", "range_step", "start_step"]))
    step = draw(st.integers(1, max(1, min(high - low, 25))))
    if kind == "value":
        return value()
    if kind == "step":
        return f"*/{step}"
    if kind == "start_step":
        return f"{value()}/{step}"
    a, b = sorted((draw(st.integers(low, high)), draw(st.integers(low, high))))
    near: bool = bool(hot) and draw(st.booleans())
    if near:
        a = draw(st.sampled_from([h for h in hot if h <= b] or [a]))
    return f"{a}-{b}" if kind == "range" else f"{a}-{b}/{step}"


def _field(
    low: int,
    high: int,
    names: list[str] | None = None,
    hot: tuple[int, ...] = (),
    *,
    star: bool = False,
    lead_star: bool = True,
) -> st.SearchStrategy[str]:
    items = st.lists(_item(low, high, names, list(hot)), min_size=1, max_size=3).map(",".join)
    if not lead_star:
        items = items.filter(lambda f: not f.startswith("*"))
    return st.one_of(st.just("*"), items) if star else items


@st.composite
def expressions(draw: st.DrawFn) -> str:
    """Half fixed-time, half wildcard (R3), hours often near the night's transitions."""
    hot_minutes, hot_hours = (0, 15, 30, 45), (0, 1, 2, 3, 23)
    if draw(st.booleans()):
        minute = draw(_field(0, 59, hot=hot_minutes, lead_star=False))
        hour = draw(_field(0, 23, hot=hot_hours, lead_star=False))
    else:
        minute = draw(st.one_of(st.just("*"), st.just("*/15"), _field(0, 59, hot=hot_minutes)))
        hour = draw(st.one_of(st.just("*"), _field(0, 23, hot=hot_hours)))
    dom = draw(st.one_of(st.just("*"), _field(1, 31, star=True)))
    month = draw(st.one_of(st.just("*"), st.just("*"), _field(1, 12, _MONTHS)))
    dow = draw(st.one_of(st.just("*"), _field(0, 7, _DAYS, star=True)))
    return f"{minute} {hour} {dom} {month} {dow}"


def _parse_or_none(text: str) -> CronExpr | None:
    try:
        return parse_cron(text)
    except ValueError:
        return None  # e.g. "0 0 30 feb *": refused by the parser, tested elsewhere


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=expressions(),
    case=st.sampled_from(TRANSITIONS),
    jitter=st.sampled_from(JITTERS),
)
def test_random_expressions_match_oracle(
    text: str, case: tuple[str, str, str], jitter: timedelta
) -> None:
    if _parse_or_none(text) is None:
        return
    _, problems = _differences(text, case[1], case[2], jitter, hours=6)
    assert problems == [], f"{text} in {case[0]}"


@functools.cache
def _utc_walk(day: int) -> Walk:
    start = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=day)
    return Walk(UTC, start, start + timedelta(days=3))


@functools.cache
def _utc_oracle(day: int, text: str) -> list[datetime]:
    return [f.at for f in _utc_walk(day).fires(parse_cron(text))]  # kept as _oracle is


@settings(max_examples=40, deadline=None)
@given(text=expressions(), day=st.sampled_from([0, 45, 59, 365 + 58, 700]))
def test_days_long_windows_in_utc(text: str, day: int) -> None:
    """R1/R2 over week-long windows, where DST cannot hide a mistake."""
    expr = _parse_or_none(text)
    if expr is None:
        return
    walk = _utc_walk(day)
    expected = _utc_oracle(day, text)
    timing = CronTiming(expr, ZoneInfo("UTC"))
    got = []
    for fire in timing.fires(walk.start - timedelta(seconds=1)):
        if fire.at >= walk.end:
            break
        got.append(fire.at)
    assert got == expected


@settings(max_examples=100, deadline=None)
@given(
    dom=_field(1, 31, star=True),
    dow=_field(0, 7, _DAYS, star=True),
    month=st.one_of(st.just("*"), _field(1, 12, _MONTHS)),
)
def test_day_rule_over_years(dom: str, dow: str, month: str) -> None:
    """R2 by definition, day by day over four years (including 29 February)."""
    expr = _parse_or_none(f"0 12 {dom} {month} {dow}")
    if expr is None:
        return
    first = datetime(2027, 1, 1, 12, tzinfo=UTC)
    expected = []
    for n in range(4 * 366):
        day = first + timedelta(days=n)
        in_month = day.day in expr.days
        in_week = day.isoweekday() % 7 in expr.weekdays
        both = dom.startswith("*") or dow.startswith("*")
        if day.month in expr.months and ((in_month and in_week) if both else in_month or in_week):
            expected.append(day)
    end = first + timedelta(days=4 * 366)
    got = []
    for fire in CronTiming(expr, ZoneInfo("UTC")).fires(first - timedelta(seconds=1)):
        if fire.at >= end:
            break
        got.append(fire.at)
    assert got == expected


# --- zones without transitions: CronTiming's shortcut --------------------------------

# Zones whose offset never changes take a shortcut past stretches, jumps and notes: checked
# here against the oracle, and against the walk every other zone takes, over years.
STEADY_ZONES = [
    pytest.param(ZoneInfo("UTC"), id="utc"),
    pytest.param(ZoneInfo("Etc/GMT-14"), id="etc_plus_14"),
    pytest.param(ZoneInfo("Etc/GMT+12"), id="etc_minus_12"),
    pytest.param(UTC, id="datetime_utc"),
    pytest.param(timezone(timedelta(hours=5, minutes=45)), id="fixed_plus_0545"),
    pytest.param(timezone(-timedelta(hours=9, minutes=30)), id="fixed_minus_0930"),
    pytest.param(_tzif(-12600, []), id="tzif_without_changes"),
]
STEADY_INSTANTS = [
    "2026-01-01T00:00Z",
    "2028-02-28T20:00Z",  # a 29 February ahead, in every offset
    "2026-12-31T12:00Z",
    "2022-07-26T23:59:30Z",  # an edge of the probed zone data (EDGE)
]
# Yearly and rarer: one fire after another crosses several edges of the probed data.
RARE_EXPRESSIONS = ["17 5 18 5 *", "0 0 29 2 *", "59 23 31 12 *", "0 12 13 * fri", "30 1 * 3 0"]


def _walking(timing: CronTiming) -> CronTiming:
    """The same job with the shortcut turned off: the walk any zone with DST takes."""
    walking = CronTiming(timing.expr, timing.zone, timing.jitter)
    walking._steady = None
    return walking


@pytest.mark.parametrize("zone", STEADY_ZONES)
def test_zones_without_transitions_take_the_shortcut(zone: tzinfo) -> None:
    assert CronTiming(parse_cron("0 0 * * *"), zone)._steady is not None


@pytest.mark.parametrize("zone", STEADY_ZONES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=expressions(), at=st.sampled_from(STEADY_INSTANTS), jitter=st.sampled_from(JITTERS))
def test_zones_without_transitions_match_oracle(
    zone: tzinfo, text: str, at: str, jitter: timedelta
) -> None:
    if _parse_or_none(text) is None:
        return
    _, problems = _differences(text, zone, at, jitter, hours=12)
    assert problems == [], text


@pytest.mark.parametrize("zone", STEADY_ZONES)
@settings(max_examples=25, deadline=None)
@given(
    text=st.one_of(expressions(), st.sampled_from(RARE_EXPRESSIONS)),
    start=st.integers(0, 130 * 365 * 86400),
    jitter=st.sampled_from(JITTERS),
)
def test_shortcut_gives_the_walks_fires_over_years(
    zone: tzinfo, text: str, start: int, jitter: timedelta
) -> None:
    expr = _parse_or_none(text)
    if expr is None:
        return
    timing = CronTiming(expr, zone, jitter)
    walking = _walking(timing)
    after = EPOCH + timedelta(seconds=start, microseconds=start % 997)
    assert timing.next_after(after) == walking.next_after(after)
    shortcut, walk = timing.fires(after), walking.fires(after)
    got = [next(shortcut) for _ in range(12)]
    assert got == [next(walk) for _ in range(12)]
    assert all(f.note is None and f.local == f.at.astimezone(zone) for f in got)


# --- croniter: the same fields, different fire times ---------------------------------


def _croniter_sets(text: str) -> list[set[int]]:
    expanded, _ = croniter.expand(text)
    ranges = [range(60), range(24), range(1, 32), range(1, 13), range(7)]
    return [
        set(r) if f == ["*"] else {int(v) % 7 if i == 4 else int(v) for v in f}
        for i, (f, r) in enumerate(zip(expanded, ranges, strict=True))
    ]


@st.composite
def _shared_grammar(draw: st.DrawFn) -> str:
    """Expressions both parsers read the same way: croniter 7.0.0 widens a written equal
    range ("5-5") to the whole field and ends day-of-week steps at 6, crond at 7."""
    text: str = draw(expressions())
    fields = text.split()
    for i, f in enumerate(fields):
        for item in f.split(","):
            base = item.split("/")[0]
            lo, _, hi = base.partition("-")
            if hi and lo == hi:
                fields[i] = "*"
            if i == 4 and "/" in item:
                fields[i] = "*"
    return " ".join(fields)


@settings(max_examples=200, deadline=None)
@given(text=_shared_grammar())
def test_croniter_expands_fields_like_crond(text: str) -> None:
    """The gate for a croniter upgrade: field expansion must agree on the shared grammar."""
    expr = _parse_or_none(text)
    if expr is None:
        return
    ours = [
        set(expr.minutes),
        set(expr.hours),
        set(expr.days),
        set(expr.months),
        set(expr.weekdays),
    ]
    assert _croniter_sets(text) == ours


CRONITER_DIFFERENCES = [
    # (id, expression, zone, after, croniter's next fires, crond's next fires)
    pytest.param(
        "5-5 * * * *",
        "UTC",
        "2026-01-01T00:00Z",
        ["2026-01-01T00:01Z"],
        ["2026-01-01T00:05Z"],
        id="equal_range_is_whole_field_in_croniter",
    ),
    pytest.param(
        "30 1 * * *",
        "America/New_York",
        "2026-11-01T04:00Z",
        ["2026-11-01T05:30Z", "2026-11-01T06:30Z"],
        ["2026-11-01T05:30Z", "2026-11-02T06:30Z"],
        id="fixed_time_twice_on_fall_back_night_in_croniter",
    ),
    pytest.param(
        "0 12 */2 * fri",
        "UTC",
        "2026-01-01T00:00Z",
        ["2026-01-01T12:00Z"],
        ["2026-01-09T12:00Z"],
        id="r2_star_step_means_and_not_in_croniter",
    ),
]


@pytest.mark.parametrize(("text", "zone", "after", "theirs", "ours"), CRONITER_DIFFERENCES)
def test_where_croniter_differs(
    text: str, zone: str, after: str, theirs: list[str], ours: list[str]
) -> None:
    """Documents croniter 7.0.0's behaviour that crond corrects; an upgrade that changes
    it fails here, so the difference is looked at again."""
    start = utc(after).astimezone(ZoneInfo(zone))
    it = croniter(text, start)
    got_theirs = [it.get_next(datetime).astimezone(UTC) for _ in theirs]
    assert got_theirs == [utc(x) for x in theirs]
    fires = CronTiming(parse_cron(text), ZoneInfo(zone)).fires(utc(after))
    assert [next(fires).at for _ in ours] == [utc(x) for x in ours]
