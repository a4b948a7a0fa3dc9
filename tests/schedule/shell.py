"""A stand-in for the loop (crond/daemon/loop.py) around the scheduling core, without IO:
it proposes, answers the claims as told, settles and carries out the actions the way the
loop does — a `Start` adds a run going, a `Replace` ends the job's runs and then claims
and starts its slot — and keeps what it did. Runs end when the test says.

And `render`: an action as one short line, for tables that compare whole action lists.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from crond.config import loader
from crond.config.loaded import LoadedJob
from crond.schedule.actions import (
    Action,
    Claims,
    Key,
    LockWait,
    Moved,
    Queued,
    Refusal,
    Replace,
    Resumed,
    Start,
    Tell,
)
from crond.schedule.chains import Parent
from crond.schedule.core import Core
from crond.schedule.proposal import Proposal

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)  # a whole hour: epoch-anchored slots fall on it
ZERO = timedelta(0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def secs(t: datetime) -> str:
    """An instant as seconds after T0, as short as it goes: 60, 60.5."""
    return f"{(t - T0).total_seconds():g}"


def render(action: Action) -> str:
    """One action as a line: `start a@60`, `tell a: skip@120 overlap`, `queued b@60 (1)`."""
    if isinstance(action, Start):
        return f"start {action.job.name}@{secs(action.slot)}"
    if isinstance(action, Replace):
        return f"replace {action.job.name}@{secs(action.slot)}"
    if isinstance(action, Queued):
        return f"queued {action.job.name}@{secs(action.slot)} ({action.running})"
    if isinstance(action, LockWait):
        holders = ",".join(f"{job}@{secs(slot)}" for job, slot in action.holders)
        return f"waits {action.job.name}@{secs(action.slot)} for {action.lock} ({holders})"
    if isinstance(action, Resumed):
        return f"resumed {action.job} ({action.skipped})"
    if isinstance(action, Moved):
        cursors = [f" cursor {name}@{secs(t)}" for name, t in action.cursors]
        return "moved " + ",".join(e.name for e in action.entries) + "".join(cursors)
    d = action.decision
    parts = []
    if d.missed is not None:
        m = d.missed
        parts.append(f"missed {m.count} {secs(m.first_slot)}..{secs(m.last_slot)} {m.reason}")
    if d.skip is not None:
        parts.append(f"skip@{secs(d.skip)} {d.skip_reason}")
    if d.caught_up is not None:
        parts.append(f"caught up {d.caught_up} for {secs(d.start) if d.start else None}")
    if d.paused:
        parts.append(f"paused {d.paused}")
    check = " (if not told elsewhere)" if action.check is not None else ""
    return f"tell {action.job.name}: " + ", ".join(parts) + check


Refuse = Callable[[Key], Refusal | None]


def _nothing(key: Key) -> Refusal | None:
    return None


@dataclass
class Run:
    job: str
    slot: datetime
    replacing: bool = False  # it took the place of the job's runs (overlap: replace)


@dataclass
class Shell:
    """The core of a file's jobs (and its `daemon.max_running`), loaded at `now`."""

    text: str
    now: datetime = T0
    core: Core = field(default_factory=Core)
    runs: list[Run] = field(default_factory=list)
    jobs: dict[str, LoadedJob] = field(init=False)
    proposal: Proposal | None = None  # the last wake's
    asked: list[Key] = field(default_factory=list)  # the told slots the last wake asked of
    started: list[Run] = field(default_factory=list)  # every run started, in order
    answered: list[tuple[Key, Refusal]] = field(default_factory=list)  # every claim refused

    def __post_init__(self) -> None:
        loaded = loader.loads(self.text)
        self.jobs = dict(loaded.jobs)
        self.core.load(self.jobs, self.now, None)
        self.core.queue.limit = loaded.config.daemon.max_running
        self.core.locks.capacity = dict(loaded.config.locks)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for run in self.runs:
            counts[run.job] = counts.get(run.job, 0) + 1
        return counts

    def wake(
        self,
        now: datetime,
        *,
        lead: timedelta = ZERO,
        refused: Mapping[Key, Refusal] | Refuse | None = None,
        quiet: Collection[Key] = (),
    ) -> list[Action]:
        """One wake as the loop has it: the actions it carried out (a `Replace`'s own
        claim and start, or what came of its refusal, follow it). `refused`: the store's
        answer for each claim, as a table or a function."""
        self.now = now
        refuse = refused.get if isinstance(refused, Mapping) else refused or _nothing
        proposal = self.core.propose(now, lead, self.counts())
        self.proposal = proposal
        self.asked = list(proposal.told)
        answer = {}
        for job, slot in proposal.starts:
            if (why := refuse((job.name, slot))) is not None:
                answer[(job.name, slot)] = why
                self.answered.append(((job.name, slot), why))
        claims = Claims(answer, frozenset(k for k in proposal.told if k in quiet))
        return self.carry_out(self.core.settle(proposal, claims), refuse, quiet)

    def carry_out(
        self, actions: list[Action], refuse: Refuse, quiet: Collection[Key]
    ) -> list[Action]:
        done: list[Action] = []
        for action in actions:
            if isinstance(action, Tell) and action.check is not None and action.check in quiet:
                continue  # another replica tells of it
            done.append(action)
            if isinstance(action, Start):
                self.add(Run(action.job.name, action.slot))
            elif isinstance(action, Replace):
                done += self.replace(action.job, action.slot, refuse, quiet)
        return done

    def replace(
        self,
        job: LoadedJob,
        slot: datetime,
        refuse: Refuse,
        quiet: Collection[Key],
    ) -> list[Action]:
        """The job's runs stopped and ended, then its slot claimed: started, or refused."""
        self.runs = [run for run in self.runs if run.job != job.name]
        reason = refuse((job.name, slot))
        if reason is None:
            self.add(Run(job.name, slot, replacing=True))
            return []
        self.answered.append(((job.name, slot), reason))
        return self.carry_out(self.core.refused(job, slot, reason, self.now), refuse, quiet)

    def add(self, run: Run) -> None:
        self.runs.append(run)
        self.started.append(run)

    def trigger(self, name: str, now: datetime) -> str | list[Action]:
        self.now = now
        got = self.core.trigger(name, now, self.counts())
        if isinstance(got, str):
            return got
        return self.carry_out(got, _nothing, ())

    def end(self, name: str, outcome: str | None = None) -> list[str]:
        """The oldest run of `name` ends (its locks given back, as the loop does); with an
        `outcome`, its end starts its children as the daemon has it: those children."""
        run = next(run for run in self.runs if run.job == name)
        self.runs.remove(run)
        self.core.locks.release(run.job, run.slot)
        if outcome is None:
            return []
        parent = Parent(name, f"r-{name}-{secs(run.slot)}", outcome, 0, run.slot)
        children = self.core.chains.chained(parent)
        self.core.chains.put(children, parent)
        return children
