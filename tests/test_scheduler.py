"""The pure planner: R9 grace, missed-slot coalescing, clock steps, overlap (a table)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from crond.config import loader
from crond.config.loaded import LoadedJob
from crond.when.plan import Entry, Schedule, make_entry, plan_entry

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def job(body: str, name: str = "j") -> LoadedJob:
    return loader.loads(f"jobs:\n  {name}: {{{body}}}\n").jobs[name]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@dataclass(frozen=True)
class Case:
    id: str
    job: str  # the job's flow mapping
    cursor: float  # seconds after T0
    now: float
    running: int
    start: float | None
    skip: float | None = None
    missed: tuple[int, float, float] | None = None  # count, first, last
    replace: bool = False
    caught_up: int | None = None


CU = "every: 1m, grace: 5s, catchup: latest, catchup_window: 1h, command: x"
CASES = [
    Case("nothing_due_yet", "every: 1m, command: x", 0, 30, 0, None),
    Case("slot_due_on_time", "every: 1m, command: x", 0, 60, 0, 60),
    Case("slot_due_a_little_late", "every: 1m, command: x", 0, 61.5, 0, 60),
    Case("late_within_grace", "every: 1m, grace: 10s, command: x", 0, 70, 0, 60),
    Case(
        "late_beyond_grace_is_missed",
        "every: 1m, grace: 10s, command: x",
        0,
        71,
        0,
        None,
        missed=(1, 60, 60),
    ),
    Case(
        "suspend_runs_latest_only",
        "every: 1m, grace: 5m, command: x",
        0,
        3600 + 5,
        0,
        3600,
        missed=(59, 60, 3540),
    ),
    Case(
        "suspend_beyond_grace_all_missed",
        "every: 1m, grace: 5s, command: x",
        0,
        3600 + 30,
        0,
        None,
        missed=(60, 60, 3600),
    ),
    Case(
        "every_second_hour_suspend_one_missed_event",
        "every: 1s, grace: 1s, command: x",
        0,
        3600.5,
        0,
        3600,
        missed=(3599, 1, 3599),
    ),
    Case("clock_stepped_back_nothing_due", "every: 1m, command: x", 600, 300, 0, None),
    Case("nothing_before_cursor", "every: 1m, command: x", 60, 61, 0, None),
    Case("overlap_skip", "every: 1m, command: x", 0, 60, 1, None, skip=60),
    Case("overlap_allow", "every: 1m, overlap: allow, command: x", 0, 60, 2, 60),
    Case("overlap_replace", "every: 1m, overlap: replace, command: x", 0, 60, 1, 60, replace=True),
    Case(
        "replace_without_running_is_plain", "every: 1m, overlap: replace, command: x", 0, 60, 0, 60
    ),
    Case("disabled_never_starts", "every: 1m, enabled: false, command: x", 0, 60, 0, None),
    Case("cron_minute_boundary", "cron: '* * * * *', command: x", 0, 60.002, 0, 60),
    Case("catchup_within_grace_is_a_plain_late_start", CU, 0, 62, 0, 60),
    Case("catchup_beyond_grace_one_run", CU, 0, 30 * 60 + 30, 0, 1800, caught_up=29),
    Case("catchup_single_slot_beyond_grace", CU, 0, 90, 0, 60, caught_up=0),
    Case(
        "catchup_older_than_window_missed",
        "every: 1h, grace: 5s, catchup: latest, catchup_window: 10m, command: x",
        0,
        2 * 3600 + 1200,
        0,
        None,
        missed=(2, 3600, 7200),
    ),
    Case("catchup_skipped_for_overlap", CU, 0, 630, 1, None, skip=600, missed=(9, 60, 540)),
    Case(
        "catchup_replace",
        "every: 1m, grace: 5s, catchup: latest, overlap: replace, command: x",
        0,
        630,
        1,
        600,
        replace=True,
        caught_up=9,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_plan(case: Case) -> None:
    entry = make_entry(job(case.job), at(case.cursor))
    decision = plan_entry(entry, at(case.now), case.running)
    assert decision.start == (at(case.start) if case.start is not None else None)
    assert decision.skip == (at(case.skip) if case.skip is not None else None)
    assert decision.replace is case.replace
    assert decision.caught_up == case.caught_up
    if case.missed is None:
        assert decision.missed is None
    else:
        count, first, last = case.missed
        assert decision.missed is not None
        assert (decision.missed.count, decision.missed.first_slot, decision.missed.last_slot) == (
            count,
            at(first),
            at(last),
        )
    assert decision.cursor == max(at(case.cursor), at(case.now))


def test_month_of_suspend_counts_without_walking_every_slot() -> None:
    entry = make_entry(job("every: 1s, command: x"), T0)
    now = T0 + timedelta(days=30, milliseconds=500)
    decision = plan_entry(entry, now, 0)
    assert decision.missed is not None
    assert decision.missed.count == 30 * 86400 - 1
    assert decision.start == T0 + timedelta(days=30)


def test_cursor_never_decreases_through_schedule() -> None:
    schedule = Schedule()
    entry = make_entry(job("every: 1m, command: x"), at(120))
    schedule.put(entry)
    decision = plan_entry(entry, at(30), 0)  # the clock stepped back 90 s
    schedule.apply(entry, decision)
    assert entry.cursor == at(120)
    assert entry.next_fire is not None
    assert entry.next_fire.at == at(180)


def test_plan_many_entries() -> None:
    entries: list[Entry] = [make_entry(job("every: 1m, command: x", f"j{i}"), T0) for i in range(3)]
    running = {"j1": 1}
    decisions = [plan_entry(e, at(60), running.get(e.name, 0)) for e in entries]
    assert [d.start for d in decisions] == [at(60), None, at(60)]
    assert decisions[1].skip == at(60)


def test_schedule_heap_pops_each_due_entry_once() -> None:
    schedule = Schedule()
    a = make_entry(job("every: 1m, command: x", "a"), T0)
    b = make_entry(job("every: 2m, command: x", "b"), T0)
    schedule.put(a)
    schedule.put(b)
    schedule.put(a)  # a duplicate heap item must not make `a` due twice
    assert schedule.next_due() == (at(60), "a")
    assert [e.name for e in schedule.pop_due(at(120))] == ["a", "b"]
    assert schedule.pop_due(at(120)) == []
