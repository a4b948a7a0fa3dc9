"""A wake's first step: what is due at `now`, decided, and what the store must be asked
before any spawn (`Proposal.starts` to record or claim, `Proposal.told` another replica
may tell of instead).

`Proposer.propose` ends the pauses whose end has come, drains the daemon's queue
(`queue.py`), pops every entry due up to `lead` ahead (`heap.py`), decides each as of the
latest of them (`rules.decide`, or `pauses.py` for a paused job), and sorts out the starts
that waited, in the queue or for the database (`unclaimed.py`). What comes of the
decisions once the store has answered is `Core.settle`'s (crond/schedule/core.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from crond.config.loaded import LoadedJob
from crond.config.model import Catchup, OnLock
from crond.schedule.actions import Action, Key, Queued, Resumed, Tell
from crond.schedule.backlog import Backlog
from crond.schedule.chains import Chains
from crond.schedule.heap import Schedule
from crond.schedule.locks import Locks
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
    lock_waits: frozenset[int] = frozenset()  # the decisions that wait for their locks
    unlocked: list[tuple[LoadedJob, datetime]] = field(default_factory=list)  # took them now
    replacing: frozenset[int] = frozenset()  # the decisions that replace runs going
    running: int = 0  # runs going, with the drained and retried starts
    moved: list[Key] = field(default_factory=list)


class Proposer:
    """The proposing half of the core's wake, over the core's parts (made by `Core`)."""

    def __init__(
        self,
        schedule: Schedule,
        pauses: Pauses,
        queue: RunQueue,
        unclaimed: Unclaimed,
        backlog: Backlog,
        *,
        locks: Locks,
        chains: Chains,
    ) -> None:
        self.schedule = schedule
        self.pauses = pauses
        self.queue = queue
        self.unclaimed = unclaimed
        self.backlog = backlog
        self.locks = locks
        self.chains = chains

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
        unlocked: list[tuple[LoadedJob, datetime]] = []
        if self.locks:
            room = self.queue.limit
            room = None if room is None else room - total - len(drained)
            unlocked, more = self.locks.drain(now, self.pauses, room)
            missed += more
        going = dict(running)
        for job, _ in (*drained, *unlocked):
            going[job.name] = going.get(job.name, 0) + 1
        chained: list[tuple[LoadedJob, datetime]] = []
        if self.chains:
            chained, told = self.chains.decide(self.schedule, now, going, self.waiting, self.pauses)
            first += told
        if self.backlog:
            drained += self._from_backlog(now, going, total + len(drained), first, missed)
        due = self.schedule.pop_due(now + lead)
        at = max([now, *(entry.next_fire.at for entry in due if entry.next_fire is not None)])
        decisions, moved = self._decide(due, at, going)
        if self.locks.capacity and len(due) > 1:  # locks are granted in slot order
            order = sorted(range(len(due)), key=lambda i: decisions[i].start or at)
            due, decisions = [due[i] for i in order], [decisions[i] for i in order]
        drained, retried = self._waited(
            now, decisions, drained, missed=missed, first=first, total=total
        )
        first += [Tell(job, d) for job, d in missed]
        if self.chains.parents and missed:
            self.chains.missed(missed)
        if chained:  # (the daemon's limit: those beyond it wait in its queue)
            drained += self._room_for(chained, total + len(drained) + len(retried), first)
        if self.locks.capacity:
            drained, retried = self.locks.gated(drained, first), self.locks.gated(retried, first)
        proposal = Proposal(now, at, [], [], first, drained, retried, due, decisions, moved=moved)
        proposal.unlocked = unlocked
        proposal.running = total + len(drained) + len(retried) + len(unlocked)
        proposal.replacing = frozenset(
            i for i, d in enumerate(decisions) if d.replace and running.get(d.job, 0)
        )
        takes = self._takes(proposal) if self.locks.capacity else None
        proposal.held = self.queue.hold(decisions, proposal.replacing, proposal.running, takes)
        to_claim(proposal, missed)
        return proposal

    def _takes(self, proposal: Proposal) -> Callable[[int], bool]:
        """Whether a due start (its index) takes its locks (crond/schedule/locks.py), asked
        by the daemon's queue of each start it has room for: one that cannot waits for
        them (`lock_waits`, settled with the others) or with `on_lock: skip` is skipped,
        and takes no place under the daemon's limit."""
        decisions, waits = proposal.decisions, set[int]()

        def takes(i: int) -> bool:
            d, job = decisions[i], proposal.due[i].job
            assert d.start is not None
            if self.locks.take(job, d.start):
                return True
            if job.settings.on_lock is OnLock.SKIP:
                decisions[i] = dataclasses.replace(
                    d, start=None, skip=d.start, skip_reason="lock", caught_up=None
                )
            else:
                waits.add(i)
                proposal.lock_waits = frozenset(waits)
            return False

        return takes

    def waiting(self, name: str) -> int:
        """How many runs of job `name` wait (in the queue, for a lock, for the database)."""
        counts, locks = self.queue.counts, self.locks.counts
        return counts.get(name, 0) + locks.get(name, 0) + (name in self.unclaimed)

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

    def _from_backlog(
        self,
        now: datetime,
        going: dict[str, int],
        total: int,
        first: list[Action],
        missed: list[Missed],
    ) -> list[tuple[LoadedJob, datetime]]:
        """The waiting slots of jobs whose runs have ended (backlog.py), to start now, as
        the daemon's limit has room (the others join its queue); those past their
        deadline are `missed`. A job's waiting runs (in the daemon's queue, or for the
        database) count as going."""
        for name, count in self.queue.counts.items():
            going[name] = going.get(name, 0) + count
        for name in self.backlog.names():
            if name in self.unclaimed:
                going[name] = going.get(name, 0) + 1
        ready, gone = self.backlog.ready(now, going, self.pauses)
        missed += gone
        for job, _ in ready:
            going[job.name] = going.get(job.name, 0) + 1
        return self._room_for(ready, total, first)

    def _decide(
        self, due: list[Entry], at: datetime, going: Running
    ) -> tuple[list[Decision], list[Key]]:
        """Each due entry's decision as of `at`, applied (its next fire moved on); and the
        `catchup: latest` cursors that moved with no run started. A job's queued runs
        count as going; a paused job's slots are counted into its pause."""
        decisions: list[Decision] = []
        moved: list[Key] = []
        paused, queued, backlog = self.pauses.held, self.queue.counts, self.backlog
        for_locks = self.locks.counts
        for entry in due:
            name = entry.name
            runs = going.get(name, 0)
            if queued:
                runs += queued.get(name, 0)
            if for_locks:
                runs += for_locks.get(name, 0)
            waiting = backlog.count(name) if backlog else 0
            if paused and name in paused:
                decision = self.pauses.decide(entry, at, runs)
            else:
                decision = decide(entry, at, runs, waiting=waiting)
            self.schedule.apply(entry, decision)
            decisions.append(decision)
            # A `catchup` job's cursor is kept where its slots have been dealt with: not
            # past one that waits to run (a crash then catches it up after the restart).
            catchup = entry.job.settings.catchup
            dealt_with = not (waiting or decision.waits)
            if decision.start is None and catchup is not Catchup.NONE and dealt_with:
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


def told_slot(decision: Decision) -> Key | None:
    """The (job, slot) a decision that starts nothing tells of: its skipped slot, or the
    last slot it missed; None if it tells of none (or starts a run)."""
    if decision.start is not None:
        return None
    if decision.skip is not None:
        # A job's own max_running is each replica's: a replica at it claims nothing, so
        # one with room may still run the slot (this one says what it saw).
        # So are its locks, until they are the database's (crond/schedule/locks.py).
        mine = decision.skip_reason in ("max_running", "lock")
        return None if mine else (decision.job, decision.skip)
    if decision.missed is not None:
        return (decision.job, decision.missed.last_slot)
    return None


def to_claim(proposal: Proposal, missed: list[Missed]) -> None:
    """What a proposal asks the store: the starts to record (claim) before any spawn,
    and the told slots (missed, skipped) another replica may tell of instead."""
    held, replacing = proposal.held, proposal.replacing
    proposal.starts = [
        *proposal.unlocked,
        *proposal.drained,
        *proposal.retried,
        *(
            (entry.job, d.start)
            for i, (entry, d) in enumerate(zip(proposal.due, proposal.decisions, strict=True))
            if d.start is not None
            and i not in replacing
            and i not in held
            and i not in proposal.lock_waits
        ),
    ]
    told = [*(d for _, d in missed), *proposal.decisions]
    proposal.told = [key for d in told if (key := told_slot(d)) is not None]
