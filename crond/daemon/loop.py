"""The scheduling loop, thin around `crond.when.plan`: sleep, wake, plan, start runs.

The loop sleeps until the earliest next fire on the heap, never longer than one
heartbeat, and re-reads the clock after every wake. It calls `beat` once per heartbeat
(the liveness file and the systemd watchdog live there), so a stuck loop lets both go
stale. The work of every run it starts is a task of its TaskGroup (`Loop._start`): no
run outlives `Loop.run`, and one cancelled with it kills and reaps its processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc
from crond.config.loaded import LoadedJob
from crond.config.model import Catchup
from crond.when.plan import Decision, Entry, Schedule, make_entry, plan_entry
from crond.when.timing import Fire

_SECOND = timedelta(seconds=1)


class RunHandle(Protocol):
    """What the loop needs of a run (runner.Run is one)."""

    run_id: str

    async def drive(self) -> object:
        """The run's work, to its end: the loop awaits it once, in a task of its own."""
        ...

    async def wait(self) -> object:
        """The run's end, for others: cancelling the waiter does not cancel the run."""
        ...

    def stop(self) -> None: ...

    def kill(self) -> None: ...


# Called by a run just before it spawns its process (and by the loop before anything else
# it does for a slot): returns at the slot, not before (see Loop._tick).
Gate = Callable[[], None]


class Launch(Protocol):
    """Spawn a run of `job` for `slot` now (passing `gate` just before the spawn) and
    return it; its work is then the loop's to drive."""

    def __call__(self, job: LoadedJob, slot: datetime, gate: Gate | None = None) -> RunHandle: ...


class Watcher(Protocol):
    """Told what the loop decides and how its runs go (the daemon's notifiers and metrics:
    crond/daemon/telling.py). Called from the loop's thread; must be quick and never raise."""

    def decided(self, job: LoadedJob, decision: Decision) -> None:
        """A due slot's decision, after its events are logged (missed, skipped, ...)."""

    def run_started(self, job: LoadedJob, run: RunHandle) -> None:
        """A run is going: on the loop's turn after its spawn pass, not inside it."""

    def run_ended(self, job: LoadedJob, run: RunHandle, result: object) -> None:
        """A run has ended (its retries spent): `result` is what its `drive()` returned."""


@dataclass(frozen=True)
class ConfigDiff:
    added: list[str]
    removed: list[str]
    changed: list[str]


class Loop:
    def __init__(
        self,
        *,
        clock: Clock,
        log: FilteringBoundLogger,
        launch: Launch,
        heartbeat: timedelta,
        beat: Callable[[datetime], None] | None = None,
        after_tick: Callable[[list[Entry], list[tuple[str, datetime]]], None] | None = None,
        prepare: Callable[[list[tuple[LoadedJob, datetime]], datetime], None] | None = None,
        watcher: Watcher | None = None,
    ) -> None:
        self.clock = clock
        self.log = log
        self.launch = launch
        self.heartbeat = heartbeat
        self.beat = beat
        # Told after each wake that handled due entries: those entries (their next fires
        # moved), and the catch-up jobs' cursors that moved with no run started (the
        # runner records the others), so the next daemon does not take those for downtime.
        self.after_tick = after_tick
        # Told which (job, slot) a wake starts, and when (the instant they are spawned at),
        # before the first is launched: the daemon records them all in one commit.
        self.prepare = prepare
        self.watcher = watcher
        self.schedule = Schedule()
        self._soon: list[tuple[LoadedJob, datetime, Callable[[], None] | None]] = []
        self.running: dict[str, list[RunHandle]] = {}
        self._wake = asyncio.Event()
        self.idle = asyncio.Event()  # set while no run is going
        self.idle.set()
        self._stopping = False
        self._tasks: asyncio.TaskGroup | None = None

    # --- configuration --------------------------------------------------------------

    def load(
        self, jobs: Mapping[str, LoadedJob], resume: Mapping[str, datetime] | None = None
    ) -> ConfigDiff:
        """Swap in a new set of jobs. Unchanged jobs keep their state; changed jobs keep
        their cursor (no slot runs twice); running runs are never interrupted.

        `resume`: the cursors a previous daemon left (the state store). A new job's
        cursor is the later of now and its old one, so no slot runs twice across a
        restart, not even after the clock went back; a `catchup: latest` job starts from
        its old cursor instead, so the slots of the downtime fall due at the first wake.
        """
        now = self.clock.now()
        old = self.schedule.entries
        added = [name for name in jobs if name not in old]
        removed = [name for name in old if name not in jobs]
        changed = [name for name in jobs if name in old and old[name].job != jobs[name]]
        for name in removed:
            self.schedule.remove(name)
        for name in added:
            before = resume.get(name) if resume else None
            self.schedule.put(make_entry(jobs[name], _first_cursor(jobs[name], now, before)))
        for name in changed:
            cursor = max(old[name].cursor, now)
            self.schedule.remove(name)
            self.schedule.put(make_entry(jobs[name], cursor))
        self._wake.set()
        return ConfigDiff(added, removed, changed)

    # --- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule until `stop()`, then keep beating until every run has ended."""
        async with asyncio.TaskGroup() as tasks:
            self._tasks = tasks
            next_beat = self.clock.monotonic()
            # After stop() the loop keeps beating, starting nothing, until the runs end.
            while not (self._stopping and not self.running):
                now = self.clock.now()
                if not self._stopping:
                    self._tick(now)
                if self.clock.monotonic() >= next_beat:
                    if self.beat:
                        self.beat(now)
                    next_beat = self.clock.monotonic() + self.heartbeat.total_seconds()
                await self._sleep(now, next_beat - self.clock.monotonic())

    def start_soon(
        self, job: LoadedJob, slot: datetime, before: Callable[[], None] | None = None
    ) -> None:
        """Start a run of `job` for `slot` at the next wake, whatever its schedule says
        (`@reboot` jobs, which have no slot in time); `before` is called just before (so
        a run that never starts, the daemon stopped first, is not recorded as started)."""
        self._soon.append((job, slot, before))
        self._wake.set()

    def stop(self) -> None:
        """Start no new run from now on."""
        self._stopping = True
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def next_fire(self) -> tuple[str, Fire] | None:
        due = self.schedule.next_due()
        if due is None:
            return None
        fire = self.schedule.entries[due[1]].next_fire
        return (due[1], fire) if fire else None

    def running_count(self) -> int:
        return sum(len(runs) for runs in self.running.values())

    async def _sleep(self, now: datetime, beat_in: float) -> None:
        # Stopping, nothing more starts: a slot that fell due must not keep the loop awake
        # (it would spin a core until the last run ended).
        due = None if self._stopping else self.schedule.next_due()
        limit = now + timedelta(seconds=max(0.0, beat_in))
        target = min(due[0] - self.clock.lead, limit) if due else limit
        if target <= now or self._wake.is_set():
            self._wake.clear()
            await asyncio.sleep(0)
            return
        sleeper = asyncio.ensure_future(self.clock.sleep_until(target))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()
            self._wake.clear()

    def _tick(self, now: datetime) -> None:
        soon, self._soon = self._soon, []
        for job, slot, before in soon:
            if before is not None:
                before()
            self._start(job, slot)
        # Slots up to `lead` ahead are handled now, as of the latest of them (`at`): planned,
        # recorded and made ready to spawn before it (the runs are built, their pipes made),
        # spawned at it: the gate blocks until `at` just before the first spawn, and before
        # any event of these slots is logged. Nothing else runs in between (the wait
        # blocks), so what is decided for `at` still holds at `at`. crond's own `lag_ms` at
        # a minute (bench/bench_lag.py): 2.7 ms, 0.8 with the lead, 0.4 with the gate and
        # the last 0.5 ms spun (clock.py).
        due = self.schedule.pop_due(now + self.clock.lead)
        at = max([now, *(entry.next_fire.at for entry in due if entry.next_fire is not None)])
        decisions, moved = _plan(self.schedule, due, at, self.running)
        if self.prepare is not None and (starts := _starts(due, decisions)):
            self.prepare(starts, at)  # all of them, before any is spawned
        gate = _gate(self.clock, at) if at > now else None
        for entry, decision in zip(due, decisions, strict=True):
            self._act(entry.job, decision, gate)
        if gate is not None:
            gate()  # nothing was spawned (skipped, or could not start): still not before `at`
        if due and self.after_tick:
            self.after_tick(due, moved)

    def _act(self, job: LoadedJob, decision: Decision, gate: Gate | None = None) -> None:
        logs = decision.caught_up is not None or decision.missed or decision.skip
        if gate is not None and (logs or decision.replace):
            gate()  # what follows is of the slot: not logged, nor anything stopped, before it
        _log_decision(self.log, job, decision)
        if self.watcher is not None and (logs or decision.start is not None):
            self.watcher.decided(job, decision)
        if decision.start is None:
            return
        if decision.replace:
            old = list(self.running.get(job.name, ()))
            for run in old:
                run.stop()
            self._own(self._start_after(job, decision.start, old))
        else:
            self._start(job, decision.start, gate)

    def _start(self, job: LoadedJob, slot: datetime, gate: Gate | None = None) -> None:
        run = self.launch(job, slot, gate)  # spawned now; the rest is a task of ours
        self.running.setdefault(job.name, []).append(run)
        self.idle.clear()
        self._own(self._drive(job, run))

    async def _start_after(self, job: LoadedJob, slot: datetime, old: list[RunHandle]) -> None:
        await asyncio.gather(*(run.wait() for run in old))
        if not self._stopping:
            self._start(job, slot)

    async def _drive(self, job: LoadedJob, run: RunHandle) -> None:
        """A run's work, then its place in `running` given up (also when cancelled); the
        watcher is told of its start (here: after the wake's spawn pass) and its end."""
        name = job.name
        try:
            if self.watcher is not None:
                self.watcher.run_started(job, run)
            result = await run.drive()
            if self.watcher is not None:
                self.watcher.run_ended(job, run, result)
        finally:
            runs = self.running.get(name, [])
            if run in runs:
                runs.remove(run)
            if not runs:
                self.running.pop(name, None)
            if not self.running:
                self.idle.set()
                self._wake.set()  # a draining loop may now end

    def _own(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self._tasks is not None, "runs start only inside Loop.run"
        self._tasks.create_task(coro)

    def all_runs(self) -> list[RunHandle]:
        return [run for runs in self.running.values() for run in runs]


def _plan(
    schedule: Schedule, due: list[Entry], at: datetime, running: Mapping[str, list[RunHandle]]
) -> tuple[list[Decision], list[tuple[str, datetime]]]:
    """Each due entry's decision as of `at`, applied (its next fire moved on); and the
    `catchup: latest` cursors that moved with no run started (for `after_tick`)."""
    decisions: list[Decision] = []
    moved: list[tuple[str, datetime]] = []
    for entry in due:
        decision = plan_entry(entry, at, len(running.get(entry.name, ())))
        schedule.apply(entry, decision)
        decisions.append(decision)
        if decision.start is None and entry.job.settings.catchup is Catchup.LATEST:
            moved.append((entry.name, entry.cursor))
    return decisions, moved


def _starts(due: list[Entry], decisions: list[Decision]) -> list[tuple[LoadedJob, datetime]]:
    """The runs the decisions start at once (not those that wait for a run to stop)."""
    return [
        (entry.job, decision.start)
        for entry, decision in zip(due, decisions, strict=True)
        if decision.start is not None and not decision.replace
    ]


def _first_cursor(job: LoadedJob, now: datetime, before: datetime | None) -> datetime:
    """Where a job new to this loop starts: now, or the cursor a previous daemon left
    (`before`) if later; a `catchup: latest` job from `before`, for its missed slots."""
    if before is None:
        return now
    if job.settings.catchup is Catchup.LATEST:
        # Slots older than the window can never run: not even counted (a year of a
        # minutely job would be half a million slots to walk).
        return max(before, now - job.settings.catchup_window - _SECOND)
    return max(now, before)


def _log_decision(log: FilteringBoundLogger, job: LoadedJob, decision: Decision) -> None:
    """The events of a slot's decision: caught up, missed, skipped."""
    if decision.caught_up is not None and decision.start is not None:
        log.warning(
            "job.caught_up", job=job.name, slot=iso_utc(decision.start), skipped=decision.caught_up
        )
    if decision.missed:
        m = decision.missed
        log.warning(
            "job.missed",
            job=job.name,
            count=m.count,
            first_slot=iso_utc(m.first_slot),
            last_slot=iso_utc(m.last_slot),
        )
    if decision.skip:
        log.warning("job.skipped", job=job.name, slot=iso_utc(decision.skip), reason="overlap")


def _gate(clock: Clock, at: datetime) -> Gate:
    """A gate that blocks until `at` the first time it is called, and is open after."""
    waited = False

    def gate() -> None:
        nonlocal waited
        if not waited:
            waited = True
            clock.block_until(at)

    return gate
