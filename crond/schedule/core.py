"""The scheduling core: every rule of a wake in one place, without IO.

No asyncio, no logger, no store, no clock: every input is an argument, every output a
frozen action (crond/schedule/actions.py). The core owns the due heap (`heap.py`), the
rules of one job's due slots (`rules.py`), the pauses (`pauses.py`), the daemon's
`max_running` queue (`queue.py`) and the starts waiting for the database
(`unclaimed.py`). crond/daemon/loop.py is the shell around it: it sleeps until
`wake_at`, calls `propose`, asks the store once for the claims, calls `settle` and
carries out the actions.

A wake's first step, `propose`, is crond/schedule/proposal.py's; its second, `settle`,
is here. The one place that decides "this slot starts" is `Core._slot`: a due slot
starts when the rules say so (`rules.decide`), it replaces no run going, the daemon's
limit does not hold it (`queue`), it took its locks (`locks`, in `propose`) and its
claim was not refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta

from crond.config.loaded import LoadedJob
from crond.config.model import Overlap
from crond.config.wording import quote
from crond.schedule.actions import (
    NO_CLAIMS,
    Action,
    Claims,
    Moved,
    Queued,
    Refusal,
    Replace,
    Start,
    Tell,
)
from crond.schedule.backfills import Backfills
from crond.schedule.backlog import Backlog
from crond.schedule.chains import Chains
from crond.schedule.heap import ConfigDiff, Schedule
from crond.schedule.locks import Locks
from crond.schedule.pauses import Pauses
from crond.schedule.proposal import Proposal, Proposer, Running, told_slot
from crond.schedule.queue import RunQueue
from crond.schedule.rules import Decision
from crond.schedule.unclaimed import Unclaimed


class Core:
    """The schedule of one daemon: its jobs' entries, pauses, queue and unclaimed starts."""

    def __init__(self) -> None:
        self.schedule = Schedule()
        self.pauses = Pauses(self.schedule)
        self.queue = RunQueue(self.schedule)
        self.unclaimed = Unclaimed(self.schedule)
        self.backlog = Backlog(self.schedule)  # runs waiting for their own job
        self.locks = Locks(self.schedule)
        self.chains = Chains()
        self._proposer = Proposer(
            self.schedule,
            self.pauses,
            self.queue,
            self.unclaimed,
            self.backlog,
            locks=self.locks,
            chains=self.chains,
        )
        self.backfills = Backfills(self.schedule, self.queue, self.locks, self._proposer)

    # --- what the shell is told to change ---------------------------------------------

    def load(
        self,
        jobs: Mapping[str, LoadedJob],
        now: datetime,
        resume: Mapping[str, datetime] | None,
        runs: Mapping[str, int] | None = None,
    ) -> ConfigDiff:
        """Swap in jobs (`Schedule.load`) and chains; `runs`: each job's scheduled runs as
        counted (`max_runs`). A changed job's waiting slots stay; a removed job's go."""
        self.chains.load(jobs)
        diff = self.schedule.load(jobs, now, resume, runs)
        for name in diff.removed:
            self.backlog.drop(name)
        return diff

    def wake_at(self, lead: timedelta) -> datetime | None:
        """When the next wake is due by itself: `lead` before the earliest fire (its runs
        are made ready then, spawned at it), a pause's end, a queued run's or a waiting
        start's deadline or retry. None: nothing to wake for."""
        due = self.schedule.next_due()
        times = [due[0] - lead] if due else []
        times += [
            t
            for t in (
                self.pauses.ends,
                self.queue.wake_at(),
                self.unclaimed.wake_at(),
                self.backlog.wake_at(),
                self.locks.wake_at(),
                self.chains.wake_at(),
                self.backfills.wake_at(),
            )
            if t
        ]
        return min(times, default=None)

    # --- steering ---------------------------------------------------------------------

    def trigger(self, name: str, now: datetime, running: Running) -> str | list[Action]:
        """A run of `name` now, also when paused or disabled: the actions (ending with a
        `Start` to claim, or a `Replace`), or one sentence why not. The job's overlap and
        limits apply."""
        entry = self.schedule.entries.get(name)
        if entry is None:
            return f"there is no job {quote(name)}"
        if (refusal := _refusal(self, entry.job, running)) is not None:
            return refusal
        settings = entry.job.settings
        replacing = bool(running.get(name, 0)) and settings.overlap is Overlap.REPLACE
        self.locks.take(entry.job, now)  # (given back if its claim is refused: the loop's)
        actions: list[Action] = []
        if settings.overlap is Overlap.REPLACE:
            actions += self._dropped(name)
            actions += [_checked(*missed) for missed in self.unclaimed.drop(name)]
        actions.append(Replace(entry.job, now) if replacing else Start(entry.job, now))
        return actions

    def refused(
        self, job: LoadedJob, slot: datetime, reason: Refusal, now: datetime
    ) -> list[Action]:
        """A start whose claim was refused: what comes of it. "taken": nothing (another
        replica runs it, and tells). "busy": another replica runs the job, which runs one
        at a time: this one holds the slot's claim, so it tells of the skip. "database":
        the start waits and is tried again (an older waiting start of the job is missed).
        "lock": other replicas' runs fill a lock (`Locks.refused`). Either way its locks,
        if it took them here, are given back."""
        self.locks.release(job.name, slot, wake=reason != "lock")
        if reason == "lock":
            return self.locks.refused(job, slot, now)
        if reason == "database":
            return [_checked(*missed) for missed in self.unclaimed.put(job, slot, now)]
        if reason == "done":  # another replica ran the job's last counted run
            self.schedule.done(job.name)
            return []
        if reason == "busy":
            skip = self.schedule.about(job.name, slot, skip=slot, skip_reason="overlap")
            return [Tell(job, skip)]
        return []

    # --- a wake -------------------------------------------------------------------------

    def propose(self, now: datetime, lead: timedelta, running: Running) -> Proposal:
        """Decide the wake at `now` (`Proposer.propose`, crond/schedule/proposal.py): pauses
        that ran out, queued runs there is room for, starts the database may now answer
        for, and every slot due up to `lead` ahead. Moves the schedule on."""
        return self._proposer.propose(now, lead, running)

    def settle(self, proposal: Proposal, claims: Claims = NO_CLAIMS) -> list[Action]:
        """The actions of a proposed wake, given the store's answer for its claims."""
        quiet, now = claims.quiet, proposal.now
        self.locks.said = claims.locked  # (of the starts refused for their locks)
        actions = [
            a
            for a in proposal.first
            if not (isinstance(a, Tell) and told_slot(a.decision) in quiet)
        ]
        for job, slot in (*proposal.unlocked, *proposal.drained):
            actions += _start_or(self, job, slot, claims, now)
        if proposal.retried:
            for job, slot in proposal.retried:
                actions += _start_or(self, job, slot, claims, now)
            self.unclaimed.tried(proposal.retried, claims.refused, now)
        actions += self._due_actions(proposal, claims)
        if proposal.due:
            actions.append(Moved(proposal.due, proposal.moved))
        return actions

    def _due_actions(self, proposal: Proposal, claims: Claims) -> list[Action]:
        """The actions of the wake's due slots, in the order they were decided."""
        actions: list[Action] = []
        running = proposal.running
        for i, (entry, decision) in enumerate(zip(proposal.due, proposal.decisions, strict=True)):
            if decision.start is None and claims.quiet and told_slot(decision) in claims.quiet:
                continue  # another replica tells of it
            job = entry.job
            got = self._slot(i, job, decision, proposal=proposal, claims=claims, running=running)
            running += sum(isinstance(action, Start) for action in got)
            actions += got
        return actions

    def _slot(
        self,
        i: int,
        job: LoadedJob,
        decided: Decision,
        *,
        proposal: Proposal,
        claims: Claims,
        running: int,
    ) -> list[Action]:
        """The one place a due slot is started: when the rules said so (`decided`), it
        replaces no run going, the daemon's limit does not hold it and its claim was not
        refused. `running`: the runs going before it."""
        slot = decided.start
        reason = claims.refused.get((job.name, slot)) if slot is not None else None
        if reason in ("taken", "busy") and slot is not None:
            self.locks.release(job.name, slot)  # ("database": `refused` gives them back)
        if reason == "taken":
            return []  # the replica that holds the claim runs it, and tells all of it
        decision = decided
        if reason == "busy":  # this replica holds the claim; the job runs on another
            decision = dataclasses.replace(
                decided, start=None, skip=slot, skip_reason="overlap", caught_up=None
            )
            slot = reason = None
        actions: list[Action] = [Tell(job, decision, gated=True)] if _tells(decision) else []
        if decision.waits:
            actions += self.backlog.wait(job, decision, running)
        if slot is None:
            return actions
        if decision.replace:
            actions += self._dropped(job.name)
        if i in proposal.replacing:
            actions.append(Replace(job, slot))
        elif i in proposal.held:
            self.queue.put(job, slot)
            actions.append(Queued(job, slot, running))
        elif i in proposal.lock_waits:
            actions.append(self.locks.wait(job, slot))
        elif reason is not None:
            actions += self.refused(job, slot, reason, proposal.now)
        else:
            self.schedule.counted(job.name)
            actions.append(Start(job, slot, gated=True))
        return actions

    # --- the parts of a wake ------------------------------------------------------------

    def _dropped(self, name: str) -> list[Action]:
        """`name`'s queued runs, replaced by a newer one: missed."""
        return [_checked(*missed) for missed in self.queue.drop(name)]


def _start_or(
    core: Core, job: LoadedJob, slot: datetime, claims: Claims, now: datetime
) -> list[Action]:
    """A start that waited (in the queue, for a lock, for the database): started, unless
    its claim was refused (`Core.refused`)."""
    reason = claims.refused.get((job.name, slot))
    if reason is not None:
        return core.refused(job, slot, reason, now)
    core.schedule.counted(job.name)
    return [Start(job, slot)]


def _refusal(core: Core, job: LoadedJob, running: Running) -> str | None:
    """Why a trigger of `job` may not start now, if so: its overlap, its `max_running`, the
    daemon's limit, its locks. A start waiting (in the queue, for the database, a lock or
    its job) is going too: its retry would otherwise start beside the trigger's run."""
    name, settings = job.name, job.settings
    runs = running.get(name, 0)
    going = runs + core.queue.counts.get(name, 0) + (name in core.unclaimed)
    going += core.locks.counts.get(name, 0) + core.backlog.count(name)
    if going and settings.overlap in {Overlap.SKIP, Overlap.QUEUE}:
        return f"{name} has a run going and overlap: {settings.overlap.value}"
    limit = settings.max_running
    if limit is not None and going >= limit:
        return f"{name}'s max_running ({limit}) is reached: {going} going"
    replacing = bool(runs) and settings.overlap is Overlap.REPLACE
    if not replacing and (refusal := core.queue.refusal(sum(running.values()))):
        return refusal
    return core.locks.refusal(job)


def _tells(decision: Decision) -> bool:
    """Whether a decision has anything to log or count (beyond its start)."""
    return bool(
        decision.caught_up is not None or decision.missed or decision.skip or decision.paused
    )


def _checked(job: LoadedJob, decision: Decision) -> Tell:
    """A decision taken after the wake's claims: told unless another replica tells of it."""
    return Tell(job, decision, check=told_slot(decision))


# Why a trigger did not start, when its claim was refused (with replicas).
TRIGGER_REFUSED: dict[Refusal, str] = {
    "taken": "another replica claimed the same instant for {name}; try again",
    "busy": "{name} has a run going on another replica and overlap: skip",
    "database": "the database is unavailable, and no run starts without a claim",
    "done": "{name} has had its max_runs scheduled runs",
    "lock": "{name}'s locks are held by runs on other replicas",
}
