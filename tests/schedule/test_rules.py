"""crond.schedule.rules and heap: the pure rules (R9 grace, missed slots, clock steps, overlap,
catch-up) as one table whose every row checks every field of the Decision, and the heap
of next fires."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from crond.config import loader
from crond.config.loaded import LoadedJob
from crond.schedule.heap import Schedule
from crond.schedule.rules import Decision, Entry, Missed, decide, make_entry
from crond.when.timing import Fire, IntervalTiming

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def job(body: str, name: str = "j") -> LoadedJob:
    return loader.loads(f"jobs:\n  {name}: {{{body}}}\n").jobs[name]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def fire(seconds: float) -> Fire:
    """A fire of an `every` job or a cron job in UTC: `local` is the same instant."""
    return Fire(at(seconds), at(seconds), None)


@dataclass(frozen=True)
class Case:
    id: str
    job: str  # the job's flow mapping
    cursor: float  # seconds after T0
    now: float
    running: int
    start: float | None
    next: float | None  # the next fire the decision carries; None: never again
    skip: float | None = None
    missed: tuple[int, float, float] | None = None  # count, first, last
    replace: bool = False
    caught_up: int | None = None
    skip_reason: str = "overlap"  # the reason, when `skip` is set
    paused: bool = False  # the job is paused (input)
    passed_over: int = 0  # the slots passed over while paused (output)


E1 = "every: 1m, command: x"
A2 = "every: 1m, overlap: allow, max_running: 2, command: x"
CU = "every: 1m, grace: 5s, catchup: latest, catchup_window: 1h, command: x"
C10 = "cron: '*/10 * * * *', grace: 5s, command: x"
CASES = [
    Case("nothing_due_yet", E1, 0, 30, 0, None, 60),
    Case("slot_due_on_time", E1, 0, 60, 0, 60, 120),
    Case("slot_due_a_little_late", E1, 0, 61.5, 0, 60, 120),
    Case("late_by_exactly_grace_starts", "every: 1m, grace: 10s, command: x", 0, 70, 0, 60, 120),
    Case(
        "late_beyond_grace_is_missed",
        "every: 1m, grace: 10s, command: x",
        0,
        70.001,
        0,
        None,
        120,
        missed=(1, 60, 60),
    ),
    Case("two_due_now_on_the_second", E1, 0, 120, 0, 120, 180, missed=(1, 60, 60)),
    Case(
        "suspend_runs_latest_only",
        "every: 1m, grace: 5m, command: x",
        0,
        3600 + 5,
        0,
        3600,
        3660,
        missed=(59, 60, 3540),
    ),
    Case(
        "suspend_beyond_grace_all_missed",
        "every: 1m, grace: 5s, command: x",
        0,
        3600 + 30,
        0,
        None,
        3660,
        missed=(60, 60, 3600),
    ),
    Case(
        "every_second_hour_suspend_one_missed_event",
        "every: 1s, grace: 1s, command: x",
        0,
        3600.5,
        0,
        3600,
        3601,
        missed=(3599, 1, 3599),
    ),
    Case(
        "interval_with_anchor_and_jitter",
        "every: 1h, anchor: '2026-03-01T12:20:00Z', jitter: 1s, grace: 1h, command: x",
        0,
        3 * 3600,
        0,
        2 * 3600 + 1200.705,
        3 * 3600 + 1200.705,
        missed=(2, 1200.705, 3600 + 1200.705),
    ),
    # R9's cursor: slots at or before it are done with.
    Case("clock_stepped_back_nothing_due", E1, 600, 300, 0, None, 660),
    Case("now_at_the_cursor_nothing_due", E1, 60, 60, 0, None, 120),
    Case("nothing_before_cursor", E1, 60, 61, 0, None, 120),
    # overlap
    Case("overlap_skip", E1, 0, 60, 1, None, 120, skip=60),
    Case("overlap_skip_with_missed", E1, 0, 180, 1, None, 240, skip=180, missed=(2, 60, 120)),
    Case("overlap_allow", "every: 1m, overlap: allow, command: x", 0, 60, 2, 60, 120),
    Case(
        "overlap_replace",
        "every: 1m, overlap: replace, command: x",
        0,
        60,
        1,
        60,
        120,
        replace=True,
    ),
    Case(
        "replace_without_running_is_plain",
        "every: 1m, overlap: replace, command: x",
        0,
        60,
        0,
        60,
        120,
    ),
    # max_running (overlap: allow only)
    Case("max_running_below_starts", A2, 0, 60, 1, 60, 120),
    Case("max_running_reached_skips", A2, 0, 60, 2, None, 120, skip=60, skip_reason="max_running"),
    Case(
        "max_running_beyond_skips_with_missed",
        A2,
        0,
        180,
        3,
        None,
        240,
        skip=180,
        skip_reason="max_running",
        missed=(2, 60, 120),
    ),
    Case("max_running_none_running_starts", A2, 0, 60, 0, 60, 120),
    # paused: every due slot passed over and counted; the cursor moves to now
    Case("paused_one_slot", E1, 0, 60, 0, None, 120, paused=True, passed_over=1),
    Case("paused_nothing_due", E1, 0, 30, 0, None, 60, paused=True),
    Case("paused_suspend_counts_all", E1, 0, 3630, 0, None, 3660, paused=True, passed_over=60),
    Case("paused_catchup_no_make_up", CU, 0, 1830, 0, None, 1860, paused=True, passed_over=30),
    Case("paused_while_running", E1, 0, 60, 1, None, 120, paused=True, passed_over=1),
    Case(
        "paused_disabled_counts_nothing",
        "every: 1m, enabled: false, command: x",
        0,
        150,
        0,
        None,
        180,
        paused=True,
    ),
    Case("paused_clock_back", E1, 600, 300, 0, None, 660, paused=True),
    Case("disabled_never_starts", "every: 1m, enabled: false, command: x", 0, 60, 0, None, 120),
    Case(
        "disabled_two_due_nothing_missed",
        "every: 1m, enabled: false, command: x",
        0,
        150,
        0,
        None,
        180,
    ),
    Case("reboot_never_falls_due", "cron: '@reboot', command: x", 0, 86400, 0, None, None),
    # cron jobs: their slots are walked, not counted by arithmetic
    Case("cron_minute_boundary", "cron: '* * * * *', command: x", 0, 60.002, 0, 60, 120),
    Case("cron_on_the_slot", C10, 0, 600, 0, 600, 1200),
    Case("cron_two_due_now_on_the_second", C10, 0, 1200, 0, 1200, 1800, missed=(1, 600, 600)),
    Case("cron_three_due", C10, 0, 1800, 0, 1800, 2400, missed=(2, 600, 1200)),
    Case(
        "cron_suspend_runs_latest_only",
        "cron: '* * * * *', grace: 5m, command: x",
        0,
        3600 + 5,
        0,
        3600,
        3660,
        missed=(59, 60, 3540),
    ),
    Case("cron_beyond_grace_all_missed", C10, 0, 3630, 0, None, 4200, missed=(6, 600, 3600)),
    Case("cron_overlap_skip", C10, 0, 1800, 1, None, 2400, skip=1800, missed=(2, 600, 1200)),
    Case(
        "cron_catchup",
        C10 + ", catchup: latest, catchup_window: 1h",
        0,
        1830,
        0,
        1800,
        2400,
        caught_up=2,
    ),
    # catch-up (R9 with `catchup: latest`)
    Case("catchup_within_grace_is_a_plain_late_start", CU, 0, 62, 0, 60, 120),
    Case("catchup_beyond_grace_one_run", CU, 0, 30 * 60 + 30, 0, 1800, 1860, caught_up=29),
    Case("catchup_single_slot_beyond_grace", CU, 0, 90, 0, 60, 120, caught_up=0),
    Case(
        "catchup_late_by_exactly_the_window",
        "every: 1h, grace: 5s, catchup: latest, catchup_window: 10m, command: x",
        0,
        3600 + 600,
        0,
        3600,
        7200,
        caught_up=0,
    ),
    Case(
        "catchup_older_than_window_missed",
        "every: 1h, grace: 5s, catchup: latest, catchup_window: 10m, command: x",
        0,
        2 * 3600 + 600.5,
        0,
        None,
        3 * 3600,
        missed=(2, 3600, 7200),
    ),
    Case("catchup_skipped_for_overlap", CU, 0, 630, 1, None, 660, skip=600, missed=(9, 60, 540)),
    Case("catchup_single_slot_skipped_for_overlap", CU, 0, 90, 1, None, 120, skip=60),
    Case(
        "catchup_replace",
        "every: 1m, grace: 5s, catchup: latest, overlap: replace, command: x",
        0,
        630,
        1,
        600,
        660,
        replace=True,
        caught_up=9,
    ),
]


def _at(seconds: float | None) -> datetime | None:
    return None if seconds is None else at(seconds)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_plan(case: Case) -> None:
    entry = make_entry(job(case.job), at(case.cursor))
    decision = decide(entry, at(case.now), case.running, paused=case.paused)
    missed = None
    if case.missed is not None:
        count, first, last = case.missed
        missed = Missed(count, at(first), at(last))
    assert decision == Decision(
        job="j",
        cursor=max(at(case.cursor), at(case.now)),
        next_fire=None if case.next is None else fire(case.next),
        start=_at(case.start),
        skip=_at(case.skip),
        skip_reason=None if case.skip is None else case.skip_reason,
        replace=case.replace,
        missed=missed,
        caught_up=case.caught_up,
        paused=case.passed_over,
    )


class CountingInterval(IntervalTiming):
    """An interval that counts the fires asked of it, and refuses to be walked."""

    def __init__(self, every: timedelta) -> None:
        super().__init__(every)
        self.steps = 0

    def next_after(self, t: datetime) -> Fire:
        self.steps += 1
        assert self.steps <= 10, "the planner walks the slots one by one"
        return super().next_after(t)

    def fires(self, after: datetime) -> Iterator[Fire]:
        self.steps += 1
        return super().fires(after)


def test_month_of_suspend_is_counted_not_walked() -> None:
    """An every-second job after a month's suspend: 2.6 million slots, counted with a
    few steps (walked, they took seconds)."""
    timing = CountingInterval(timedelta(seconds=1))
    entry = Entry(job("every: 1s, command: x"), timing, T0)
    decision = decide(entry, T0 + timedelta(days=30, milliseconds=500), 0)
    assert decision.missed == Missed(30 * 86400 - 1, at(1), T0 + timedelta(days=30, seconds=-1))
    assert decision.start == T0 + timedelta(days=30)
    assert timing.steps <= 2  # the entry's first fire, and the next after now


def test_an_entry_keeps_the_next_fire_it_is_given() -> None:
    given = fire(3600)
    entry = Entry(job(E1), IntervalTiming(timedelta(minutes=1)), T0, given)
    assert entry.next_fire is given
    assert entry.name == "j"
    assert make_entry(job(E1, "other"), T0).next_fire == fire(60)


def test_cursor_never_decreases_through_schedule() -> None:
    schedule = Schedule()
    entry = make_entry(job(E1), at(120))
    schedule.put(entry)
    decision = decide(entry, at(30), 0)  # the clock stepped back 90 s
    schedule.apply(entry, decision)
    assert entry.cursor == at(120)
    assert entry.next_fire == fire(180)
    assert schedule.next_due() == (at(180), "j")


def test_apply_moves_the_entry_on_the_heap() -> None:
    schedule = Schedule()
    entry = make_entry(job(E1), T0)
    schedule.put(entry)
    schedule.apply(entry, decide(entry, at(60), 0))
    assert (entry.cursor, entry.next_fire) == (at(60), fire(120))
    assert schedule.pop_due(at(119.999)) == []
    assert schedule.pop_due(at(120)) == [entry]  # due at its instant exactly


def test_schedule_heap_pops_each_due_entry_once() -> None:
    schedule = Schedule()
    a = make_entry(job(E1, "a"), T0)
    b = make_entry(job("every: 2m, command: x", "b"), T0)
    schedule.put(a)
    schedule.put(b)
    schedule.put(a)  # a duplicate heap item must not make `a` due twice
    assert schedule.next_due() == (at(60), "a")
    assert [e.name for e in schedule.pop_due(at(120))] == ["a", "b"]
    assert schedule.pop_due(at(120)) == []
    assert schedule.next_due() is None


def test_entries_due_together_come_in_the_order_they_were_put() -> None:
    schedule = Schedule()
    names = ["m", "z", "a", "k"]
    for name in names:
        schedule.put(make_entry(job(E1, name), T0))
    assert [e.name for e in schedule.pop_due(at(60))] == names


def test_removed_entry_is_never_due() -> None:
    schedule = Schedule()
    a, b = make_entry(job(E1, "a"), T0), make_entry(job("every: 2m, command: x", "b"), T0)
    schedule.put(a)
    schedule.put(b)
    assert schedule.remove("a") is a
    assert schedule.remove("a") is None
    assert schedule.remove("never-there") is None
    assert schedule.entries == {"b": b}
    assert schedule.next_due() == (at(120), "b")  # a's heap item is stale: skipped
    assert schedule.pop_due(at(3600)) == [b]


def test_a_replaced_entry_is_due_at_its_own_fire() -> None:
    """A reload puts a new entry under the same name: the old heap item is stale."""
    schedule = Schedule()
    schedule.put(make_entry(job(E1), T0))
    new = make_entry(job("every: 5m, command: x"), T0)
    schedule.put(new)
    assert schedule.next_due() == (at(300), "j")
    assert schedule.pop_due(at(299)) == []
    assert schedule.pop_due(at(300)) == [new]


def test_entries_that_never_fall_due_stay_off_the_heap() -> None:
    schedule = Schedule()
    disabled = make_entry(job("every: 1m, enabled: false, command: x", "off"), T0)
    reboot = make_entry(job("cron: '@reboot', command: x", "boot"), T0)
    schedule.put(disabled)
    schedule.put(reboot)
    assert reboot.next_fire is None
    assert set(schedule.entries) == {"off", "boot"}
    assert schedule.next_due() is None
    assert schedule.pop_due(at(86400)) == []


def test_a_fire_not_yet_due_is_kept_not_computed_again() -> None:
    timing = CountingInterval(timedelta(minutes=1))
    entry = Entry(job(E1), timing, T0)
    for now in (1, 30, 59.999):
        assert decide(entry, at(now), 0).next_fire is entry.next_fire
    assert timing.steps == 1  # the entry's own first fire
