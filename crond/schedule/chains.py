"""Chains (docs/workflows.md): a job's `after` — which ends of which jobs' runs start one
run of it — and the chained runs not yet decided.

The rules `Chains` keeps (crond/schedule/proposal.py asks it at every wake):

- `chained` is the one rule of chaining: the end of a parent's run (its last attempt,
  retries spent) with outcome `success` starts the children that wait for `success` or
  `finished`; any other outcome (failed, timeout, killed), those that wait for `failure`
  or `finished`. A run started with `trigger --no-chain` starts none (the shell's).
- Each such end starts one run of each child, for the parent's slot (`CROND_SLOT`), with
  the parent's job, run id, outcome and exit code. The daemon records the chained
  starts in the same commit as the parent's end, and each start of a child takes its
  record away in the commit that records the child's start (crond/store/): a crash in
  between starts the child after the restart, once.
- The child's own rules apply at the next wake, as to a due slot: a child disabled or
  paused is skipped (`job.skipped`, reason `paused`); its overlap and `max_running`
  (a run of it going or waiting: skipped, reason `overlap` / `max_running`); then its
  locks and the daemon's limit, as for any start. A child no longer in the file is
  dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from crond.config.fieldtypes import ChainOn
from crond.config.loaded import LoadedJob
from crond.config.model import Overlap
from crond.schedule.actions import Action, Key, Tell
from crond.schedule.heap import Schedule
from crond.schedule.pauses import Pauses
from crond.schedule.rules import Decision, skip_reason


@dataclass(frozen=True)
class Parent:
    """The end of a parent's run that starts a child: what the child is told of it."""

    job: str
    run_id: str
    outcome: str
    exit_code: int | None
    slot: datetime


def ends_with(on: ChainOn, outcome: str) -> bool:
    """Whether a run that ended with `outcome` is an end `on` waits for."""
    if on is ChainOn.FINISHED:
        return True
    return (outcome == "success") is (on is ChainOn.SUCCESS)


@dataclass
class Chains:
    """The children of each job (made at each load) and the chained runs to decide."""

    children: dict[str, list[tuple[str, ChainOn]]] = field(default_factory=dict)
    pending: list[tuple[str, Parent]] = field(default_factory=list)  # (child, its parent)
    # The chained starts decided, by (child, slot), until the shell spawns them (it takes
    # them: their record goes with the child's start, their parent into its environment).
    parents: dict[Key, Parent] = field(default_factory=dict)
    # Chained runs decided not to start (skipped, dropped): (child, the parent's run id),
    # for the shell to take their records away.
    dropped: list[tuple[str, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.pending)

    def load(self, jobs: Mapping[str, LoadedJob]) -> None:
        children: dict[str, list[tuple[str, ChainOn]]] = {}
        for name, job in jobs.items():
            for parent, on in (job.settings.after or {}).items():
                children.setdefault(parent, []).append((name, on))
        self.children = children

    def chained(self, parent: Parent) -> list[str]:
        """The rule of chaining: the children one end of a run of `parent.job` starts."""
        return [
            child
            for child, on in self.children.get(parent.job, ())
            if ends_with(on, parent.outcome)
        ]

    def put(self, children: list[str], parent: Parent) -> None:
        """Runs of `children` to start for `parent`'s end (decided at the next wake)."""
        self.pending += [(child, parent) for child in children]

    def take(self) -> list[tuple[str, Parent]]:
        taken, self.pending = self.pending, []
        return taken

    def decide(
        self,
        schedule: Schedule,
        now: datetime,
        going: dict[str, int],
        waiting: Callable[[str], int],
        pauses: Pauses,
    ) -> tuple[list[tuple[LoadedJob, datetime]], list[Action]]:
        """The chained runs to start now, each for its parent's slot (counted in `going`);
        and what to tell of those not started: the runs of a child disabled or paused, or
        with a run going (`going`) or waiting (`waiting`) against its overlap or its
        max_running, are skipped; those of a child no longer in the file dropped."""
        starts: list[tuple[LoadedJob, datetime]] = []
        told: list[Action] = []
        for child, parent in self.take():
            entry = schedule.entries.get(child)
            if entry is None:
                self.dropped.append((child, parent.run_id))
                continue
            job, settings = entry.job, entry.job.settings
            runs = going.get(child, 0) + waiting(child)
            held = pauses.held.get(child)
            reason = None
            if not settings.enabled or (held and (held.until is None or held.until > now)):
                reason = "paused"
            elif runs:  # (a replacement would stop a run of the same chain's work)
                reason = skip_reason(settings.overlap, settings.max_running, runs)
                reason = "overlap" if settings.overlap is Overlap.REPLACE else reason
            if reason is not None:
                self.dropped.append((child, parent.run_id))
                skip = schedule.about(child, parent.slot, skip=parent.slot, skip_reason=reason)
                told.append(Tell(job, skip))
                continue
            self.parents[(child, parent.slot)] = parent
            going[child] = going.get(child, 0) + 1
            starts.append((job, parent.slot))
        return starts, told

    def missed(self, missed: Iterable[tuple[LoadedJob, Decision]]) -> None:
        """Runs missed after waiting (for a lock, the daemon's limit, the database): the
        chained ones among them are dropped."""
        for job, decision in missed:
            slot = decision.missed.last_slot if decision.missed is not None else None
            parent = None if slot is None else self.parents.pop((job.name, slot), None)
            if parent is not None:
                self.dropped.append((job.name, parent.run_id))

    def wake_at(self) -> datetime | None:
        """At once (the oldest parent slot, in the past) while chained runs wait."""
        return min((parent.slot for _, parent in self.pending), default=None)
