"""The state store's seam: what the daemon and the CLI ask of a store, and the plain values
that cross it.

`Reader` is what `crond status` and `crond history` read; `Store` adds what the daemon
writes: a run's start (committed before its spawn, with the job's cursor), its finish,
cursors that move without a run, the runs a dead daemon left open (`close_lost`), its
view of the jobs for status, and the pauses operators set (`crond pause`). Only plain
values cross: names, instants, numbers, text — no runner or config objects — so an
implementation knows nothing of the rest of crond.

`crond.store.sqlite` is one daemon's (one SQLite file in the state directory), opened by
`crond.store.locate`. `crond.store.postgres` is several replicas' sharing one PostgreSQL
database (the daemon opens it with `daemon.database`; `locate` for reading): `Replicated`
adds their heartbeats, kill requests and claims (`Store.claim_many`: one replica wins a
slot's). docs/state.md.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, NamedTuple, Protocol, runtime_checkable

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
# the claim; BUSY, the job runs one at a time and a run of it goes on.
BUSY: Literal["busy"] = "busy"
Claim = int | Literal["busy"] | None


class Start(NamedTuple):
    """A run's first attempt, as one wake records it before spawning."""

    job: str
    run_id: str
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


class KillRow(NamedTuple):
    """`crond kill` of `target` (a job, a run id) by `by` (JSON), taken by `replica`."""

    id: int
    target: str
    by: str
    replica: str
    requested: datetime


class Poll(NamedTuple):
    """A second's read: pauses, kills after an id (oldest first, <= 1000), the last id."""

    pauses: dict[str, PauseRow]
    kills: list[KillRow]
    last_kill: int


class NextFire(Protocol):
    """A job's next fire, as `when.timing.Fire` has it (not imported: plain values only)."""

    @property
    def at(self) -> datetime: ...

    @property
    def local(self) -> datetime: ...

    @property
    def note(self) -> str | None: ...


def view_row(name: str, enabled: bool, schedule: str, fire: NextFire | None) -> ViewRow:
    """A job's row of a view: what status shows of it besides the history."""
    if fire is None or not enabled:
        return ViewRow(name, enabled, schedule, None, None, None, None)
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


class Reader(Protocol):
    """A store opened for reading: `crond status` and `crond history`, while the daemon
    writes. Every method raises StateError when the store fails."""

    @property
    def location(self) -> str:
        """Where the store is (a file's path), as messages and events name it."""
        ...

    def get_meta(self, key: str) -> str | None: ...

    def last(self, job: str, *, outcome: str | None = None) -> AttemptRow | None:
        """The job's newest attempt (with that outcome), if any is kept."""
        ...

    def recent(self, job: str | None, limit: int) -> list[AttemptRow]:
        """The newest `limit` attempts (of `job`, or of every job), oldest first."""
        ...

    def summaries(self) -> dict[str, Summary]:
        """Every job's summary, by name (jobs no longer in the file too)."""
        ...

    def status_rows(self) -> list[StatusRow]:
        """The daemon's view of its jobs, in the file's order, each with its summary."""
        ...

    def view_is_behind(self, oldest: float) -> bool:
        """Whether some next fire in the view is before `oldest` (epoch seconds): the
        daemon that keeps the view is stalled or stopped."""
        ...

    def pauses(self) -> dict[str, PauseRow]:
        """Every pause kept, by job (expired ones too, until the daemon clears them)."""
        ...

    def close(self) -> None: ...


class Store(Reader, Protocol):
    """A store opened by the daemon, for writing; one daemon a store (it is locked)."""

    @property
    def moved_aside(self) -> str | None:
        """Where opening it put a damaged store (kept as evidence), if it did."""
        ...

    def cursors(self) -> dict[str, datetime]:
        """Each job's cursor: the instant up to which its slots have been dealt with."""
        ...

    def save_cursors(self, cursors: Sequence[tuple[str, datetime]]) -> None:
        """Move cursors forward (never back), in one commit."""
        ...

    def start(
        self,
        job: str,
        *,
        run_id: str,
        slot: datetime,
        attempt: int,
        started: datetime,
        cursor: datetime,
    ) -> int:
        """Record an attempt as started and move the job's cursor, in one commit, before
        the spawn. Returns a token for `finish`."""
        ...

    def start_many(self, starts: Sequence[Start], started: datetime) -> list[int]:
        """`start` for the first attempts of one wake's runs, in one commit. Returns
        their tokens, in order. Claims nothing: replicas sharing a store use
        `claim_many`."""
        ...

    def claim_many(
        self,
        starts: Sequence[Start],
        started: datetime,
        *,
        copies: Sequence[str] | None = None,
        exclusive: Collection[str] = (),
        replacing: Collection[str] = (),
    ) -> list[Claim]:
        """`start_many` with a claim of each start's `(job, slot, copy)` (`copies`, in the
        starts' order; None: "" for each), in one commit that also moves every start's
        cursor. Per start, its token; or None when another replica holds the claim: then
        nothing is recorded for it, and it must not run; or BUSY for a job of `exclusive`
        (`overlap: skip`) claimed with copy "" while an attempt of it is unfinished on any
        replica: the claim is kept (the slot is dealt with: skipped, by this replica) and
        nothing else recorded. A job of `replacing` (`overlap: replace`) claimed with copy
        "" asks the other replicas to stop its runs (kill requests). A store of one daemon
        wins every claim (SQLite's is `start_many`: its daemon's own planner knows its
        runs)."""
        ...

    def claim_only(self, slots: Sequence[tuple[str, datetime]], claimed: datetime) -> list[bool]:
        """Claim `(job, slot)`s that will not run (skipped, missed), in one commit: for
        each, whether this replica got it, and so is the one to tell of it. A store of one
        daemon gives every one."""
        ...

    def finish(
        self,
        row_id: int,
        *,
        job: str,
        run_id: str | None = None,
        finished: datetime,
        outcome: str,
        exit_code: int | None,
        duration_s: float,
        output: Sequence[str],
        keep: int | None = None,
    ) -> None:
        """Close an attempt (a token that is not there any more is ignored) and keep the
        job's newest `keep` attempts (default: the store's)."""
        ...

    def close_lost(self, now: datetime) -> list[AttemptRow]:
        """Attempts left open by a daemon that died: closed as outcome `lost`."""
        ...

    def set_meta(self, key: str, value: str) -> None: ...

    def outbox_add(self, rows: Sequence[OutboxRow]) -> list[int]:
        """Keep notifications to deliver (their `id` is ignored), in one commit; their ids."""
        ...

    def outbox_pending(self, limit: int) -> list[OutboxRow]:
        """The oldest `limit` notifications not yet delivered nor given up."""
        ...

    def outbox_done(self, ids: Sequence[int]) -> None:
        """Forget notifications delivered or given up, in one commit."""
        ...

    def set_pause(self, row: PauseRow) -> None:
        """Keep a job's pause, replacing the one it had, in one commit."""
        ...

    def clear_pause(self, job: str) -> None:
        """Forget a job's pause (none is no error), in one commit."""
        ...

    def publish_view(self, rows: Iterable[ViewRow], digest: str | None) -> None:
        """Make the view a freshly loaded file's jobs. `digest`: the sha256 of the
        file's bytes (None: unknown, and no status will trust the view)."""
        ...

    def update_view(
        self, moved: Sequence[ViewRow], cursors: Sequence[tuple[str, datetime]] = ()
    ) -> None:
        """Next fires that moved, and cursors that moved with no run started."""
        ...

    def check_in_place(self) -> None:
        """Raise StateError (corrupt) when the store was removed or replaced under the
        daemon: its writes would go where nobody looks."""
        ...

    def checkpoint(self) -> None:
        """Housekeeping the daemon's heartbeat does, off the start path."""
        ...


@runtime_checkable
class ClusterReader(Reader, Protocol):
    """A store replicas share, as status, history and ps read it: its replicas by name,
    their open attempts, the database's clock, each job's newest attempt's replica."""

    def replicas(self) -> list[ReplicaRow]: ...
    def open_runs(self) -> list[AttemptRow]: ...
    def clock(self) -> datetime: ...
    def newest_replicas(self) -> dict[str, str]: ...


class Replicated(Store, ClusterReader, Protocol):
    """A store shared by several replicas (crond.store.postgres): each says it is alive
    (`beat`), and a survivor closes the runs of a replica that stopped saying so."""

    @property
    def replica(self) -> str:
        """This replica's name: its attempts and claims (`replicas: all`) carry it."""
        ...

    def beat(self, now: datetime) -> datetime:
        """This replica is alive at `now` (kept with its pid, host, boot, version and file's
        digest), in one commit; the database's clock then (`cluster.clock_skew`)."""
        ...

    def close_dead(self, now: datetime, timeout: timedelta) -> list[AttemptRow]:
        """The open attempts of the other replicas whose last beat is older than
        `timeout`, closed as `lost` in one commit; when survivors race, each attempt is
        closed (and returned) by one of them only."""
        ...

    # A KillRow kept for every replica to see, its id; and `Poll` in one transaction.
    def request_kill(self, target: str, by: str, now: datetime) -> int: ...
    def poll(self, after: int) -> Poll: ...

    def resume(self, job: str, by: str, now: datetime) -> None:
        """`clear_pause` by `by` (JSON): who ended it is kept an hour for `resumed_by`."""
        ...

    def resumed_by(self, job: str, since: datetime) -> str | None:
        """Who resumed the job's pause that began at `since` (JSON), if a resume ended it."""
        ...
