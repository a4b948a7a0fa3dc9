"""`max_runs` and one-shot `at` jobs in the scheduling core (docs/schedules.md): the core
counts the scheduled runs it starts, from the store's count at load; a job that has had
them all has no next fire; a trigger is not counted; a slot skipped is not counted; a
claim the store refuses as "done" (another replica counted the last) ends the job too."""

from __future__ import annotations

from datetime import timedelta

from crond.schedule.actions import Start
from crond.schedule.core import Core
from tests.schedule.shell import T0, Shell, at

EVERY_MINUTE = "jobs:\n  a: {every: 1m, max_runs: 3, command: x}\n"


def _starts(shell: Shell, minutes: int) -> list[str]:
    """Wake at each of the next `minutes` minutes, each run ending before the next."""
    started = []
    for m in range(1, minutes + 1):
        for action in shell.wake(at(60 * m)):
            if isinstance(action, Start):
                started.append(f"{action.job.name}@{60 * m}")
        for run in list(shell.runs):
            shell.end(run.job)
    return started


def test_a_job_stops_after_max_runs_and_has_no_next_fire() -> None:
    shell = Shell(EVERY_MINUTE)
    assert _starts(shell, 6) == ["a@60", "a@120", "a@180"]
    entry = shell.core.schedule.entries["a"]
    assert entry.runs == 3
    assert entry.next_fire is None
    assert shell.core.wake_at(timedelta(0)) is None  # nothing left to wake for


def test_the_count_a_store_kept_is_where_a_restart_goes_on() -> None:
    shell = Shell(EVERY_MINUTE)
    shell.core = Core()
    shell.core.load(shell.jobs, T0, None, {"a": 2})
    assert _starts(shell, 4) == ["a@60"]
    shell.core = Core()
    shell.core.load(shell.jobs, T0, None, {"a": 3})
    assert shell.core.schedule.entries["a"].next_fire is None
    assert _starts(shell, 4) == []


def test_a_reload_that_changes_the_job_keeps_its_count() -> None:
    shell = Shell(EVERY_MINUTE)
    assert _starts(shell, 2) == ["a@60", "a@120"]
    changed = Shell("jobs:\n  a: {every: 1m, max_runs: 3, command: y}\n").jobs
    shell.core.load(changed, at(121), None)
    shell.jobs = changed
    assert [s for s in _starts(shell, 6) if s > "a@120"] == ["a@180"]


def test_a_trigger_is_not_counted() -> None:
    shell = Shell(EVERY_MINUTE)
    assert not isinstance(shell.trigger("a", at(10)), str)
    shell.end("a")
    assert _starts(shell, 5) == ["a@60", "a@120", "a@180"]


def test_a_slot_skipped_for_overlap_is_not_counted() -> None:
    shell = Shell(EVERY_MINUTE)
    shell.wake(at(60))  # starts, and keeps running over the next slot
    skipped = shell.wake(at(120))
    assert any("overlap" in str(getattr(a, "decision", "")) for a in skipped)
    shell.end("a")
    assert shell.core.schedule.entries["a"].runs == 1
    started = [r.slot for r in shell.started]
    for m in (3, 4, 5, 6):
        shell.wake(at(60 * m))
        for run in list(shell.runs):
            shell.end(run.job)
    assert [r.slot for r in shell.started] == [*started, at(180), at(240)]


def test_a_claim_refused_as_done_ends_the_job() -> None:
    shell = Shell(EVERY_MINUTE)
    shell.wake(at(60), refused={("a", at(60)): "done"})
    assert shell.started == []
    assert shell.core.schedule.entries["a"].next_fire is None
    assert _starts(shell, 4) == []


def test_an_at_only_job_runs_each_instant_once_then_is_done() -> None:
    text = "jobs:\n  once:\n    at: [2026-03-01T12:02:00Z, 2026-03-01T12:01:00Z]\n    command: x\n"
    shell = Shell(text)
    shell.core = Core()
    shell.core.load(shell.jobs, T0, None)
    started = []
    for m in range(1, 6):
        shell.wake(at(60 * m))
        started += [r.slot for r in shell.runs]
        for run in list(shell.runs):
            shell.end(run.job)
    assert started == [at(60), at(120)]
    assert shell.core.schedule.entries["once"].next_fire is None
