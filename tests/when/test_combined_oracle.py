"""Schedules made of parts (a `cron` list, `at`, `start`/`end`) against a brute-force
oracle, through the whole path a file takes (config.loads -> LoadedJob.make_timing).

The oracle knows nothing of crond's search: each expression's fires come from the
minute-walking oracle of test_timing_oracle (R1-R7 as written); a local `at` is found by
walking the window's UTC minutes for the first whose wall time is the one written (its
first pass, R5), or, when none is, the first whose wall time is past it (the jump, R4);
the union is a set of instants; the bounds are a filter.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crond.config import loader
from crond.when.instants import resolve
from crond.when.timing import CronExpr, parse_cron
from tests.when.test_timing_oracle import TRANSITIONS, Walk, expressions, utc

MINUTE = timedelta(minutes=1)


def _oracle_local(walk: Walk, wall: datetime) -> datetime | None:
    """The instant of wall time `wall` by walking minutes: its first pass, else the jump
    over it; None outside the walk."""
    for u, w in zip(walk.instants, walk.walls, strict=True):
        if w == wall:
            return u
    for k in range(1, len(walk.walls)):
        if walk.walls[k - 1] < wall < walk.walls[k]:
            return walk.instants[k]
    return None


def _window(
    texts: list[str], case: tuple[str, str, str], before: timedelta, after: timedelta
) -> tuple[list[CronExpr], ZoneInfo, datetime, datetime, datetime, Walk] | None:
    """The parsed expressions (None if one does not parse), the case's zone and jump,
    and the oracle's walk over [jump - before, jump + after)."""
    try:
        exprs = [parse_cron(t) for t in texts]
    except ValueError:
        return None
    zone = ZoneInfo(case[1])
    jump = utc(case[2])
    lo, hi = jump - before, jump + after
    return exprs, zone, jump, lo, hi, Walk(zone, lo, hi)


def _yaml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(expressions(), min_size=1, max_size=3),
    case=st.sampled_from(TRANSITIONS),
    at_minutes=st.lists(st.integers(-180, 540), max_size=4),
    local_at=st.lists(st.integers(-180, 540), max_size=3),
    bounds=st.tuples(
        st.one_of(st.none(), st.integers(-60, 300)), st.one_of(st.none(), st.integers(0, 600))
    ),
)
def test_union_at_and_bounds_match_the_oracle(
    texts: list[str],
    case: tuple[str, str, str],
    at_minutes: list[int],
    local_at: list[int],
    bounds: tuple[int | None, int | None],
) -> None:
    window = _window(texts, case, timedelta(hours=4), timedelta(hours=10))
    if window is None:
        return
    exprs, zone, jump, lo, hi, walk = window
    expected: set[datetime] = set()
    for expr in exprs:
        expected |= {f.at for f in walk.fires(expr)}
    at_texts = [(jump + m * MINUTE).strftime("%Y-%m-%dT%H:%M:%SZ") for m in at_minutes]
    expected |= {jump + m * MINUTE for m in at_minutes}
    # local times around the jump: walls of the zone near it, some in its gap or repeat
    base = (jump - timedelta(hours=2)).astimezone(zone).replace(tzinfo=None, second=0)
    walls = [base + m * MINUTE for m in local_at]
    for wall in walls:
        found = _oracle_local(walk, wall)
        assert found is not None
        expected.add(found)
    at_texts += [w.strftime("%Y-%m-%dT%H:%M") for w in walls]
    start = None if bounds[0] is None else jump + bounds[0] * MINUTE
    end = None if bounds[1] is None else jump + bounds[1] * MINUTE
    if start is not None and end is not None and end < start:
        start, end = end, start
    expected = {
        u
        for u in expected
        if (start is None or u >= start) and (end is None or u <= end) and lo <= u < hi
    }
    lines = ["jobs:", "  j:", f"    timezone: {case[1]}", f"    cron: {_yaml_list(texts)}"]
    if at_texts:
        lines.append(f"    at: {_yaml_list(at_texts)}")
    for name, bound in (("start", start), ("end", end)):
        if bound is not None:
            lines.append(f"    {name}: {bound.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    lines.append("    command: x")
    job = loader.loads("\n".join(lines) + "\n", now=lo).jobs["j"]
    got = []
    for fire in job.make_timing().fires(lo - timedelta(seconds=1)):
        if fire.at >= hi:
            break
        got.append(fire.at)
    assert got == sorted(expected), "\n".join(lines)


@settings(max_examples=30, deadline=None)
@given(texts=st.lists(expressions(), min_size=2, max_size=3), case=st.sampled_from(TRANSITIONS))
def test_a_list_keeps_each_expressions_dst_notes(
    texts: list[str], case: tuple[str, str, str]
) -> None:
    """Each fire of the union carries the note its first expression gives it alone (a
    shared instant is one fire)."""
    window = _window(texts, case, timedelta(hours=3), timedelta(hours=6))
    if window is None:
        return
    exprs, _, _, lo, hi, walk = window
    expected: dict[datetime, str | None] = {}
    for expr in exprs:
        for fire in walk.fires(expr):
            if expected.get(fire.at) is None:
                expected[fire.at] = fire.note
    text = f"jobs:\n  j: {{timezone: {case[1]}, cron: {_yaml_list(texts)}, command: x}}\n"
    job = loader.loads(text, now=lo).jobs["j"]
    got = {}
    for made in job.make_timing().fires(lo - timedelta(seconds=1)):
        if made.at >= hi:
            break
        got[made.at] = made.note
    assert got == dict(sorted(expected.items()))


def test_an_at_only_job_ends_after_its_last_instant() -> None:
    text = (
        "jobs:\n  once:\n    at: [2026-12-04T14:00, 2026-12-04T13:00:00Z]\n"
        "    timezone: Europe/Berlin\n    command: x\n"
    )
    job = loader.loads(text, now=datetime(2026, 1, 1, tzinfo=UTC)).jobs["once"]
    timing = job.make_timing()
    start = datetime(2026, 12, 1, tzinfo=UTC)
    # 14:00 in Berlin is 13:00Z: the two instants are one
    assert [f.at for f in timing.fires(start)] == [datetime(2026, 12, 4, 13, tzinfo=UTC)]
    assert timing.next_after(datetime(2026, 12, 4, 13, tzinfo=UTC)) is None


@pytest.mark.parametrize("case", TRANSITIONS, ids=[c[0] for c in TRANSITIONS])
def test_local_instants_around_each_transition_match_the_oracle(
    case: tuple[str, str, str],
) -> None:
    """Every quarter hour of wall time around a real transition, read as a local `at`:
    in a gap, the jump; in a repeat, the first pass."""
    zone = ZoneInfo(case[1])
    jump = utc(case[2])
    walk = Walk(zone, jump - timedelta(hours=12), jump + timedelta(hours=12))
    base = (jump - timedelta(hours=4)).astimezone(zone).replace(tzinfo=None, second=0)
    for quarter in range(8 * 4):
        wall = base + quarter * 15 * MINUTE
        assert resolve(wall, zone)[0] == _oracle_local(walk, wall), wall
