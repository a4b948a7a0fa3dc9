"""The daemon's policy for its state store: when to write, and what a failing store costs.

The store is a help, never a hazard. A run is never delayed or refused because of it: a
write that fails is logged (`state.write_failed`, at most once per `quiet` seconds — one
heartbeat), the store is reported `degraded` in the liveness file until a write works
again (`state.recovered`), and scheduling goes on unrecorded. A store that cannot be
opened (`state.unavailable`), or that a write found damaged or gone, is opened again at
the next heartbeat (`open`), a damaged file moved aside first (`state.moved_aside`).

With replicas (`daemon.database`, docs/replicas.md) one rule changes: no run starts
without a claim. `prepare` claims a wake's starts and says which may not start (another
replica holds the claim, or the database did not answer: the loop tries those again);
the database going away is `database.unavailable` (once) and its return
`database.available`; while it is away, writes other than claims are not tried more than
once per backoff (a host that drops packets would hold the loop for the connect timeout at
every write), and the ends of runs that could not be written are kept (10,000 at most)
and written when it answers again, so no run it saw end stays "running" in its history.

The recorder is the runner's Recorder: it turns runs into the plain values the store
takes (crond/store/base.py). docs/state.md has the table of failures and what they do.
"""

from __future__ import annotations

import enum
import functools
import json
import os
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Final, TypeVar

from crond.clock import Clock, iso_utc
from crond.schedule.actions import Claims, Refusal
from crond.store.base import AttemptRow, ReplicaTaken, Start, StateError, Store, ViewRow
from crond.store.files import boot_id

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from crond.run.runner import Run, RunResult

T = TypeVar("T")
_UNWRITTEN = 10_000  # ends of runs kept while the database is away
_BACKOFF_FIRST, _BACKOFF_LONGEST = 0.5, 5.0
# Opens the store: `aside` says it is known to be damaged (crond.store.locate.open_store).
Opener = Callable[[bool], Store]


class Failed(enum.Enum):
    """What `StoreRecorder.write` answers when the store did not do what was asked."""

    FAILED = "failed"


FAILED: Final = Failed.FAILED


class StoreRecorder:
    """The runner's Recorder backed by a Store, or by nothing when the store is off
    (`opener` None) or broken. Use it from the event loop's thread."""

    def __init__(
        self,
        opener: Opener | None,
        log: FilteringBoundLogger,
        clock: Clock,
        quiet: float = 10.0,
        *,
        replica: str | None = None,
    ) -> None:
        self.opener = opener
        # This replica's name when the store is a cluster's (daemon.database); None: the
        # store is this daemon's alone.
        self.replica = replica
        self.store: Store | None = None
        self.log = log
        self.clock = clock
        self.quiet = quiet
        self.degraded = False
        self.corrupt = False  # a write met damage, or the store is gone: open it afresh
        self.history: dict[str, int] = {}  # job -> attempts kept; the store's default else
        self._prepared: dict[str, int] = {}  # run id -> its first attempt's row (`prepare`)
        self._logged_at: float | None = None
        self._opened = False  # opened once: the runs a dead daemon left are closed
        # Told of each run a dead daemon left (the notifiers' `lost`), after its event.
        self.on_lost: Callable[[AttemptRow], None] | None = None
        # Told of a run's last attempt before its end is written: what it makes (the
        # notifiers' outbox) is in the store first, so no crash falls between the two.
        self.before_end: Callable[[Run, RunResult, Sequence[str]], None] | None = None
        # Jobs each replica runs (`replicas: all`): their claims are this replica's copy.
        self.each_replica: frozenset[str] = frozenset()
        # Jobs that run one at a time (`overlap: skip`): with replicas, not claimed while
        # a run of the job goes on another replica.
        self.one_at_a_time: frozenset[str] = frozenset()
        # Jobs whose new run stops the old (`overlap: replace`): with replicas, the other
        # replicas' runs of the job too.
        self.replacing: frozenset[str] = frozenset()
        self._down_since: float | None = None  # the database away since (monotonic)
        self._retry_at = 0.0  # the next write tried while it is away (monotonic)
        self._backoff = _BACKOFF_FIRST
        self._unwritten: list[Callable[[Store], None]] = []  # ends of runs not yet written
        # With replicas, the end of an attempt a retry follows, by run id: written when the
        # next attempt starts or the run ends, so the run's row stays open while it waits
        # (another replica does not claim an `overlap: skip` job's next slot meanwhile).
        self._held: dict[str, Callable[[Store], None]] = {}

    # --- the store's health -----------------------------------------------------------

    def label(self) -> str:
        """The store as the liveness file reports it: `off`, `ok` or `degraded`."""
        if self.opener is None:
            return "off"
        return "ok" if self.store is not None and not self.degraded else "degraded"

    def database(self) -> str | None:
        """The cluster's database as the liveness file reports it: `ok` or `unavailable`
        (None: no database)."""
        if self.replica is None:
            return None
        return "ok" if self._opened and self._down_since is None else "unavailable"

    def wants_open(self) -> bool:
        """Whether there should be a store and there is none that works: not opened,
        unavailable, or found damaged or gone."""
        return self.opener is not None and (self.store is None or self.corrupt)

    def open(self) -> bool:
        """Open the store (again, after a failure or a damaged file); whether it opened.
        Only at the first open are the runs a dead daemon left closed as lost: at a later
        one the open rows may be this daemon's own runs (and a fresh store has none)."""
        if self.opener is None:
            return False
        self.close()
        try:
            store = self.opener(self.corrupt)
            lost = [] if self._opened else store.close_lost(self.clock.now())
        except ReplicaTaken:
            raise  # the daemon refuses to start: not a store failure to ride out
        except StateError as exc:
            self.failed(exc, "state.unavailable")
            return False
        self._opened = True
        if store.moved_aside is not None:
            self.log.error("state.moved_aside", path=store.location, moved_to=store.moved_aside)
        self.store = store
        self.corrupt = False
        self._recovered()
        self.log.info("state.opened", path=store.location)
        if self.replica is None:  # a cluster's replicas are in its replicas table
            info = {"pid": os.getpid(), "boot_id": boot_id(), "started": iso_utc(self.clock.now())}
            self.mark("daemon", json.dumps(info))  # for `crond status`: is its daemon alive?
        for row in lost:
            self.log.warning("job.lost", job=row.job, run_id=row.run_id, slot=iso_utc(row.slot))
            if self.on_lost is not None:
                self.on_lost(row)
        return True

    def check(self) -> None:
        """The heartbeat's look at an open store: still in place (else `state.unavailable`,
        and it is opened afresh at the next heartbeat), and checkpointed."""
        if self.store is None:
            return
        try:
            self.store.check_in_place()
        except StateError as exc:
            self.failed(exc, "state.unavailable")
        try:
            self.store.checkpoint()
        except StateError as exc:
            self.failed(exc)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def failed(self, exc: Exception, event: str = "state.write_failed") -> None:
        """A failure of the store: degraded until a write works; logged at most once per
        `quiet` seconds (a cluster's database: `database.unavailable`, once an outage)."""
        self.degraded = True
        if isinstance(exc, StateError) and exc.corrupt:
            self.corrupt = True
        now = self.clock.monotonic()
        if self.replica is not None:
            self._retry_at = now + self._backoff
            self._backoff = min(self._backoff * 2, _BACKOFF_LONGEST)
            if self._down_since is None:
                self._down_since = now
                self.log.error("database.unavailable", error=str(exc))
            return
        if self._logged_at is None or now - self._logged_at >= self.quiet:
            self._logged_at = now
            self.log.error(event, error=str(exc))

    def _recovered(self) -> None:
        """A write worked: the end of a degraded spell, or of the database's absence."""
        if not self.degraded:
            return
        self.degraded = False
        if self._down_since is None:
            self.log.info("state.recovered")
            return
        away = round(self.clock.monotonic() - self._down_since, 3)
        self._down_since = None
        self._backoff = _BACKOFF_FIRST
        self.log.info("database.available", after_s=away)
        pending, self._unwritten = self._unwritten, []
        for i, write in enumerate(pending):
            if self.store is None:
                return
            try:
                write(self.store)
            except StateError as exc:  # away again: what is left waits for its return
                self._unwritten = pending[i:] + self._unwritten
                self.failed(exc)
                return

    def write(self, write: Callable[[Store], T], *, force: bool = False) -> T | Failed:
        """One write (or read) of the store, if there is one: its result, or FAILED when
        it was not done — no store, the database away and not tried now, or it failed
        (then logged, and the store marked degraded); a result of None is a result. One
        that works ends a degraded spell. While a cluster's database is away, one is tried
        at most once per backoff unless `force`d (claims, and the heartbeat's)."""
        if self.store is None:
            return FAILED
        if self._down_since is not None and not force and self.clock.monotonic() < self._retry_at:
            return FAILED
        try:
            result = write(self.store)
        except StateError as exc:
            self.failed(exc)
            return FAILED
        self._recovered()
        return result

    # --- runs -------------------------------------------------------------------------

    def prepare(
        self,
        starts: Sequence[Start],
        told: Sequence[tuple[str, datetime]] = (),
        *,
        started: datetime | None = None,
    ) -> Claims:
        """Record the first attempts of a wake's runs in one commit, before any of them is
        spawned, as started at `started` (default: now); each run's `started` then finds
        its row. With replicas, claim them in that commit, with the `told` slots (skipped,
        missed): the starts that may not start, and why (all of them when the database
        did not answer); the told slots another replica claimed first, and so tells of
        (none when the database did not answer: each replica tells what it saw)."""
        at = started or self.clock.now()
        if self.replica is None:
            if starts:
                ids = self.write(lambda store: store.start_many(starts, at))
                for start, row_id in zip(starts, [] if ids is FAILED else ids, strict=False):
                    self._prepared[start.run_id] = row_id
            return Claims()
        each = self.each_replica
        copies = [self.replica if s.job in each else "" for s in starts]
        mine = [key for key in told if key[0] not in each]
        if not starts and not mine:
            return Claims()
        claimed = self.write(
            lambda store: store.claim(
                starts,
                mine,
                at,
                copies=copies,
                exclusive=self.one_at_a_time,
                replacing=self.replacing,
            ),
            force=bool(starts),
        )
        if claimed is FAILED:
            return Claims({(s.job, s.slot): "database" for s in starts})
        refused: dict[tuple[str, datetime], Refusal] = {}
        for start, claim in zip(starts, claimed.starts, strict=True):
            if isinstance(claim, int):
                self._prepared[start.run_id] = claim
            else:
                refused[(start.job, start.slot)] = "taken" if claim is None else "busy"
        quiet = {key for key, ours in zip(mine, claimed.told, strict=True) if not ours}
        return Claims(refused, quiet)

    def started(self, run: Run, attempt: int) -> object:
        if self._held:
            self.run_ended(run.run_id)  # the attempt before, which waited for this one
        if attempt == 1 and self._prepared:
            prepared = self._prepared.pop(run.run_id, None)
            if prepared is not None:
                return prepared
        return self.write(
            lambda store: store.start(
                run.job,
                run_id=run.run_id,
                slot=run.slot,
                attempt=attempt,
                started=self.clock.now(),
                cursor=run.slot,
            )
        )

    def finished(self, token: object, run: Run, result: RunResult, tail: Sequence[str]) -> None:
        if self.before_end is not None and run.ends_with(result):
            self.before_end(run, result, tail)
        if not isinstance(token, int):
            return
        write_end = self._write_end
        if self.replica is not None and not run.ends_with(result):
            write_end = functools.partial(self._held.__setitem__, run.run_id)
        now = self.clock.now()  # not when it is written: that may be later (held, away)
        write_end(
            lambda store: store.finish(
                token,
                job=run.job,
                run_id=run.run_id,
                finished=now,
                outcome=result.outcome.value,
                exit_code=result.exit_code,
                duration_s=result.duration_s,
                output=tail,
                keep=self.history.get(run.job),
            )
        )

    def run_ended(self, run_id: str) -> None:
        """`run_id`'s last attempt ended (it may have been stopped while it waited for a
        retry): the end of an attempt held back is written now."""
        held = self._held.pop(run_id, None)
        if held is not None:
            self._write_end(held)

    def _write_end(self, write: Callable[[Store], None]) -> None:
        """A run's end: with replicas, kept to write again when the database is back."""
        written = self.write(write)
        if written is FAILED and self.replica is not None and len(self._unwritten) < _UNWRITTEN:
            self._unwritten.append(write)

    # --- what the daemon keeps besides runs -------------------------------------------

    def cursors(self) -> dict[str, datetime]:
        """The cursors the previous daemon left, or none."""
        cursors = self.write(lambda store: store.cursors())
        return {} if cursors is FAILED else cursors

    def ran_in_boot(self, job: str, boot: str | None) -> bool:
        """Whether `job` (`@reboot`) started in this host boot. Without a store, or a boot
        id, every daemon start counts as a boot."""
        if self.store is None or boot is None:
            return False
        return self.write(lambda store: store.get_meta(self._reboot_key(job))) == boot

    def mark_boot(self, job: str, boot: str | None) -> None:
        """`job` (`@reboot`) starts in this boot: recorded before it is spawned."""
        if boot is not None:
            self.mark(self._reboot_key(job), boot)

    def _reboot_key(self, job: str) -> str:
        """`@reboot` is per host: with replicas, each replica keeps its own mark."""
        return f"reboot:{job}" if self.replica is None else f"reboot:{self.replica}:{job}"

    def mark(self, key: str, value: str) -> None:
        self.write(lambda store: store.set_meta(key, value))

    def publish_view(self, rows: Iterable[ViewRow], digest: str | None) -> None:
        self.write(lambda store: store.publish_view(rows, digest))

    def update_view(
        self, moved: Sequence[ViewRow], cursors: Sequence[tuple[str, datetime]]
    ) -> None:
        """After a wake: next fires that moved, and cursors that moved with no run started
        (slots missed or skipped: a restart must not take them for downtime)."""
        if moved or cursors:
            self.write(lambda store: store.update_view(moved, cursors))
