"""What the scheduling core says to do, as frozen values; crond/daemon/loop.py carries
them out, in the order given. And what it is told back of a wake's claims.

A wake goes: `Core.propose(now, ...)` decides every due slot and says which starts must
be recorded (with replicas: claimed) and which told slots another replica may tell of;
the shell asks the store once for both (`Claims`); `Core.settle(proposal, claims)` turns
the decisions and the answers into actions.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from crond.config.loaded import LoadedJob
from crond.schedule.rules import Decision, Entry

# A (job, slot): what a claim is about.
Key = tuple[str, datetime]

# Why a start was not claimed (per (job, slot)): another replica holds the claim (it runs
# the slot); a run of the job goes on another replica and the job runs one at a time
# (`overlap: skip`); or the database did not answer (tried again: crond/schedule/unclaimed.py).
# "done": the job has had its `max_runs` scheduled runs (counted in the store). "lock": one
# of its locks has no room in the database, held by runs of other replicas.
Refusal = Literal["taken", "busy", "database", "done", "lock"]
Refused = Mapping[Key, Refusal]


# Of a start refused for its locks: the first lock without room, and its holders.
LockedBy = tuple[str, tuple[Key, ...]]


@dataclass(frozen=True)
class Claims:
    """The store's answer for a wake: the starts that may not start and why, the told
    slots another replica tells of (it claimed them first), and of the starts refused
    for their locks, which lock and its holders."""

    refused: Refused = field(default_factory=dict)
    quiet: Collection[Key] = frozenset()
    locked: Mapping[Key, LockedBy] = field(default_factory=dict)


NO_CLAIMS = Claims()


@dataclass(frozen=True)
class Start:
    """Spawn a run of `job` for `slot` now (`gated`: not before the wake's instant)."""

    job: LoadedJob
    slot: datetime
    gated: bool = False
    at_slot = False  # (its run waits at the gate itself, just before its spawn)


@dataclass(frozen=True)
class Replace:
    """Stop the runs of `job` going (not before the wake's instant); once they have all
    ended, claim and start `slot` (what comes of that claim: `Core.refused`)."""

    job: LoadedJob
    slot: datetime
    at_slot = True  # nothing of a slot is stopped before it


@dataclass(frozen=True)
class Tell:
    """Log a decision's events and tell the notifiers and metrics (`gated`: not before
    the wake's instant). `check`: first ask whether another replica tells of this slot."""

    job: LoadedJob
    decision: Decision
    gated: bool = False
    check: Key | None = None

    @property
    def at_slot(self) -> bool:
        return self.gated


@dataclass(frozen=True)
class Queued:
    """A due start waits under the daemon's `max_running` (`job.queued`)."""

    job: LoadedJob
    slot: datetime
    running: int
    at_slot = True


@dataclass(frozen=True)
class LockWait:
    """A due start waits for its locks (`job.waiting`, reason `lock`): the first lock
    without room and its holders, (job, slot) each."""

    job: LoadedJob
    slot: datetime
    lock: str
    holders: tuple[Key, ...]
    at_slot = True


@dataclass(frozen=True)
class Resumed:
    """A pause ran out by itself: its job, and the slots it passed over."""

    job: str
    skipped: int
    at_slot = False


@dataclass(frozen=True)
class Moved:
    """The entries a wake moved on (their next fires), and the `catchup: latest` cursors
    that moved with no run started: for the store's copy of them."""

    entries: list[Entry]
    cursors: list[Key]
    at_slot = False


# Every action says whether it is of the wake's instant (`at_slot`): the loop carries it
# out not before that instant (logged, stopped, queued at the slot, not in the lead).
Action = Start | Replace | Tell | Queued | LockWait | Resumed | Moved
