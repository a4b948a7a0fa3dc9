"""The daemon's state store: which one it opens (the SQLite store of a state directory,
or a cluster's PostgreSQL database; crond/store/, docs/state.md), and what a failing one
costs.

The store is a help, never a hazard. A write that fails is logged (`state.write_failed`,
at most once per `quiet` seconds — one heartbeat), the store is reported `degraded` in
the liveness file until a write works again (`state.recovered`), and scheduling goes on
unrecorded. A store that cannot be opened (`state.unavailable`), or that a write found
damaged or gone, is opened again at the next heartbeat (`open`), a damaged file moved
aside first (`state.moved_aside`).

With replicas (`daemon.database`, docs/replicas.md) the database going away is
`database.unavailable` (once) and its return `database.available`; while it is away,
writes other than claims are not tried more than once per backoff, and the ends of runs
that could not be written are kept (10,000 at most) and written when it answers again, so
no run it saw end stays "running" in its history. The database is called off the loop,
each call with a deadline: crond/daemon/offloop.py. What is written, and when, is the
recorder's (crond/daemon/recorder.py).
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from crond.clock import Clock, iso_utc
from crond.config.loaded import LoadedConfig
from crond.store import locate
from crond.store.base import AttemptRow, ReplicaTaken, StateError, Store
from crond.store.files import boot_id

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

T = TypeVar("T")
_UNWRITTEN = 10_000  # ends of runs kept while the database is away
_BACKOFF_FIRST, _BACKOFF_LONGEST = 0.5, 5.0
# Opens the store: `aside` says it is known to be damaged (crond.store.locate.open_store).
Opener = Callable[[bool], Store]
# A run's end, written: what the store said of it (the recorder's `_written` reads it).
End = Callable[[Store], object]


class Failed(enum.Enum):
    """What `StoreHealth.write` answers when the store did not do what was asked."""

    FAILED = "failed"


FAILED: Final = Failed.FAILED


def opener(directory: Path) -> Opener:
    """How the recorder opens the store in `directory` (again, and `aside` when damaged)."""
    return lambda aside: locate.open_store(directory, aside=aside)


def cluster_opener(url: str, cfg: LoadedConfig, replica: str) -> Opener:
    """How the recorder opens the cluster's database (psycopg: imported only here)."""
    from crond.store import postgres  # noqa: PLC0415  (the `postgres` extra: only when used)

    daemon = cfg.daemon
    return lambda _aside: postgres.PostgresStore.open(
        url, cluster=daemon.cluster, replica=replica, replica_timeout=daemon.replica_timeout
    )


def chosen(
    cfg: LoadedConfig, state_dir: Path | None, url: str | None, replica: str | None
) -> Opener | None:
    """How the daemon opens its store: a replica, the cluster's database (replicas share
    its state); else the SQLite store of `state_dir` (None: no store)."""
    if url is not None and replica is not None:
        return cluster_opener(url, cfg, replica)
    return None if state_dir is None else opener(state_dir)


class StoreHealth:
    """A Store, or nothing when the store is off (`opener` None) or broken: opened (again),
    written through, degraded and recovered. Use it from the event loop's thread."""

    def __init__(
        self,
        opener: Opener | None,
        log: FilteringBoundLogger,
        clock: Clock,
        quiet: float = 10.0,
        *,
        replica: str | None = None,
        on_lost: Callable[[AttemptRow], None] | None = None,
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
        self._logged_at: float | None = None
        self._opened = False  # opened once: the runs a dead daemon left are closed
        # Told of each run a dead daemon left (the notifiers' `lost`), after its event.
        self.on_lost = on_lost
        self._down_since: float | None = None  # the database away since (monotonic)
        self._retry_at = 0.0  # the next write tried while it is away (monotonic)
        self._backoff = _BACKOFF_FIRST
        self._unwritten: list[End] = []  # ends of runs not yet written

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
        self._adopt(store, lost)
        return True

    def _adopt(self, store: Store, lost: list[AttemptRow]) -> None:
        """A store just opened, in use from now on; `lost`: the runs a dead daemon left,
        closed as lost at the first open."""
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
        self._replay(pending)

    def _replay(self, pending: list[End]) -> None:
        """The ends of runs kept while the database was away, written now, in order."""
        for i, write in enumerate(pending):
            if self.store is None:
                return
            try:
                said = write(self.store)
            except StateError as exc:  # away again: what is left waits for its return
                self._unwritten = pending[i:] + self._unwritten
                self.failed(exc)
                return
            self._written(said)

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

    def _write_end(self, write: End) -> None:
        """A run's end: with replicas, kept to write again when the database is back."""
        self._ended(self.write(write), write)

    def _ended(self, said: object, write: End) -> None:
        """A run's end tried: kept when it was not written, else what the store said."""
        if said is FAILED:
            self._keep(write)
        else:
            self._written(said)

    def _written(self, said: object) -> None:
        """What the store said of a run's end just written (the recorder's to act on)."""

    def _keep(self, write: End) -> None:
        """A run's end not written: with replicas, kept to write when the database is back."""
        if self.replica is not None and len(self._unwritten) < _UNWRITTEN:
            self._unwritten.append(write)

    def mark(self, key: str, value: str) -> None:
        self.write(lambda store: store.set_meta(key, value))
