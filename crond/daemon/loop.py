"""The scheduling loop, thin around `crond.when.plan`: sleep, wake, plan, start runs.

The loop sleeps until the earliest next fire on the heap, never longer than one
heartbeat, and re-reads the clock after every wake. It calls `beat` once per heartbeat
(the liveness file and the systemd watchdog live there), so a stuck loop lets both go
stale. The work of every run it starts is a task of its TaskGroup (`Loop._start`): no
run outlives `Loop.run`, and one cancelled with it kills and reaps its processes.

Steering (`crond pause`, `trigger`, `kill`; docs/control.md) goes through the loop,
which keeps its public face; the rules live beside it: pauses in `crond.daemon.pauses`
(a paused job's slots are passed over and counted; a pause with an end wakes the loop at
that end, as a fire would), the daemon's `max_running` in `crond.daemon.queue` (a due
run beyond it waits, first come first served, until a run ends or its grace runs out).
Jobs neither paused nor queued cost the planner one truth test of each (empty) dict.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Collection, Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock
from crond.config.loaded import LoadedJob
from crond.config.model import Overlap
from crond.config.wording import quote
from crond.daemon import decisions as deciding
from crond.daemon.claims import NONE_REFUSED, Refusal, Refused, Unclaimed
from crond.daemon.pauses import Pauses
from crond.daemon.queue import RunQueue
from crond.daemon.runs import Gate, Launch, Pending, RunHandle
from crond.when.plan import Decision, Entry, Schedule, make_entry
from crond.when.timing import Fire

# The runs' names too: the daemon and the tests import them from here.
__all__ = ["ConfigDiff", "Gate", "Launch", "Loop", "Pending", "RunHandle", "Watcher"]


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
        prepare: Callable[[list[tuple[LoadedJob, datetime]], datetime], Refused | None]
        | None = None,
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
        # before the first is launched: the daemon records them all in one commit. With
        # replicas it claims them too, and says which it could not claim (not started).
        self.prepare = prepare
        self.watcher = watcher
        # With replicas: given the (job, slot)s of decisions that start nothing but are
        # told (skipped, missed), those another replica tells of (it claimed them first).
        self.dedupe: Callable[[list[tuple[str, datetime]]], Collection[tuple[str, datetime]]]
        self.dedupe = _nobody
        self.schedule = Schedule()
        self._soon: list[tuple[LoadedJob, datetime, Callable[[], None] | None]] = []
        self.running: dict[str, list[RunHandle]] = {}
        self._wake = asyncio.Event()
        self.idle = asyncio.Event()  # set while no run is going
        self.idle.set()
        self._stopping = False
        self._tasks: asyncio.TaskGroup | None = None
        self._pauses = Pauses(self.schedule)
        # Told when a pause ran out by itself: the job, the slots it passed over. Called
        # from the loop's turn, as the watcher is: must be quick and never raise.
        self.on_resumed: Callable[[str, int], None] | None = None
        self._queue = RunQueue(
            schedule=self.schedule, log=log, running=self.running_count, tell=self._tell
        )
        self._unclaimed = Unclaimed(schedule=self.schedule, tell=self._tell)

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
            self.schedule.put(
                make_entry(jobs[name], deciding.first_cursor(jobs[name], now, before))
            )
        for name in changed:
            cursor = max(old[name].cursor, now)
            self.schedule.remove(name)
            self.schedule.put(make_entry(jobs[name], cursor))
        self._wake.set()
        return ConfigDiff(added, removed, changed)

    @property
    def max_running(self) -> int | None:
        """The daemon's limit of runs going at once (None: none); set at each load."""
        return self._queue.limit

    @max_running.setter
    def max_running(self, limit: int | None) -> None:
        self._queue.limit = limit
        self._wake.set()  # a higher limit lets queued runs start now

    # --- steering: pause, resume, trigger, kill --------------------------------------

    def pause(self, name: str, until: datetime | None) -> None:
        """Pass over `name`'s slots from now until `until` (None: until resumed); pausing a
        paused job again replaces its end and keeps its count. Any name is taken: a job
        not (or no longer) in the file keeps its pause for when it is."""
        self._pauses.pause(name, until)
        self._wake.set()  # its end is a new instant to wake at

    def resume(self, name: str) -> int | None:
        """End `name`'s pause: the slots it passed over; None if it was not paused."""
        skipped = self._pauses.resume(name)
        if skipped is not None:
            self._wake.set()
        return skipped

    def pauses(self) -> dict[str, datetime | None]:
        """The paused jobs and the end of each pause (None: until resumed)."""
        return self._pauses.listing()

    def trigger(self, name: str) -> RunHandle | str:
        """Start a run of `name` now (its slot: now), as a scheduled one would start, also
        when it is paused or disabled; or say in one sentence why not. The job's overlap
        applies: with `replace`, the runs going are stopped and a `Pending` is returned."""
        refused = self._refusal(name)
        if refused is not None:
            return refused
        job = self.schedule.entries[name].job
        runs = list(self.running.get(name, ()))
        now = self.clock.now()
        if job.settings.overlap is Overlap.REPLACE:
            self._queue.drop(name)
            if runs:
                pending = Pending(name)
                for run in runs:
                    run.stop()
                self._own(self._start_after(job, now, runs, pending))
                return pending
        claims = self._claim([(job, now)], now)
        if claims:
            return _TRIGGER_REFUSED[claims[(name, now)]].format(name=name)
        return self._start(job, now)

    def _refusal(self, name: str) -> str | None:
        if self._stopping or self._tasks is None:
            return "the daemon is stopping" if self._stopping else "the daemon is not running"
        entry = self.schedule.entries.get(name)
        if entry is None:
            return f"there is no job {quote(name)}"
        settings = entry.job.settings
        runs = len(self.running.get(name, ()))
        going = runs + self._queue.counts.get(name, 0)
        if going and settings.overlap is Overlap.SKIP:
            return f"{name} has a run going and overlap: skip"
        limit = settings.max_running
        if limit is not None and going >= limit:
            return f"{name}'s max_running ({limit}) is reached: {going} going"
        if runs and settings.overlap is Overlap.REPLACE:
            return None  # the replacement takes the place of the runs it stops
        return self._queue.refusal()

    def kill(self, target: str) -> list[RunHandle]:
        """Stop the runs of job `target`, or the run whose run_id is `target`, as a
        timeout does (outcome killed, no retry): those runs; [] when none is going."""
        runs = self.running.get(target)
        chosen = list(runs) if runs else [r for r in self.all_runs() if r.run_id == target]
        for run in chosen:
            run.stop()
        return chosen

    def _expire(self, now: datetime) -> None:
        """End the pauses whose end has come, and tell `on_resumed` of each."""
        ended = self._pauses.expire(now)
        if ended:
            self._wake.set()
        for name, skipped in ended:
            if self.on_resumed is not None:
                self.on_resumed(name, skipped)

    def _drain(self, now: datetime) -> None:
        """Start the queued runs there is room for now (the others wait on, or are missed)."""
        starts = self._queue.drain(now, self._pauses)
        refused = self._claim(starts, now)
        for job, slot in starts:
            self._start_claimed(job, slot, refused, now)

    def _claim(self, starts: list[tuple[LoadedJob, datetime]], at: datetime) -> Refused:
        """Record (and with replicas, claim) `starts` before any is spawned: those that may
        not start, and why."""
        if self.prepare is None or not starts:
            return NONE_REFUSED
        return self.prepare(starts, at) or NONE_REFUSED

    def _start_claimed(
        self, job: LoadedJob, slot: datetime, refused: Refused, now: datetime
    ) -> None:
        """Start `job` for `slot` unless its claim was refused; then, as the refusal says:
        nothing (another replica runs it), skipped, or tried again later."""
        reason = refused.get((job.name, slot)) if refused else None
        if reason is None:
            self._start(job, slot)
        else:
            self._refuse(job, slot, reason, now)

    def _refuse(self, job: LoadedJob, slot: datetime, reason: Refusal, now: datetime) -> None:
        # "taken": another replica runs the slot (and tells of it). "busy": another runs
        # the job, which runs one at a time: this replica holds the slot's claim, so it
        # tells of the skip (the other's planner, seeing its run, finds the slot claimed).
        if reason == "database":
            self._unclaimed.put(job, slot, now)
            self._wake.set()  # a new instant to wake at: the next try
        elif reason == "busy":
            skip = deciding.one_slot(
                self.schedule, job.name, slot, skip=slot, skip_reason="overlap"
            )
            self._tell(job, skip, claimed=True)

    def _retry_claims(self, now: datetime) -> None:
        """The starts the database did not answer for, tried again at their time."""
        pauses = self._pauses
        starts = [s for s in self._unclaimed.due(now) if not pauses.pass_over(s[0].name, now)]
        if not starts:
            return
        refused = self._claim(starts, now)
        for job, slot in starts:
            self._start_claimed(job, slot, refused, now)
        if "database" in refused.values():
            self._unclaimed.failed(now)
        else:
            self._unclaimed.answered()

    def _replacing(self, decision: Decision) -> bool:
        return decision.replace and bool(self.running.get(decision.job))

    def _tell(self, job: LoadedJob, decision: Decision, *, claimed: bool = False) -> None:
        """A decision taken outside the planner (a queued run missed): logged and told,
        unless another replica tells of the slot (`claimed`: this one holds its claim)."""
        key = None if claimed else _told(decision)
        if key is not None and key in self.dedupe([key]):
            return
        deciding.log_decision(self.log, job, decision)
        if self.watcher is not None:
            self.watcher.decided(job, decision)

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
        if self._pauses.ends is not None:  # exactly at the end, as a fire (no lead: no spawn)
            target = min(target, self._pauses.ends)
        if (queue_wake := self._queue.wake_at()) is not None and not self._stopping:
            target = min(target, queue_wake)
        if (claim_wake := self._unclaimed.wake_at()) is not None and not self._stopping:
            target = min(target, claim_wake)
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
        self._expire(now)
        soon, self._soon = self._soon, []
        for job, slot, before in soon:
            if before is not None:
                before()
            self._start(job, slot)
        if self._queue:
            self._drain(now)
        if self._unclaimed:
            self._retry_claims(now)
        # Slots up to `lead` ahead are handled now, as of the latest of them (`at`): planned,
        # recorded and made ready to spawn before it (the runs are built, their pipes made),
        # spawned at it: the gate blocks until `at` just before the first spawn, and before
        # any event of these slots is logged. Nothing else runs in between (the wait
        # blocks), so what is decided for `at` still holds at `at`. crond's own `lag_ms` at
        # a minute (bench/bench_lag.py): 2.7 ms, 0.8 with the lead, 0.4 with the gate and
        # the last 0.5 ms spun (clock.py).
        due = self.schedule.pop_due(now + self.clock.lead)
        at = max([now, *(entry.next_fire.at for entry in due if entry.next_fire is not None)])
        decisions, moved = deciding.plan(
            self.schedule, due, at, self.running, pauses=self._pauses, queued=self._queue.counts
        )
        held = self._queue.hold(decisions, self._replacing)
        refused = NONE_REFUSED
        if self.prepare is not None and (starts := self._starts(due, decisions, held)):
            refused = self._claim(starts, at)  # all of them, before any is spawned
        told = [key for d in decisions if d.start is None and (key := _told(d)) is not None]
        quiet = self.dedupe(told) if told else ()
        gate = deciding.gate(self.clock, at) if at > now else None
        for i, (entry, decision) in enumerate(zip(due, decisions, strict=True)):
            if quiet and decision.start is None and _told(decision) in quiet:
                continue  # another replica tells of it
            self._act(entry.job, decision, gate, queued=i in held, refused=refused)
        if gate is not None:
            gate()  # nothing was spawned (skipped, or could not start): still not before `at`
        if due and self.after_tick:
            self.after_tick(due, moved)

    def _starts(
        self, due: list[Entry], decisions: list[Decision], held: frozenset[int]
    ) -> list[tuple[LoadedJob, datetime]]:
        """The runs the decisions start at once (not those that wait for a run to stop,
        nor those that wait in the queue)."""
        return [
            (entry.job, decision.start)
            for i, (entry, decision) in enumerate(zip(due, decisions, strict=True))
            if decision.start is not None and not self._replacing(decision) and i not in held
        ]

    def _act(
        self,
        job: LoadedJob,
        decision: Decision,
        gate: Gate | None = None,
        *,
        queued: bool = False,
        refused: Refused = NONE_REFUSED,
    ) -> None:
        reason = refused.get((job.name, decision.start)) if refused and decision.start else None
        if reason == "taken":
            return  # the replica that holds the claim runs it, and logs and tells all of it
        if reason == "busy":  # this replica holds the claim; the job runs on another
            skip = decision.start
            decision = dataclasses.replace(
                decision, start=None, skip=skip, skip_reason="overlap", caught_up=None
            )
            reason = None
        logs = decision.caught_up is not None or decision.missed or decision.skip or queued
        if gate is not None and (logs or decision.replace):
            gate()  # what follows is of the slot: not logged, nor anything stopped, before it
        deciding.log_decision(self.log, job, decision)
        if self.watcher is not None and (logs or decision.start is not None or decision.paused):
            self.watcher.decided(job, decision)
        if decision.start is None:
            return
        if decision.replace:
            self._queue.drop(job.name)
            old = list(self.running.get(job.name, ()))
            if old:
                for run in old:
                    run.stop()
                self._own(self._start_after(job, decision.start, old))
                return
        if queued:
            self._queue.put(job, decision.start)
        elif reason is not None:
            self._refuse(job, decision.start, reason, self.clock.now())
        else:
            self._start(job, decision.start, gate)

    def _start(self, job: LoadedJob, slot: datetime, gate: Gate | None = None) -> RunHandle:
        run = self.launch(job, slot, gate)  # spawned now; the rest is a task of ours
        self.running.setdefault(job.name, []).append(run)
        self.idle.clear()
        self._own(self._drive(job, run))
        return run

    async def _start_after(
        self,
        job: LoadedJob,
        slot: datetime,
        old: list[RunHandle],
        pending: Pending | None = None,
    ) -> None:
        new = None
        ended: list[RunHandle] = []
        try:
            # Another replacement may have started meanwhile (two triggers, or a trigger
            # and a scheduled slot, waiting on the same runs): it is replaced in turn, so
            # one run of the job goes at a time, the newest.
            while old:
                await asyncio.gather(*(run.wait() for run in old))
                ended += old
                if self._stopping or (pending is not None and pending.cancelled):
                    return
                old = [r for r in self.running.get(job.name, ()) if r not in ended]
                for run in old:
                    run.stop()
            now = self.clock.now()
            refused = self._claim([(job, slot)], now)
            if refused:
                self._refuse(job, slot, refused[(job.name, slot)], now)
            else:
                new = self._start(job, slot)
        finally:
            if pending is not None:
                pending.settle(new)

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
            if self._queue:
                self._wake.set()  # a place is free for the first queued run

    def _own(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self._tasks is not None, "runs start only inside Loop.run"
        self._tasks.create_task(coro)

    def all_runs(self) -> list[RunHandle]:
        return [run for runs in self.running.values() for run in runs]


def _nobody(_keys: list[tuple[str, datetime]]) -> Collection[tuple[str, datetime]]:
    """One daemon: it tells of every slot it does not run."""
    return ()


def _told(decision: Decision) -> tuple[str, datetime] | None:
    """The (job, slot) a decision that starts nothing tells of: its skipped slot, or the
    last slot it missed; None if it tells of none."""
    if decision.skip is not None:
        # A job's own max_running is each replica's: a replica at it claims nothing, so
        # one with room may still run the slot (this one says what it saw).
        return None if decision.skip_reason == "max_running" else (decision.job, decision.skip)
    if decision.missed is not None:
        return (decision.job, decision.missed.last_slot)
    return None


# Why a trigger did not start, when its claim was refused (with replicas).
_TRIGGER_REFUSED: dict[Refusal, str] = {
    "taken": "another replica claimed the same instant for {name}; try again",
    "busy": "{name} has a run going on another replica and overlap: skip",
    "database": "the database is unavailable, and no run starts without a claim",
}
