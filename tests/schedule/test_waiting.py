"""`overlap: queue` and `catchup: all` in the scheduling core (docs/schedules.md), as
tables of wakes: the shell (tests/schedule/shell.py) drives the core as the loop does."""

from __future__ import annotations

from datetime import timedelta

from crond.config import loader
from crond.schedule.actions import Queued, Start, Tell
from crond.schedule.core import Core
from tests.schedule.shell import T0, Shell, at, render

QUEUE = "jobs:\n  q: {every: 60s, grace: 90s, overlap: queue, command: x}\n"


def _lines(actions: list) -> list[str]:  # type: ignore[type-arg]
    return [render(a) for a in actions if not render(a).startswith("moved")]


def test_a_fire_while_a_run_goes_waits_and_starts_when_it_ends() -> None:
    shell = Shell(QUEUE)
    assert _lines(shell.wake(at(60))) == ["start q@60"]
    assert _lines(shell.wake(at(120))) == ["queued q@120 (1)"]
    shell.end("q")
    assert _lines(shell.wake(at(150))) == ["start q@120"]  # the loop wakes at the end


def test_a_second_fire_while_one_waits_is_skipped_for_overlap() -> None:
    shell = Shell(QUEUE)
    shell.wake(at(60))
    shell.wake(at(120))
    assert _lines(shell.wake(at(180))) == ["tell q: skip@180 overlap"]
    shell.end("q")
    assert _lines(shell.wake(at(190))) == ["start q@120"]
    # the next fire waits behind the run of 120
    assert _lines(shell.wake(at(240))) == ["queued q@240 (1)"]


def test_a_waiting_run_is_missed_when_its_grace_runs_out() -> None:
    shell = Shell(QUEUE)
    shell.wake(at(60))
    shell.wake(at(120))
    assert shell.core.wake_at(timedelta(0)) == at(180)  # the next fire comes first
    shell.wake(at(180))  # skipped: one waits
    assert shell.core.wake_at(timedelta(0)) == at(210) + timedelta(microseconds=1)
    assert _lines(shell.wake(at(210.5))) == ["tell q: missed 1 120..120 queue"]
    shell.end("q")
    assert _lines(shell.wake(at(211))) == []


def test_a_trigger_of_a_queue_job_with_a_run_going_is_refused() -> None:
    shell = Shell(QUEUE)
    shell.wake(at(60))
    assert shell.trigger("q", at(70)) == "q has a run going and overlap: queue"


HOURLY_ALL = "jobs:\n  h: {cron: '0 * * * *', catchup: all, catchup_window: 1d, command: x}\n"


def _restarted(text: str, cursor_hours: float, now_hours: float) -> Shell:
    """A daemon started at `now_hours` whose store kept the cursor at `cursor_hours`."""
    shell = Shell(text)
    shell.core = Core()
    shell.core.load(
        shell.jobs,
        T0 + timedelta(hours=now_hours),
        {name: T0 + timedelta(hours=cursor_hours) for name in shell.jobs},
    )
    return shell


def test_catchup_all_runs_every_missed_hour_oldest_first_one_at_a_time() -> None:
    shell = _restarted(HOURLY_ALL, 0, 3.5)  # down from 12:00 to 15:30
    first = shell.wake(at(3.5 * 3600))
    tells = [a for a in first if isinstance(a, Tell)]
    assert [t.decision.caught_up for t in tells] == [3]
    assert _lines(first)[-1] == f"start h@{3600}"
    shell.end("h")
    assert _lines(shell.wake(at(3.5 * 3600 + 10))) == [f"start h@{7200}"]
    assert _lines(shell.wake(at(3.5 * 3600 + 11))) == []  # one at a time
    shell.end("h")
    assert _lines(shell.wake(at(3.5 * 3600 + 20))) == [f"start h@{10800}"]
    shell.end("h")
    assert _lines(shell.wake(at(3.5 * 3600 + 30))) == []
    assert [r.slot for r in shell.started] == [at(3600), at(7200), at(10800)]


def test_catchup_all_keeps_the_newest_catchup_max_and_misses_the_window() -> None:
    text = (
        "jobs:\n  h: {cron: '0 * * * *', catchup: all, catchup_window: 5h, catchup_max: 2,"
        " command: x}\n"
    )
    shell = _restarted(text, 0, 10.5)
    actions = shell.wake(at(10.5 * 3600))
    lines = _lines(actions)
    # 01..05 are older than the window (not even counted, as for `catchup: latest`);
    # of 06..10, the newest 2 run, 06..08 are missed
    assert lines[0] == f"tell h: missed 3 {6 * 3600}..{8 * 3600} grace, caught up 2 for {9 * 3600}"
    assert lines[1] == f"start h@{9 * 3600}"
    shell.end("h")
    assert _lines(shell.wake(at(10.5 * 3600 + 5))) == [f"start h@{10 * 3600}"]


def test_a_new_fire_during_a_catch_up_waits_behind_it() -> None:
    shell = _restarted(HOURLY_ALL, 0, 2.99)
    shell.wake(at(2.99 * 3600))  # 13:00 starts, 14:00 waits
    assert [r.slot for r in shell.runs] == [at(3600)]
    got = shell.wake(at(3 * 3600))  # 15:00 falls due while 13:00 still runs
    assert not any(isinstance(a, Start | Queued) for a in got)
    for _ in range(3):
        shell.end("h")
        shell.wake(shell.now + timedelta(seconds=1))
    assert [r.slot for r in shell.started] == [at(3600), at(7200), at(10800)]


def _reloaded(shell: Shell, text: str) -> None:
    shell.jobs = dict(loader.loads(text).jobs)
    shell.core.load(shell.jobs, shell.now, None)


def test_a_reload_that_changes_a_catching_up_job_keeps_its_waiting_slots() -> None:
    # Fixing a job's command while it catches up must not lose the slots still to run.
    shell = _restarted(HOURLY_ALL, 0, 3.5)
    shell.wake(at(3.5 * 3600))  # 13:00 starts, 14:00 and 15:00 wait
    _reloaded(shell, HOURLY_ALL.replace("command: x", "command: y"))
    assert shell.core.backlog.slots("h") == [at(7200), at(10800)]
    for _ in range(2):
        shell.end("h")
        (start,) = [a for a in shell.wake(shell.now + timedelta(seconds=1)) if isinstance(a, Start)]
        assert start.job.settings.command == "y"  # the file's job now
    assert [r.slot for r in shell.started] == [at(3600), at(7200), at(10800)]


def test_a_reload_that_removes_a_catching_up_job_drops_its_waiting_slots() -> None:
    shell = _restarted(HOURLY_ALL, 0, 3.5)
    shell.wake(at(3.5 * 3600))
    _reloaded(shell, "jobs:\n  other: {cron: '0 0 1 1 *', command: x}\n")
    shell.end("h")
    assert _lines(shell.wake(shell.now + timedelta(seconds=1))) == []
    assert not shell.core.backlog
