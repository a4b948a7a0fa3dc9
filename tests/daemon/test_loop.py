"""The scheduling loop on a fake clock: days of schedule in milliseconds, no sleeping.

Runs here are stand-ins the test finishes by hand: this tests *when* the loop starts
runs, not how they run (test_runner.py and tests/e2e do that with real processes). The
last test is the exception: that the loop owns its runs' work, with a real process.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from structlog.typing import FilteringBoundLogger

from crond.clock import FakeClock
from crond.config import loader
from crond.config.loaded import LoadedJob
from crond.daemon.loop import Gate, Loop, Pending, RunHandle
from crond.run import runner
from crond.schedule.actions import Claims

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


class Events:
    """A logger that keeps (event, fields) pairs."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []

    def _add(self, event: str, **kw: Any) -> None:
        self.items.append((event, kw))

    info = warning = error = debug = _add

    def named(self, event: str) -> list[dict[str, Any]]:
        return [kw for name, kw in self.items if name == event]


DONE = runner.RunResult(runner.Outcome.SUCCESS, 0, 0.0, 1)


@dataclass(eq=False)
class FakeRun:
    job: str
    slot: datetime
    run_id: str
    launched_at: datetime
    done: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: bool = False

    async def drive(self) -> runner.RunResult:
        await self.done.wait()
        return DONE

    async def wait(self) -> runner.RunResult:
        await self.done.wait()
        return DONE

    def stop(self) -> None:
        self.stopped = True
        self.done.set()

    def kill(self) -> None:
        self.stop()


class FakeEffects:
    """The loop's Effects as a test sees them: runs are FakeRuns, and each hook a test may
    replace is a plain attribute (`prepare` and `dedupe` stand for the store's claims)."""

    def __init__(self, clock: FakeClock, runs: list[FakeRun]) -> None:
        self.clock = clock
        self.runs = runs
        self.finish_at_once = True
        self.beats: list[datetime] = []
        self.saved: list[tuple[str, datetime]] = []
        self.prepare: Callable[[list[tuple[LoadedJob, datetime]], datetime], Any] | None = None
        self.dedupe: Callable[[list[tuple[str, datetime]]], Collection[Any]] | None = None
        self.on_resumed: Callable[[str, int], None] | None = None
        # (Any: a test may launch real runs through it too)
        self.launch: Callable[[LoadedJob, datetime, Gate | None], Any] = self._launch

    def _launch(self, job: LoadedJob, slot: datetime, gate: Gate | None = None) -> FakeRun:
        if gate is not None:  # as the runner does, just before its spawn
            gate()
        run = FakeRun(job.name, slot, f"r{len(self.runs)}", self.clock.now())
        self.runs.append(run)
        if self.finish_at_once:
            run.done.set()
        return run

    async def claim(
        self,
        starts: Sequence[tuple[LoadedJob, datetime]],
        told: Sequence[Any],
        at: datetime,
        **_: object,
    ) -> Claims:
        refused = (self.prepare(list(starts), at) or {}) if starts and self.prepare else {}
        quiet = self.dedupe(list(told)) if told and self.dedupe else ()
        return Claims(refused, quiet)

    def beat(self, now: datetime) -> None:
        self.beats.append(now)

    def decided(self, job: LoadedJob, decision: object) -> None:
        pass

    def run_started(self, job: LoadedJob, run: RunHandle) -> None:
        pass

    def run_ended(self, job: LoadedJob, run: RunHandle, result: runner.RunResult) -> None:
        pass

    def resumed(self, job: str, skipped: int) -> None:
        if self.on_resumed is not None:
            self.on_resumed(job, skipped)

    def moved(self, entries: list[Any], cursors: list[tuple[str, datetime]]) -> None:
        self.saved.extend(cursors)


@dataclass
class Harness:
    clock: FakeClock
    loop: Loop[Any]
    events: Events
    runs: list[FakeRun]
    effects: FakeEffects

    @property
    def finish_at_once(self) -> bool:
        return self.effects.finish_at_once

    @finish_at_once.setter
    def finish_at_once(self, value: bool) -> None:
        self.effects.finish_at_once = value

    @property
    def saved(self) -> list[tuple[str, datetime]]:
        return self.effects.saved

    async def settle(self) -> None:
        """Let the loop and the tasks it started run until the loop sleeps again."""
        for i in range(200):
            await asyncio.sleep(0)
            wake = self.clock.next_wake()
            if i >= 10 and wake is not None and wake > self.clock.now():
                return
        raise AssertionError("the loop did not go back to sleep")

    async def run_until(self, when: datetime) -> None:
        """Move time forward wake by wake, as a real clock would, up to `when`."""
        await self.settle()
        while True:
            wake = self.clock.next_wake()
            assert wake is not None
            if wake > when:
                self.clock.set(when)
                await self.settle()
                return
            self.clock.set(wake)
            await self.settle()

    def starts(self, job: str | None = None) -> list[datetime]:
        return [r.slot for r in self.runs if job is None or r.job == job]


def jobs(text: str) -> dict[str, LoadedJob]:
    return dict(loader.loads(text).jobs)


@asynccontextmanager
async def harness(
    text: str,
    *,
    start: datetime = T0,
    heartbeat: float = 10.0,
    finish_at_once: bool = True,
    resume: dict[str, datetime] | None = None,
    lead: timedelta = timedelta(0),
) -> AsyncIterator[Harness]:
    clock = FakeClock(start, lead)
    events = Events()
    runs: list[FakeRun] = []
    effects = FakeEffects(clock, runs)
    effects.finish_at_once = finish_at_once
    log = cast(FilteringBoundLogger, events)
    loop = Loop(clock=clock, log=log, effects=effects, heartbeat=timedelta(seconds=heartbeat))
    h = Harness(clock, loop, events, runs, effects)
    loop.load(jobs(text), resume=resume)
    task = asyncio.create_task(loop.run())
    try:
        yield h
    finally:
        loop.stop()
        for run in runs:
            run.done.set()
        clock.advance(timedelta(days=1))
        await asyncio.wait_for(task, 5)


async def test_three_days_of_hourly_and_minutely_jobs() -> None:
    text = "jobs:\n  h: {cron: '0 * * * *', command: x}\n  m: {every: 1m, command: x}\n"
    async with harness(text, heartbeat=3600) as h:
        await h.run_until(T0 + timedelta(days=3))
        hourly = h.starts("h")
        assert hourly == [T0 + timedelta(hours=i) for i in range(1, 73)]
        assert h.starts("m") == [T0 + timedelta(minutes=i) for i in range(1, 3 * 24 * 60 + 1)]
        assert h.events.named("job.missed") == []


async def test_nothing_fires_for_slots_before_start() -> None:
    start = T0 + timedelta(seconds=30)
    async with harness("jobs:\n  m: {every: 1m, command: x}\n", start=start) as h:
        await h.run_until(T0 + timedelta(minutes=2, seconds=1))
        assert h.starts() == [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]


async def test_clock_step_back_never_runs_a_slot_twice() -> None:
    async with harness("jobs:\n  m: {every: 1m, command: x}\n") as h:
        await h.run_until(T0 + timedelta(minutes=10, seconds=1))
        h.clock.set(T0 + timedelta(minutes=2))  # an NTP step back of eight minutes
        await h.settle()
        await h.run_until(T0 + timedelta(minutes=13, seconds=1))
        assert h.starts() == [T0 + timedelta(minutes=i) for i in range(1, 14)]


async def test_suspend_runs_one_slot_and_logs_one_missed_event() -> None:
    text = "jobs:\n  s: {every: 1s, grace: 5s, command: x}\n"
    async with harness(text, heartbeat=1) as h:
        await h.run_until(T0 + timedelta(seconds=3))
        h.clock.set(T0 + timedelta(hours=1, seconds=3, milliseconds=200))  # resume
        await h.settle()
        assert h.starts()[-1] == T0 + timedelta(hours=1, seconds=3)
        missed = h.events.named("job.missed")
        assert len(missed) == 1
        assert missed[0]["count"] == 3599
        assert missed[0]["first_slot"] == "2026-03-01T12:00:04Z"
        assert missed[0]["last_slot"] == "2026-03-01T13:00:02Z"


async def test_overlap_skip_logs_skipped_while_running() -> None:
    text = "jobs:\n  o: {every: 1m, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        await h.run_until(T0 + timedelta(minutes=3, seconds=1))
        assert h.starts() == [T0 + timedelta(minutes=1)]
        skipped = h.events.named("job.skipped")
        assert [s["slot"] for s in skipped] == ["2026-03-01T12:02:00Z", "2026-03-01T12:03:00Z"]
        assert {s["reason"] for s in skipped} == {"overlap"}
        h.runs[0].done.set()
        await h.run_until(T0 + timedelta(minutes=4, seconds=1))
        assert h.starts()[-1] == T0 + timedelta(minutes=4)


async def test_overlap_replace_stops_the_old_run_first() -> None:
    text = "jobs:\n  r: {every: 1m, overlap: replace, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        await h.run_until(T0 + timedelta(minutes=2, seconds=1))
        assert h.runs[0].stopped
        assert h.starts() == [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]


async def test_overlap_allow_runs_side_by_side() -> None:
    text = "jobs:\n  a: {every: 1m, overlap: allow, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        await h.run_until(T0 + timedelta(minutes=3, seconds=1))
        assert len(h.starts()) == 3
        assert h.loop.going.count() == 3


async def test_disabled_job_never_fires() -> None:
    async with harness("jobs:\n  d: {every: 1m, enabled: false, command: x}\n") as h:
        await h.run_until(T0 + timedelta(hours=1))
        assert h.starts() == []


async def test_reload_keeps_unchanged_state_and_adds_without_backfill() -> None:
    text = "jobs:\n  keep: {every: 1m, command: x}\n  change: {every: 1m, command: x}\n"
    async with harness(text) as h:
        await h.run_until(T0 + timedelta(minutes=2, seconds=30))
        keep_entry = h.loop.core.schedule.entries["keep"]
        diff = h.loop.load(
            jobs(
                "jobs:\n  keep: {every: 1m, command: x}\n  change: {every: 2m, command: y}\n"
                "  new: {every: 1m, command: z}\n"
            )
        )
        assert (diff.added, diff.removed, diff.changed) == (["new"], [], ["change"])
        assert h.loop.core.schedule.entries["keep"] is keep_entry
        await h.run_until(T0 + timedelta(minutes=4, seconds=1))
        assert h.starts("new") == [T0 + timedelta(minutes=3), T0 + timedelta(minutes=4)]
        assert h.starts("change")[-1] == T0 + timedelta(minutes=4)
        diff = h.loop.load(jobs("jobs:\n  keep: {every: 1m, command: x}\n"))
        assert sorted(diff.removed) == ["change", "new"]


async def test_heartbeat_called_each_heartbeat_even_with_nothing_due() -> None:
    beats: list[datetime] = []
    async with harness("jobs:\n  y: {cron: '0 0 1 1 *', command: x}\n", heartbeat=10) as h:
        h.effects.beats = beats
        await h.run_until(T0 + timedelta(minutes=1))
        assert 5 <= len(beats) <= 7


@pytest.mark.parametrize("zone", ["America/New_York", "Europe/London"])
async def test_dst_night_fixed_time_job_fires_once(zone: str) -> None:
    start = datetime(2026, 10, 31, 12, tzinfo=UTC)
    text = f"jobs:\n  f: {{cron: '30 1 * * *', timezone: {zone}, command: x}}\n"
    async with harness(text, start=start, heartbeat=3600) as h:
        await h.run_until(start + timedelta(days=8))
        days = [s.date() for s in h.starts()]
        assert len(days) == len(set(days)) == 8


# --- restarts: the cursors a previous daemon left (the state store) ------------------------

CATCHUP = "jobs:\n  r: {cron: '0 6 * * *', catchup: latest, command: x}\n"


async def test_a_month_of_downtime_gives_one_catch_up_run() -> None:
    """Down from March 1st to April 1st 09:00: the daily 06:00 slots of the whole month
    give one run, of April 1st 06:00. Slots older than the 1d window are neither run nor
    counted: `skipped` is 0."""
    restart = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
    # An hour's heartbeat: the day's 8,640 wakes of a 10 s one check nothing here.
    async with harness(CATCHUP, start=restart, resume={"r": T0}, heartbeat=3600) as h:
        await h.run_until(restart + timedelta(hours=1))
        assert h.starts() == [datetime(2026, 4, 1, 6, 0, tzinfo=UTC)]
        assert h.events.named("job.caught_up") == [
            {"job": "r", "slot": "2026-04-01T06:00:00Z", "skipped": 0}
        ]
        assert h.events.named("job.missed") == []
        await h.run_until(restart + timedelta(days=1))
        assert h.starts()[1:] == [datetime(2026, 4, 2, 6, 0, tzinfo=UTC)]


async def test_catch_up_is_bounded_by_its_window() -> None:
    text = "jobs:\n  r: {cron: '0 6 * * *', catchup: latest, catchup_window: 2h, command: x}\n"
    restart = datetime(2026, 3, 4, 9, 0, tzinfo=UTC)  # 06:00 was 3 h ago: too old
    async with harness(text, start=restart, resume={"r": T0}) as h:
        await h.run_until(restart + timedelta(hours=1))
        assert h.starts() == []
        assert h.events.named("job.caught_up") == []
        assert h.events.named("job.missed") == []  # older than the window: not even counted


async def test_a_week_of_missed_minutely_slots_is_counted_quickly() -> None:
    """A minutely cron job with a 7d window after a year down: only the week is walked."""
    text = (
        "jobs:\n  m: {cron: '* * * * *', grace: 5s, catchup: latest, catchup_window: 7d, "
        "command: x}\n"
    )
    restart = T0 + timedelta(days=365, seconds=30)
    async with harness(text, start=restart, resume={"m": T0}) as h:
        await h.settle()
        assert h.starts() == [T0 + timedelta(days=365)]
        (caught,) = h.events.named("job.caught_up")
        assert caught["skipped"] == 7 * 24 * 60 - 1  # the week's slots but the one run


async def test_overlap_skipped_catch_up_saves_the_cursor() -> None:
    text = "jobs:\n  r: {every: 1h, grace: 5s, catchup: latest, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        await h.run_until(T0 + timedelta(hours=1))
        assert len(h.starts()) == 1  # still running
        h.clock.set(T0 + timedelta(hours=2, minutes=10))  # a suspend, the run still going
        await h.settle()
        assert h.events.named("job.skipped")[0]["slot"] == "2026-03-01T14:00:00Z"
        assert h.saved == [("r", T0 + timedelta(hours=2, minutes=10))]


async def test_ten_thousand_missed_interval_slots_give_one_run() -> None:
    text = "jobs:\n  s: {every: 10s, grace: 1s, catchup: latest, catchup_window: 7d, command: x}\n"
    restart = T0 + timedelta(days=3, seconds=5)  # 25,921 slots of ten seconds, the last 5 s ago
    async with harness(text, start=restart, resume={"s": T0}) as h:
        await h.settle()
        assert h.starts() == [T0 + timedelta(days=3)]
        assert h.events.named("job.caught_up") == [
            {"job": "s", "slot": "2026-03-04T12:00:00Z", "skipped": 25_919}
        ]
        assert h.events.named("job.missed") == []


async def test_without_catchup_a_restart_starts_from_now() -> None:
    text = "jobs:\n  r: {cron: '0 6 * * *', command: x}\n"
    restart = datetime(2026, 3, 4, 6, 0, 30, tzinfo=UTC)  # 30 s after a slot, within grace
    async with harness(text, start=restart, resume={"r": T0}) as h:
        await h.run_until(restart + timedelta(hours=1))
        assert h.starts() == []  # nothing runs for slots before the start (R9)
        assert h.events.named("job.missed") == []


async def test_clock_back_across_a_restart_never_reruns_a_slot() -> None:
    """The previous daemon ran 06:00 (its cursor says so); this one starts with the clock
    10 minutes earlier. 06:00 comes again on this clock: it is not run again."""
    for text in (CATCHUP, "jobs:\n  r: {cron: '0 6 * * *', command: x}\n"):
        ran = datetime(2026, 3, 2, 6, 0, 1, tzinfo=UTC)
        async with harness(text, start=ran - timedelta(minutes=10), resume={"r": ran}) as h:
            await h.run_until(ran + timedelta(hours=1))
            assert h.starts() == []


async def test_a_stall_beyond_grace_is_caught_up_once() -> None:
    text = "jobs:\n  r: {every: 1m, grace: 10s, catchup: latest, command: x}\n"
    async with harness(text, heartbeat=3600) as h:
        await h.run_until(T0 + timedelta(minutes=2))
        assert len(h.starts()) == 2
        h.clock.set(T0 + timedelta(minutes=30, seconds=40))  # a suspend: 28 slots late
        await h.settle()
        assert h.starts()[-1] == T0 + timedelta(minutes=30)
        assert h.events.named("job.caught_up") == [
            {"job": "r", "slot": "2026-03-01T12:30:00Z", "skipped": 27}
        ]


async def test_start_soon_runs_a_job_once_outside_its_schedule() -> None:
    text = "jobs:\n  b: {cron: '@reboot', command: x}\n"
    # An hour's heartbeat: the 10 s one woke the loop 17,280 times over the two days
    # (1 to 4 s of CPU), and the job's schedule never wakes it: nothing more is checked.
    async with harness(text, heartbeat=3600) as h:
        h.loop.start_soon(jobs(text)["b"], T0)
        await h.run_until(T0 + timedelta(days=2))
        assert h.starts() == [T0]  # and never again by schedule


async def test_a_wake_prepares_all_its_starts_before_launching_any() -> None:
    text = "".join(f"  j{i}: {{every: 1m, command: x}}\n" for i in range(5))
    async with harness("jobs:\n" + text) as h:
        order: list[object] = []
        launch = h.effects.launch
        h.effects.prepare = lambda starts, _at: order.append(sorted(job.name for job, _ in starts))

        def logged(job: LoadedJob, slot: datetime, gate: Gate | None = None) -> FakeRun:
            order.append(job.name)
            run: FakeRun = launch(job, slot, gate)
            return run

        h.effects.launch = logged
        await h.run_until(T0 + timedelta(minutes=1))
        assert order[0] == [f"j{i}" for i in range(5)]
        assert sorted(order[1:]) == [f"j{i}" for i in range(5)]  # type: ignore[type-var]


async def test_the_loop_gets_ready_before_a_slot_and_spawns_at_it() -> None:
    """With a lead (the real clock's), the loop wakes that much before a slot, plans and
    prepares its starts then, and launches them at the slot itself, never before."""
    lead = timedelta(milliseconds=2)
    text = "jobs:\n  a: {every: 1m, command: x}\n  b: {cron: '*/2 * * * *', command: x}\n"
    async with harness(text, lead=lead) as h:
        prepared: list[tuple[list[str], datetime, datetime]] = []
        h.effects.prepare = lambda starts, at: prepared.append(
            (sorted(job.name for job, _ in starts), at, h.clock.now())
        )
        await h.run_until(T0 + timedelta(minutes=4, seconds=30))
        slots = [T0 + timedelta(minutes=m) for m in range(1, 5)]
        assert prepared == [
            (["a", "b"] if slot.minute % 2 == 0 else ["a"], slot, slot - lead) for slot in slots
        ]
        assert [(r.slot, r.launched_at) for r in h.runs] == [
            (r.slot, r.slot)
            for r in h.runs  # launched at the slot, not when prepared
        ]
        assert sorted(h.starts("a")) == slots


async def test_slots_of_different_jobs_within_the_lead_each_start_at_their_own() -> None:
    """Jittered jobs due a few hundred microseconds apart, all within one lead: the wake
    takes them together, and each is launched at (not before) its own slot."""
    text = "".join(f"  j{i}: {{every: 1m, jitter: 2s, command: x}}\n" for i in range(60))
    async with harness("jobs:\n" + text, lead=timedelta(milliseconds=2)) as h:
        await h.run_until(T0 + timedelta(minutes=2))
        assert len(h.runs) >= 60
        assert all(run.launched_at >= run.slot for run in h.runs)
        close = [
            (a, b)
            for a in h.runs
            for b in h.runs
            if a.slot < b.slot < a.slot + timedelta(milliseconds=2)
        ]
        assert close  # some slots fell within one lead of another (else this proves nothing)
        assert all(run.launched_at - run.slot < timedelta(milliseconds=2) for run in h.runs)


async def test_with_a_lead_nothing_of_a_slot_is_logged_or_stopped_before_it() -> None:
    """A skip, or a replacement, decided in the lead: its event is logged, and the run it
    replaces stopped, at the slot, not when it was decided."""
    text = "jobs:\n  s: {every: 1m, command: x}\n  r: {every: 1m, overlap: replace, command: x}\n"
    async with harness(text, lead=timedelta(milliseconds=2), finish_at_once=False) as h:
        await h.run_until(T0 + timedelta(minutes=1, seconds=30))
        assert len(h.runs) == 2  # both started at minute 1; neither ends
        at: list[tuple[str, datetime]] = []
        record = h.events.warning

        def warning(event: str, **kw: Any) -> None:
            at.append((event, h.clock.now()))
            record(event, **kw)

        def stopper(run: FakeRun) -> Callable[[], None]:
            stop = run.stop

            def stopped() -> None:
                at.append(("stopped", h.clock.now()))
                stop()

            return stopped

        h.events.warning = warning  # type: ignore[method-assign]
        for run in h.runs:
            run.stop = stopper(run)  # type: ignore[method-assign]
        await h.run_until(T0 + timedelta(minutes=2, seconds=30))
        slot = T0 + timedelta(minutes=2)
        assert sorted(name for name, _ in at) == ["job.skipped", "stopped"]
        assert all(when >= slot for _, when in at), at


# --- who owns a run's work: the loop, with real processes ------------------------------


class RunLog(Events):
    """Events, with what the real runner asks of a logger, and the first output seen."""

    def __init__(self) -> None:
        super().__init__()
        self.output = asyncio.Event()

    def bind(self, **_: Any) -> RunLog:
        return self

    def info(self, event: str, **kw: Any) -> None:
        self._add(event, **kw)
        if event == "job.output":
            self.output.set()


async def test_no_run_outlives_the_loop_a_cancelled_loop_kills_and_reaps_its_runs() -> None:
    """Each run's work is a task of the loop's TaskGroup: when the loop's own task is
    cancelled under a running job (the daemon torn down), the job's group is killed and
    its process reaped before `Loop.run` ends, and no task of it is left behind."""
    text = "jobs:\n  long: {every: 1h, command: 'echo ready; exec sleep 300'}\n"
    clock, log = FakeClock(T0), RunLog()
    logger = cast(FilteringBoundLogger, log)
    runs: list[runner.Run] = []

    def launch(job: LoadedJob, slot: datetime, gate: Gate | None = None) -> runner.Run:
        run = runner.Run(runner.spec_for(job), slot, clock=clock, log=logger, gate=gate)
        runs.append(run)
        return run

    effects = FakeEffects(clock, [])
    effects.launch = launch
    loop = Loop(clock=clock, log=logger, effects=effects, heartbeat=timedelta(seconds=10))
    serving = asyncio.create_task(loop.run())
    loop.start_soon(jobs(text)["long"], T0)
    await asyncio.wait_for(log.output.wait(), 20)
    pid = runs[0].pid
    assert pid is not None
    assert loop.going.count() == 1
    serving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await serving
    assert asyncio.all_tasks() == {asyncio.current_task()}
    with pytest.raises(ChildProcessError):  # reaped already
        os.waitpid(pid, os.WNOHANG)
    assert pid not in runner.owned_pids()
    assert loop.running == {}
    assert log.named("job.finished") == []  # cut short, not finished


# --- steering: pause, resume, trigger, kill; max_running -------------------------------

MINUTELY = "jobs:\n  m: {every: 1m, command: x}\n"


async def test_a_paused_job_starts_nothing_and_resume_counts_its_slots() -> None:
    async with harness(MINUTELY) as h:
        await h.run_until(T0 + timedelta(minutes=1, seconds=30))
        h.loop.pause("m", None)
        assert h.loop.core.pauses.listing() == {"m": None}
        await h.run_until(T0 + timedelta(minutes=6, seconds=30))
        assert h.starts() == [T0 + timedelta(minutes=1)]
        assert h.events.named("job.missed") == h.events.named("job.skipped") == []
        assert h.loop.resume("m") == 5  # minutes 2 to 6
        assert h.loop.resume("m") is None  # not paused any more
        assert h.loop.core.pauses.listing() == {}
        await h.run_until(T0 + timedelta(minutes=8, seconds=30))
        assert h.starts()[1:] == [T0 + timedelta(minutes=7), T0 + timedelta(minutes=8)]


async def test_a_pause_ends_by_itself_exactly_at_its_end_without_polling() -> None:
    """A job that fires once a year and an hour's heartbeat: nothing else would wake the
    loop, yet the pause's end does, at that instant."""
    text = "jobs:\n  y: {cron: '0 0 1 1 *', command: x}\n"
    async with harness(text, heartbeat=3600) as h:
        resumed: list[tuple[str, int, datetime]] = []
        h.effects.on_resumed = lambda name, n: resumed.append((name, n, h.clock.now()))
        until = T0 + timedelta(seconds=7, milliseconds=250)
        h.loop.pause("y", until)
        await h.settle()
        assert h.clock.next_wake() == until
        await h.run_until(T0 + timedelta(minutes=30))
        assert resumed == [("y", 0, until)]
        assert h.loop.core.pauses.listing() == {}


async def test_pausing_again_replaces_the_end_and_keeps_the_count() -> None:
    async with harness(MINUTELY) as h:
        resumed: list[tuple[str, int, datetime]] = []
        h.effects.on_resumed = lambda name, n: resumed.append((name, n, h.clock.now()))
        h.loop.pause("m", T0 + timedelta(minutes=2, seconds=30))
        await h.run_until(T0 + timedelta(minutes=2, seconds=10))
        h.loop.pause("m", T0 + timedelta(minutes=4, seconds=30))
        await h.run_until(T0 + timedelta(minutes=5, seconds=30))
        assert resumed == [("m", 4, T0 + timedelta(minutes=4, seconds=30))]
        assert h.starts() == [T0 + timedelta(minutes=5)]


async def test_a_slot_at_the_pause_end_runs() -> None:
    async with harness(MINUTELY) as h:
        resumed: list[tuple[str, int]] = []
        h.effects.on_resumed = lambda name, n: resumed.append((name, n))
        h.loop.pause("m", T0 + timedelta(minutes=3))
        await h.run_until(T0 + timedelta(minutes=3, seconds=30))
        assert h.starts() == [T0 + timedelta(minutes=3)]
        assert resumed == [("m", 2)]


async def test_a_suspend_through_a_pause_end_counts_the_paused_slots_only() -> None:
    """The loop sleeps through the end (a suspend): the slots before it are passed over,
    those after it are R9's (the latest runs, the others are missed)."""
    text = "jobs:\n  m: {every: 1m, grace: 5m, command: x}\n"
    async with harness(text) as h:
        resumed: list[tuple[str, int]] = []
        h.effects.on_resumed = lambda name, n: resumed.append((name, n))
        h.loop.pause("m", T0 + timedelta(minutes=2, seconds=30))
        await h.settle()
        h.clock.set(T0 + timedelta(minutes=5, seconds=10))
        await h.settle()
        assert resumed == [("m", 2)]  # minutes 1 and 2
        assert h.starts() == [T0 + timedelta(minutes=5)]
        (missed,) = h.events.named("job.missed")
        assert (missed["count"], missed["first_slot"]) == (2, "2026-03-01T12:03:00Z")


async def test_a_paused_catch_up_job_makes_nothing_up_after_the_resume() -> None:
    text = "jobs:\n  c: {every: 1m, grace: 5s, catchup: latest, command: x}\n"
    async with harness(text) as h:
        h.loop.pause("c", None)
        await h.run_until(T0 + timedelta(minutes=3, seconds=30))
        assert h.loop.resume("c") == 3
        await h.run_until(T0 + timedelta(minutes=3, seconds=50))
        assert h.starts() == []
        assert h.events.named("job.caught_up") == []
        assert ("c", T0 + timedelta(minutes=3)) in h.saved  # the store hears the cursor moved
        await h.run_until(T0 + timedelta(minutes=4, seconds=1))
        assert h.starts() == [T0 + timedelta(minutes=4)]


async def test_a_pause_outlives_a_reload_even_of_a_job_removed_and_added_again() -> None:
    async with harness(MINUTELY) as h:
        h.loop.pause("m", None)
        h.loop.pause("gone", None)  # a job not in the file: kept, harmless
        await h.run_until(T0 + timedelta(minutes=1, seconds=30))
        h.loop.load(jobs("jobs:\n  other: {every: 1h, command: x}\n"))
        await h.run_until(T0 + timedelta(minutes=2, seconds=30))
        h.loop.load(jobs(MINUTELY))
        await h.run_until(T0 + timedelta(minutes=4, seconds=30))
        assert h.starts() == []
        assert h.loop.core.pauses.listing() == {"m": None, "gone": None}
        assert h.loop.resume("m") == 3  # minutes 1, 3 and 4 (2 it was not in the file)


async def test_trigger_starts_a_run_now_also_for_a_paused_or_disabled_job() -> None:
    text = "jobs:\n  m: {every: 1h, command: x}\n  d: {every: 1m, enabled: false, command: x}\n"
    async with harness(text) as h:
        prepared: list[tuple[list[str], datetime]] = []
        h.effects.prepare = lambda starts, at: prepared.append(([j.name for j, _ in starts], at))
        await h.run_until(T0 + timedelta(seconds=12))
        h.loop.pause("m", None)
        run = await h.loop.trigger("m")
        assert isinstance(run, FakeRun)
        assert (run.job, run.slot) == ("m", T0 + timedelta(seconds=12))
        assert prepared == [(["m"], T0 + timedelta(seconds=12))]  # recorded as any start
        disabled = await h.loop.trigger("d")
        assert isinstance(disabled, FakeRun)
        assert disabled.slot == T0 + timedelta(seconds=12)
        assert await h.loop.trigger("nope") == 'there is no job "nope"'


async def test_trigger_follows_the_jobs_overlap() -> None:
    text = (
        "jobs:\n  s: {every: 1h, command: x}\n  a: {every: 1h, overlap: allow, command: x}\n"
        "  r: {every: 1h, overlap: replace, command: x}\n"
    )
    async with harness(text, finish_at_once=False) as h:
        await h.settle()
        first = await h.loop.trigger("s")
        assert isinstance(first, FakeRun)
        assert await h.loop.trigger("s") == "s has a run going and overlap: skip"
        assert isinstance(await h.loop.trigger("a"), FakeRun)
        assert isinstance(await h.loop.trigger("a"), FakeRun)
        assert h.loop.going.count() == 3
        old = await h.loop.trigger("r")
        assert isinstance(old, FakeRun)
        h.clock.advance(timedelta(seconds=5))
        pending = await h.loop.trigger("r")
        assert isinstance(pending, Pending)
        assert old.stopped  # stopped first ...
        new = await asyncio.wait_for(pending.started(), 5)
        assert isinstance(new, FakeRun)  # ... then started, for now
        assert (new.slot, pending.run_id) == (T0 + timedelta(seconds=5), new.run_id)
        assert h.loop.running["r"] == [new]


async def test_trigger_is_refused_while_the_daemon_stops() -> None:
    async with harness(MINUTELY) as h:
        await h.settle()
        h.loop.stop()
        assert await h.loop.trigger("m") == "the daemon is stopping"


async def test_kill_stops_a_jobs_runs_or_one_run_by_its_id() -> None:
    text = "jobs:\n  a: {every: 1m, overlap: allow, command: x}\n  b: {every: 1h, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        await h.run_until(T0 + timedelta(minutes=2, seconds=1))
        assert [r.job for r in h.runs] == ["a", "a"]
        assert h.loop.kill("b") == []  # nothing running
        one = h.loop.kill(h.runs[1].run_id)
        assert one == [h.runs[1]]
        assert [r.stopped for r in h.runs] == [False, True]
        await h.settle()
        assert h.loop.kill("a") == [h.runs[0]]
        assert h.runs[0].stopped
        await h.settle()
        assert h.loop.running == {}


async def test_a_jobs_max_running_skips_fires_beyond_it() -> None:
    text = "jobs:\n  a: {every: 1m, overlap: allow, max_running: 2, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        await h.run_until(T0 + timedelta(minutes=4, seconds=1))
        assert h.starts() == [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]
        skipped = h.events.named("job.skipped")
        assert [(s["slot"], s["reason"]) for s in skipped] == [
            ("2026-03-01T12:03:00Z", "max_running"),
            ("2026-03-01T12:04:00Z", "max_running"),
        ]
        assert await h.loop.trigger("a") == "a's max_running (2) is reached: 2 going"
        h.runs[0].done.set()
        await h.run_until(T0 + timedelta(minutes=5, seconds=1))
        assert h.starts()[2:] == [T0 + timedelta(minutes=5)]


async def test_a_burst_beyond_the_daemons_max_running_waits_first_come_first_served() -> None:
    text = "jobs:\n" + "".join(f"  j{i}: {{every: 1h, grace: 1m, command: x}}\n" for i in range(4))
    async with harness(text, finish_at_once=False, heartbeat=3600) as h:
        h.loop.limit(2)
        await h.run_until(T0 + timedelta(hours=1))
        assert [r.job for r in h.runs] == ["j0", "j1"]
        queued = h.events.named("job.queued")
        slot = "2026-03-01T13:00:00Z"
        assert queued == [
            {"job": "j2", "slot": slot, "running": 2},
            {"job": "j3", "slot": slot, "running": 2},
        ]
        assert await h.loop.trigger("j0") == "j0 has a run going and overlap: skip"
        assert await h.loop.trigger("j2") == "j2 has a run going and overlap: skip"  # queued
        h.clock.advance(timedelta(seconds=20))
        h.runs[1].done.set()  # a place frees: the first queued run takes it
        await h.settle()
        assert [(r.job, r.slot, r.launched_at) for r in h.runs[2:]] == [
            ("j2", T0 + timedelta(hours=1), T0 + timedelta(hours=1, seconds=20))
        ]
        # j3 waits on; its grace runs out at 13:01, and the loop wakes for it by itself
        # (just after: at 13:01 itself it may still start, R9)
        assert h.clock.next_wake() == T0 + timedelta(hours=1, minutes=1, microseconds=1)
        await h.run_until(T0 + timedelta(hours=1, minutes=5))
        (missed,) = h.events.named("job.missed")
        assert missed == {
            "job": "j3",
            "count": 1,
            "first_slot": slot,
            "last_slot": slot,
            "reason": "queue",
        }
        assert len(h.runs) == 3


async def test_triggered_runs_count_toward_the_daemons_max_running() -> None:
    text = "jobs:\n  a: {every: 1m, command: x}\n  b: {every: 1h, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        h.loop.limit(1)
        await h.settle()
        assert isinstance(await h.loop.trigger("b"), FakeRun)
        assert await h.loop.trigger("a") == "the daemon's max_running (1) is reached: 1 going"
        await h.run_until(T0 + timedelta(minutes=1))
        assert [r.job for r in h.runs] == ["b"]
        assert h.events.named("job.queued") == [
            {"job": "a", "slot": "2026-03-01T12:01:00Z", "running": 1}
        ]
        h.loop.limit(None)  # a reload lifts the limit: the queued run starts
        await h.settle()
        assert [r.job for r in h.runs] == ["b", "a"]
