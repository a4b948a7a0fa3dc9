"""The plain values that cross the state store's seam (crond/store/base.py): errors,
rows, claims. Names, instants, numbers, text — no runner or config objects — so a store
knows nothing of the rest of crond.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple, Protocol

from crond.clock import iso_utc


class StateError(Exception):
    """The store could not do what was asked; the message says why. `corrupt`: the store
    is damaged or gone from under the daemon (the daemon then opens it afresh, moving a
    damaged file aside)."""

    def __init__(self, message: str, *, corrupt: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt


class ReplicaTaken(StateError):  # noqa: N818  (the name the daemon and docs use)
    """A live process holds this replica's name in its cluster; the message says which."""


# A claim's answer (`Store.claim_many`): the attempt's token; None, another replica holds
# the claim; BUSY, the job runs one at a time and a run of it goes on; Locked (below), one
# of its locks has no room.
BUSY: Literal["busy"] = "busy"
# DONE: the job has had its `max_runs` scheduled runs (docs/schedules.md): it starts no more.
DONE: Literal["done"] = "done"


class LockHolder(NamedTuple):
    """A run holding a lock in a cluster's database: its job, slot and replica."""

    job: str
    slot: datetime
    replica: str


class Locked(NamedTuple):
    """A claim refused for its locks (docs/workflows.md, "With replicas"): the first of
    them without room, and its holders (the first few)."""

    lock: str
    holders: tuple[LockHolder, ...]


Claim = int | Literal["busy", "done"] | Locked | None


class Claimed(NamedTuple):
    """A wake's claims (`Store.claim`): per start its Claim, per told slot whether this
    replica got it (and so is the one to tell of it)."""

    starts: list[Claim]
    told: list[bool]


class Start(NamedTuple):
    """A run's first attempt, as one wake records it before spawning."""

    job: str
    run_id: str
    slot: datetime


# The copy of a chained run's claim, before its parent's run id (with replicas: each child
# run of a parent's end claimed once, whichever replica claims it; docs/workflows.md).
AFTER = "after:"


class Chained(NamedTuple):
    """A chained run not yet started (docs/workflows.md): the child, and its parent's end."""

    job: str
    parent_job: str
    parent_run_id: str
    outcome: str
    exit_code: int | None
    slot: datetime


@dataclass(frozen=True)
class AttemptRow:
    """One attempt as the store keeps it (`crond history`, lost runs)."""

    id: int
    run_id: str
    job: str
    slot: datetime
    attempt: int
    started: datetime
    finished: datetime | None
    outcome: str | None
    exit_code: int | None
    duration_s: float | None
    output: list[str]
    replica: str | None = None  # the replica that ran it; None in a store of one daemon
    # The end of an attempt already closed `lost` (its replica was cut off, not dead),
    # kept beside `lost` (docs/replicas.md): when, how, its exit code. None: no late end.
    late_finished: datetime | None = None
    late_outcome: str | None = None
    late_exit_code: int | None = None
    kind: str | None = None  # "backfill" for a backfill's run; None for any other


FAILED_OUTCOMES: tuple[str, ...] = ("failed", "timeout", "killed", "lost")


class Only(NamedTuple):
    """Which attempts `Reader.recent` returns (`crond history`'s filters): those that did
    not succeed (`failed`: FAILED_OUTCOMES), those started at or after `since`, those of
    one run (`run_id`). The default is every attempt."""

    failed: bool = False
    since: datetime | None = None
    run_id: str | None = None


EVERY = Only()


class PerReplica(NamedTuple):
    """A `replicas: all` job on one replica: its newest attempt there, and its newest
    success there (None: none kept)."""

    last: AttemptRow
    success: AttemptRow | None


class Summary(NamedTuple):
    """One job's newest attempt and its last success (kept even when older than the
    history kept), with instants as `clock.iso_utc` wrote them."""

    job: str
    run_id: str | None  # the newest attempt; None: never run
    slot: str | None
    attempt: int | None
    started: str | None
    finished: str | None  # None while it runs (or if its daemon died)
    outcome: str | None
    exit_code: int | None
    duration_s: float | None
    success_run_id: str | None
    success_started: str | None
    success_finished: str | None
    success_duration_s: float | None


@dataclass(frozen=True)
class ViewRow:
    """One job as the daemon sees it: what `crond status` shows besides the history."""

    job: str
    enabled: bool
    schedule: str
    next_at: float | None  # epoch seconds
    next_text: str | None  # the same, as `clock.iso_utc` writes it
    next_local: str | None  # ISO-8601 in the job's zone
    next_note: str | None


class OutboxRow(NamedTuple):
    """A notification not yet delivered (crond/notify): what it is, never where it goes
    (the URL, with its secrets, comes from the file at delivery time)."""

    id: int
    kind: str  # "notify" (a notifier's) or "ping" (a job's healthchecks.io ping)
    notifier: str  # the notifier's name; "" for a ping
    job: str
    event: str
    body: str  # the JSON body
    created: float  # epoch seconds


class PauseRow(NamedTuple):
    """A job paused by an operator (`crond pause`): kept until resumed or until `until`
    passes (the daemon clears it then), across reloads and restarts. The store keeps it
    as given: bounding the note (500 characters) is the daemon's, escaping it status's."""

    job: str
    since: datetime
    until: datetime | None  # None: until resumed
    note: str | None
    by: str  # JSON text: {"uid", "user", "pid"} of who paused it (the socket's peer)


class ReplicaRow(NamedTuple):
    """A replica of a cluster as its last heartbeat left it (`last_beat`: by its clock)."""

    name: str
    host: str
    pid: int
    boot_id: str | None
    started: datetime
    last_beat: datetime
    version: str
    config_digest: str | None  # of the file it runs; None: not loaded yet
    # Its clock minus the database's, in seconds, as its last heartbeat measured it (the
    # round trip's half allowed for); None: not measured yet.
    clock_skew_s: float | None = None


class KillRow(NamedTuple):
    """`crond kill` of `target` (a job, a run id) by `by` (JSON), taken by `replica`."""

    id: int
    target: str
    by: str
    replica: str
    requested: datetime


# A watched run's output tail (crond/store/pg_follow.py): its last lines, each cut.
TAIL_LINES = 100
LINE_CHARS = 2000


class Poll(NamedTuple):
    """A second's read: pauses, kills after an id (oldest first, <= 1000), the last id."""

    pauses: dict[str, PauseRow]
    kills: list[KillRow]
    last_kill: int
    # The runs a dashboard watches now (crond/store/pg_follow.py): their output tails are
    # wanted from the replicas running them.
    watched: frozenset[str] = frozenset()


class NextFire(Protocol):
    """A job's next fire, as `when.timing.Fire` has it (not imported: plain values only)."""

    @property
    def at(self) -> datetime: ...

    @property
    def local(self) -> datetime: ...

    @property
    def note(self) -> str | None: ...


def view_row(
    name: str, enabled: bool, schedule: str, fire: NextFire | None, done: str | None = None
) -> ViewRow:
    """A job's row of a view: what status shows of it besides the history. `done`: why a
    job that fires no more is done (its `at` instants have run, its `end` passed, its
    `max_runs` reached), kept where the next fire's note goes."""
    if fire is None or not enabled:
        return ViewRow(name, enabled, schedule, None, None, None, done if enabled else None)
    at = fire.at
    return ViewRow(
        name, enabled, schedule, at.timestamp(), iso_utc(at), fire.local.isoformat(), fire.note
    )


class StatusRow(NamedTuple):
    """One job of a view with its summary (flat: status reads 10,000 of them): a line of
    `crond status`. The summary's fields are None for a job that never ran."""

    job: str
    enabled: int  # 1 or 0 (SQLite has no booleans; a bool is an int)
    schedule: str
    next_text: str | None
    next_local: str | None
    next_note: str | None
    run_id: str | None
    slot: str | None
    attempt: int | None
    started: str | None
    finished: str | None
    outcome: str | None
    exit_code: int | None
    duration_s: float | None
    success_run_id: str | None
    success_started: str | None
    success_finished: str | None
    success_duration_s: float | None

    @property
    def open(self) -> bool:
        """The newest attempt has not finished: it runs, or its daemon died."""
        return self.run_id is not None and self.finished is None


_NEVER_RUN = (None,) * (len(Summary._fields) - 1)


def status_row(view: ViewRow, summary: Summary | None) -> StatusRow:
    """A view's row with the job's summary (None: it never ran)."""
    return StatusRow(
        view.job, view.enabled, view.schedule, view.next_text, view.next_local, view.next_note,
        *(_NEVER_RUN if summary is None else summary[1:]),
    )  # fmt: skip


@dataclass(frozen=True)
class BackfillRow:
    """A backfill as the store keeps it (`crond backfill`, docs/schedules.md): its range,
    the slots it started (the newest `last_slot`) and how their runs ended. `state`:
    running, finished or cancelled. `next_slot`: the slot going, else the next to start.
    `who`: JSON text, the caller that asked."""

    id: str
    job: str
    range_from: datetime
    range_to: datetime
    total: int
    started: int
    last_slot: datetime | None
    next_slot: datetime | None
    succeeded: int
    failed: int
    state: str
    created: datetime
    ended: datetime | None
    who: str


def backfill_of(row: Sequence[Any], instant: Callable[[Any], datetime]) -> BackfillRow:
    """A backfill row as both stores select it (`id, job, range_from, range_to, total,
    started, last_slot, next_slot, succeeded, failed, state, created, ended, who`), each
    instant made by `instant` (the store's own encoding)."""
    return BackfillRow(
        id=str(row[0]),
        job=str(row[1]),
        range_from=instant(row[2]),
        range_to=instant(row[3]),
        total=int(row[4]),
        started=int(row[5]),
        last_slot=None if row[6] is None else instant(row[6]),
        next_slot=None if row[7] is None else instant(row[7]),
        succeeded=int(row[8]),
        failed=int(row[9]),
        state=str(row[10]),
        created=instant(row[11]),
        ended=None if row[12] is None else instant(row[12]),
        who=str(row[13]),
    )
