"""The scheduling core: every rule of a wake in one place, without IO.

No asyncio, no logger, no store, no clock: every input is an argument, every output a
frozen action (crond/schedule/actions.py). The core owns the due heap (`heap.py`), the
rules of one job's due slots (`rules.py`), the pauses (`pauses.py`), the daemon's
`max_running` queue (`queue.py`) and the starts waiting for the database
(`unclaimed.py`). crond/daemon/loop.py is the shell around it: it sleeps until
`wake_at`, calls `propose`, asks the store once for the claims, calls `settle` and
carries out the actions.

The one place that decides "this slot starts" is `Core._due_actions`: a due slot starts
when the rules say so (`rules.decide`), the daemon's limit does not hold it (`queue`),
and its claim was not refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from crond.config.loaded import LoadedJob
from crond.config.model import Catchup, Overlap
from crond.config.wording import quote
from crond.schedule.actions import (
    NO_CLAIMS,
    Action,
    Claims,
    Key,
    Moved,
    Queued,
    Refusal,
    Replace,
    Resumed,
    Start,
    Tell,
)
from crond.schedule.heap import ConfigDiff, Schedule
from crond.schedule.pauses import Pauses
from crond.schedule.queue import Missed, RunQueue
from crond.schedule.rules import Decision, Entry, decide
from crond.schedule.unclaimed import Unclaimed

# How many runs of each job are going (the shell's count; a job with none may be absent).
Running = Mapping[str, int]


@dataclass
class Proposal:
    """One wake's decisions, between `propose` and `settle`."""

    now: datetime
    at: datetime  # the wake's instant: the latest due slot within the lead, or `now`
    starts: list[tuple[LoadedJob, datetime]]  # to record (claim) before any spawn
    told: list[Key]  # the told slots another replica may tell of instead
    first: list[Action] = field(default_factory=list)  # resumed pauses, runs missed waiting
    drained: list[tuple[LoadedJob, datetime]] = field(default_factory=list)
    retried: list[tuple[LoadedJob, datetime]] = field(default_factory=list)
    due: list[Entry] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    held: frozenset[int] = frozenset()  # the decisions that wait in the queue
    replacing: frozenset[int] = frozenset()  # the decisions that replace runs going
    running: int = 0  # runs going, with the drained and retried starts
    moved: list[Key] = field(default_factory=list)


class Core:
    """The schedule of one daemon: its jobs' entries, pauses, queue and unclaimed starts."""

    def __init__(self) -> None:
        self.schedule = Schedule()
        self.pauses = Pauses(self.schedule)
        self.queue = RunQueue(self.schedule)
        self.unclaimed = Unclaimed(self.schedule)

    # --- what the shell is told to change ---------------------------------------------

    def load(
        self, jobs: Mapping[str, LoadedJob], now: datetime, resume: Mapping[str, datetime] | None
    ) -> ConfigDiff:
        """Swap in a new set of jobs (`Schedule.load`)."""
        return self.schedule.load(jobs, now, resume)

    def wake_at(self, lead: timedelta) -> datetime | None:
        """When the next wake is due by itself: `lead` before the earliest fire (its runs
        are made ready then, spawned at it), a pause's end, a queued run's or a waiting
        start's deadline or retry. None: nothing to wake for."""
        due = self.schedule.next_due()
        times = [due[0] - lead] if due else []
        times += [
            t for t in (self.pauses.ends, self.queue.wake_at(), self.unclaimed.wake_at()) if t
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
        settings = entry.job.settings
        runs = running.get(name, 0)
        # A start waiting in the queue or for the database is going too: its retry
        # would otherwise start beside the trigger's run.
        going = runs + self.queue.counts.get(name, 0) + (name in self.unclaimed)
        if going and settings.overlap is Overlap.SKIP:
            return f"{name} has a run going and overlap: skip"
        limit = settings.max_running
        if limit is not None and going >= limit:
            return f"{name}'s max_running ({limit}) is reached: {going} going"
        replacing = bool(runs) and settings.overlap is Overlap.REPLACE
        if not replacing and (refusal := self.queue.refusal(sum(running.values()))):
            return refusal
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
        the start waits and is tried again (an older waiting start of the job is missed)."""
        if reason == "database":
            return [_checked(*missed) for missed in self.unclaimed.put(job, slot, now)]
        if reason == "busy":
            skip = self.schedule.about(job.name, slot, skip=slot, skip_reason="overlap")
            return [Tell(job, skip)]
        return []

    # --- a wake -------------------------------------------------------------------------

    def propose(self, now: datetime, lead: timedelta, running: Running) -> Proposal:
        """Decide the wake at `now`: pauses that ran out, queued runs there is room for,
        starts the database may now answer for, and every slot due up to `lead` ahead
        (decided as of the latest of them, `at`). Moves the schedule on."""
        total = sum(running.values())
        first: list[Action] = [Resumed(name, n) for name, n in self.pauses.expire(now)]
        drained: list[tuple[LoadedJob, datetime]] = []
        missed: list[Missed] = []
        if self.queue:
            drained, missed = self.queue.drain(now, self.pauses, total)
        going = dict(running)
        for job, _ in drained:
            going[job.name] = going.get(job.name, 0) + 1
        due = self.schedule.pop_due(now + lead)
        at = max([now, *(entry.next_fire.at for entry in due if entry.next_fire is not None)])
        decisions, moved = self._decide(due, at, going)
        drained, retried = self._waited(
            now, decisions, drained, missed=missed, first=first, total=total
        )
        first += [Tell(job, d) for job, d in missed]
        proposal = Proposal(now, at, [], [], first, drained, retried, due, decisions, moved=moved)
        proposal.running = total + len(drained) + len(retried)
        proposal.replacing = frozenset(
            i for i, d in enumerate(decisions) if d.replace and running.get(d.job, 0)
        )
        proposal.held = self.queue.hold(
            decisions, lambda d: bool(d.replace and running.get(d.job)), proposal.running
        )
        _to_claim(proposal, missed)
        return proposal

    def _waited(
        self,
        now: datetime,
        decisions: list[Decision],
        drained: list[tuple[LoadedJob, datetime]],
        *,
        missed: list[Missed],
        first: list[Action],
        total: int,
    ) -> tuple[list[tuple[LoadedJob, datetime]], list[tuple[LoadedJob, datetime]]]:
        """Of the runs that waited (in the queue, drained; for the database, retried now),
        those that start at this wake; the others are `missed` (a newer start of their
        job at this wake: never two, never an older slot after a newer one) or wait on."""
        if drained:  # a replace job's newer slot replaces its run that waited
            newer = {d.job for d in decisions if d.start is not None and d.replace}
            missed += [
                (j, self.schedule.missed(j.name, s, "queue")) for j, s in drained if j.name in newer
            ]
            drained = [(job, slot) for job, slot in drained if job.name not in newer]
        if not self.unclaimed:
            return drained, []
        newer = {d.job for d in decisions if d.start is not None}
        newer.update(job.name for job, _ in drained)
        retried, more = self.unclaimed.due(now, newer, self.pauses)
        missed += more
        return drained, self._room_for(retried, total + len(drained), first)

    def settle(self, proposal: Proposal, claims: Claims = NO_CLAIMS) -> list[Action]:
        """The actions of a proposed wake, given the store's answer for its claims."""
        quiet, now = claims.quiet, proposal.now
        actions = [
            a for a in proposal.first if not (isinstance(a, Tell) and _told(a.decision) in quiet)
        ]
        for job, slot in proposal.drained:
            actions += self._start_or(job, slot, claims, now)
        if proposal.retried:
            for job, slot in proposal.retried:
                actions += self._start_or(job, slot, claims, now)
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
            if decision.start is None and claims.quiet and _told(decision) in claims.quiet:
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
        if reason == "taken":
            return []  # the replica that holds the claim runs it, and tells all of it
        decision = decided
        if reason == "busy":  # this replica holds the claim; the job runs on another
            decision = dataclasses.replace(
                decided, start=None, skip=slot, skip_reason="overlap", caught_up=None
            )
            slot = reason = None
        actions: list[Action] = [Tell(job, decision, gated=True)] if _tells(decision) else []
        if slot is None:
            return actions
        if decision.replace:
            actions += self._dropped(job.name)
        if i in proposal.replacing:
            actions.append(Replace(job, slot))
        elif i in proposal.held:
            self.queue.put(job, slot)
            actions.append(Queued(job, slot, running))
        elif reason is not None:
            actions += self.refused(job, slot, reason, proposal.now)
        else:
            actions.append(Start(job, slot, gated=True))
        return actions

    # --- the parts of a wake ------------------------------------------------------------

    def _decide(
        self, due: list[Entry], at: datetime, going: Running
    ) -> tuple[list[Decision], list[Key]]:
        """Each due entry's decision as of `at`, applied (its next fire moved on); and the
        `catchup: latest` cursors that moved with no run started. A job's queued runs
        count as going; a paused job's slots are counted into its pause."""
        decisions: list[Decision] = []
        moved: list[Key] = []
        paused, queued = self.pauses.held, self.queue.counts
        for entry in due:
            name = entry.name
            runs = going.get(name, 0)
            if queued:
                runs += queued.get(name, 0)
            if paused and name in paused:
                decision = self.pauses.decide(entry, at, runs)
            else:
                decision = decide(entry, at, runs)
            self.schedule.apply(entry, decision)
            decisions.append(decision)
            if decision.start is None and entry.job.settings.catchup is Catchup.LATEST:
                moved.append((entry.name, entry.cursor))
        return decisions, moved

    def _room_for(
        self, starts: list[tuple[LoadedJob, datetime]], running: int, first: list[Action]
    ) -> list[tuple[LoadedJob, datetime]]:
        """The waiting starts the daemon's limit has room for; the others wait in its
        queue (while the database did not answer, other runs took their places)."""
        limit = self.queue.limit
        room = len(starts) if limit is None else max(0, limit - running)
        for job, slot in starts[room:]:
            self.queue.put(job, slot)
            first.append(Queued(job, slot, running))
        return starts[:room]

    def _start_or(
        self, job: LoadedJob, slot: datetime, claims: Claims, now: datetime
    ) -> list[Action]:
        reason = claims.refused.get((job.name, slot))
        return [Start(job, slot)] if reason is None else self.refused(job, slot, reason, now)

    def _dropped(self, name: str) -> list[Action]:
        """`name`'s queued runs, replaced by a newer one: missed."""
        return [_checked(*missed) for missed in self.queue.drop(name)]


def _tells(decision: Decision) -> bool:
    """Whether a decision has anything to log or count (beyond its start)."""
    return bool(
        decision.caught_up is not None or decision.missed or decision.skip or decision.paused
    )


def _checked(job: LoadedJob, decision: Decision) -> Tell:
    """A decision taken after the wake's claims: told unless another replica tells of it."""
    return Tell(job, decision, check=_told(decision))


def _told(decision: Decision) -> Key | None:
    """The (job, slot) a decision that starts nothing tells of: its skipped slot, or the
    last slot it missed; None if it tells of none (or starts a run)."""
    if decision.start is not None:
        return None
    if decision.skip is not None:
        # A job's own max_running is each replica's: a replica at it claims nothing, so
        # one with room may still run the slot (this one says what it saw).
        return None if decision.skip_reason == "max_running" else (decision.job, decision.skip)
    if decision.missed is not None:
        return (decision.job, decision.missed.last_slot)
    return None


# Why a trigger did not start, when its claim was refused (with replicas).
TRIGGER_REFUSED: dict[Refusal, str] = {
    "taken": "another replica claimed the same instant for {name}; try again",
    "busy": "{name} has a run going on another replica and overlap: skip",
    "database": "the database is unavailable, and no run starts without a claim",
}


def _to_claim(proposal: Proposal, missed: list[Missed]) -> None:
    """What a proposal asks the store: the starts to record (claim) before any spawn,
    and the told slots (missed, skipped) another replica may tell of instead."""
    held, replacing = proposal.held, proposal.replacing
    proposal.starts = [
        *proposal.drained,
        *proposal.retried,
        *(
            (entry.job, d.start)
            for i, (entry, d) in enumerate(zip(proposal.due, proposal.decisions, strict=True))
            if d.start is not None and i not in replacing and i not in held
        ),
    ]
    told = [*(d for _, d in missed), *proposal.decisions]
    proposal.told = [key for d in told if (key := _told(d)) is not None]
