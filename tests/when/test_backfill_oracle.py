"""A backfill's slots (crond.when.backfill) against the brute-force oracle of
test_timing_oracle: every fire in [from, to), oldest first, with its DST note; and the
`crond backfill --dry-run` command on a DST night."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crond.cli import main
from crond.when.backfill import MAX_SLOTS, backfill_slots
from crond.when.timing import CronTiming, IntervalTiming, parse_cron
from tests.when.test_timing_oracle import TRANSITIONS, Walk, expressions, utc


@example(
    text="* * * * *", case=("new_york_fall", "America/New_York", "2026-11-01T06:00Z"), lo=-2, span=1
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=expressions(),
    case=st.sampled_from(TRANSITIONS),
    lo=st.integers(-300, 300),
    span=st.integers(1, 600),
)
def test_backfill_slots_match_the_oracle(
    text: str, case: tuple[str, str, str], lo: int, span: int
) -> None:
    try:
        expr = parse_cron(text)
    except ValueError:
        return
    zone = ZoneInfo(case[1])
    jump = utc(case[2])
    start = jump + timedelta(minutes=lo)
    end = start + timedelta(minutes=span)
    # Walked a day past `end`: a fire's note may depend on what comes after the range (a
    # first pass of a wall time is known as such once the clocks go back, later).
    walk = Walk(zone, start, end + timedelta(days=1))
    expected = [(f.at, f.note) for f in walk.fires(expr) if f.at < end]
    got = [(f.at, f.note) for f in backfill_slots(CronTiming(expr, zone), start, end)]
    assert got == expected


def test_a_range_too_wide_or_backwards_is_refused() -> None:
    every_second = IntervalTiming(timedelta(seconds=1))
    start = utc("2026-01-01T00:00:00Z")
    with pytest.raises(ValueError, match="more than 10,000 slots"):
        backfill_slots(every_second, start, start + timedelta(seconds=MAX_SLOTS + 1))
    assert len(backfill_slots(every_second, start, start + timedelta(seconds=MAX_SLOTS))) == (
        MAX_SLOTS
    )
    with pytest.raises(ValueError, match=r"^--to \(2026-01-01T00:00:00Z\) must be after"):
        backfill_slots(every_second, start, start)
    with pytest.raises(ValueError, match=r"in \[2026-01-01T00:00:00Z, 2026-01-01T02:46:41Z\)"):
        backfill_slots(every_second, start, start + timedelta(seconds=MAX_SLOTS + 1))


def _crond(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_dry_run_lists_the_slots_with_dst_notes(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  nightly: {cron: '30 2 * * *', timezone: America/New_York, command: x}\n")
    common = [str(f), "nightly", "--from", "2026-03-07T00:00:00Z", "--to", "2026-03-09T12:00:00Z"]
    got = _crond("backfill", *common, "--dry-run", "--json")
    assert got.exit_code == 0, got.output
    rows = [json.loads(line) for line in got.stdout.splitlines()]
    assert [(r["at"], r["note"]) for r in rows] == [
        ("2026-03-07T07:30:00Z", None),
        ("2026-03-08T07:00:00Z", "02:30 skipped by DST; runs at the jump (R4)"),
        ("2026-03-09T06:30:00Z", None),
    ]
    table = _crond("backfill", *common, "--dry-run")
    assert "3 slots of nightly in [2026-03-07T00:00:00Z, 2026-03-09T12:00:00Z)" in table.stdout
    refused = _crond("backfill", *common)  # (without --dry-run: through the daemon)
    assert refused.exit_code == 2
    assert "no crond is running for" in refused.output
