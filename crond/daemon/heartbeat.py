"""The heartbeat: what the scheduling loop does once per `daemon.heartbeat`, itself, so a
stuck loop lets every sign of life go stale.

Each beat pings the systemd watchdog, looks after the state store (opens it again if it
is unavailable or was found damaged or gone, else checks it is still in place and
checkpoints it), then rewrites the liveness file. With replicas none of it waits on the
database: it is opened and checked off the loop (crond/daemon/offloop.py), and the
cluster's queries of a beat are a task of their own (crond/daemon/cluster.py). A
liveness file that cannot be written is logged (`liveness.write_failed`, once a beat)
and scheduling goes on; `liveness.write_recovered` says when it works again.
docs/running.md describes the file.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from structlog.typing import FilteringBoundLogger

from crond.clock import iso_utc
from crond.daemon import liveness
from crond.daemon.loop import Loop
from crond.daemon.recorder import StoreRecorder
from crond.daemon.systemd import Systemd
from crond.run import runner
from crond.store.base import ReplicaTaken

if TYPE_CHECKING:
    from crond.config.loaded import LoadedConfig

START_WAIT = 10.0  # seconds the start waits for a replica's database at most


class Heartbeat:
    """What the loop's beat does (the daemon's `Effects.beat` calls `beat`), and the
    period the loop calls it at (the daemon gives the loop `period` at each load).
    `on_reopen`: called when the store opens again while jobs are scheduled (its view
    of them is gone or old); `on_taken`: when a replica's database answers only now, to
    say its name is a live one's (default: raised); `cluster`: a replica's work for its
    cluster, once a beat (crond/daemon/cluster.py)."""

    def __init__(
        self,
        loop: Loop[runner.Run],
        recorder: StoreRecorder,
        notifier: Systemd,
        log: FilteringBoundLogger,
        on_reopen: Callable[[], None],
        *,
        on_taken: Callable[[ReplicaTaken], None] | None = None,
        cluster: Callable[[datetime], None] | None = None,
    ) -> None:
        self.loop = loop
        self.recorder = recorder
        self.notifier = notifier
        self.log = log
        self.on_reopen = on_reopen
        self.on_taken = on_taken or _raise
        self.cluster = cluster
        self.period = timedelta(seconds=10)
        self.path: Path | None = None  # the liveness file; None: none is written
        self.jobs = 0
        self._failed = False  # the last write of the liveness file failed
        self._beat_at: float | None = None  # the monotonic clock at the last beat
        self.last_beat: datetime | None = None  # and the wall clock
        self.taken = False  # a live replica has this one's name

    async def open_store(self, wait: float = START_WAIT) -> bool:
        """The store opened at the daemon's start; False: a live replica has this one's
        name (`on_taken` was told). With replicas, the open goes on off the loop, waited
        for at most `wait` seconds: a database that does not answer is tried again at
        the next heartbeats, as one that refuses."""
        if not self.recorder.off_loop:
            try:
                self.recorder.open()
            except ReplicaTaken as exc:
                self._taken(exc)
            return not self.taken
        opening = self._open_off_loop()
        if opening is not None:
            await asyncio.wait({opening}, timeout=wait)
        return not self.taken

    def _open_off_loop(self) -> asyncio.Task[bool] | None:
        """An open off the loop, unless one is under way; when it is done, the daemon is
        told (`on_taken`, or `on_reopen` when jobs are scheduled)."""
        under_way = self.recorder.opening
        if under_way is not None and not under_way.done():
            return None
        self.recorder.open()
        opening = self.recorder.opening
        if opening is not None:
            opening.add_done_callback(self._opened)
        return opening

    def _opened(self, opening: asyncio.Task[bool]) -> None:
        if opening.cancelled():
            return
        exc = opening.exception()
        if isinstance(exc, ReplicaTaken):
            self._taken(exc)
        elif exc is not None:
            self.log.error("state.unavailable", error=f"{type(exc).__name__}: {exc}")
        elif opening.result() and self.loop.core.schedule.entries:
            self.on_reopen()

    def _taken(self, exc: ReplicaTaken) -> None:
        self.taken = True
        self.on_taken(exc)

    def configure(
        self, cfg: LoadedConfig, *, liveness_file: Path | None, heartbeat: timedelta | None
    ) -> None:
        """The settings of a file just loaded; the flags of `crond run`, when given, win.
        The watchdog, when systemd set one, is never let starve. The period is the loop's
        (the daemon gives it the loop), and the recorder's quiet time (a failing store is
        logged once a heartbeat)."""
        beat = heartbeat or cfg.daemon.heartbeat
        if self.notifier.watchdog is not None:
            beat = min(beat, self.notifier.watchdog)
        self.period = beat
        self.recorder.quiet = beat.total_seconds()
        configured = cfg.daemon.liveness_file
        self.path = liveness_file or (Path(configured) if configured else None)
        self.jobs = len(cfg.jobs)

    def beat(self, now: datetime) -> None:
        self._beat_at, self.last_beat = self.loop.clock.monotonic(), now
        self.notifier.ping()
        if self.recorder.wants_open() and self.recorder.off_loop:
            self._open_off_loop()
        elif self.recorder.wants_open():
            # At most once a heartbeat: this is called once a heartbeat.
            try:
                opened = self.recorder.open()
            except ReplicaTaken as exc:  # first reached now, its name held by a live one
                self.on_taken(exc)
                opened = False
            if opened and self.loop.core.schedule.entries:
                self.on_reopen()
        else:
            self.recorder.check()
        if self.cluster is not None:
            self.cluster(now)
        self.write_liveness(now)

    def fresh(self) -> bool:
        """Whether the loop beat recently: within three heartbeats and a second, the age
        `crond health` allows the liveness file by default (`/healthz` answers by it)."""
        if self._beat_at is None:
            return False
        age = self.loop.clock.monotonic() - self._beat_at
        return age <= liveness.stale_after(self.period.total_seconds())

    def payload(self, now: datetime, *, stopped: bool = False) -> dict[str, object]:
        """What the liveness file holds (docs/running.md), as of `now`."""
        nxt = None if stopped else self.loop.core.schedule.next_fire()
        payload: dict[str, object] = {
            "pid": os.getpid(),
            "updated_at": iso_utc(now),
            "jobs": self.jobs,
            "running": self.loop.going.count(),
            "next_fire": {"job": nxt[0], "at": iso_utc(nxt[1].at)} if nxt else None,
            "heartbeat_s": self.period.total_seconds(),
            "state": self.recorder.label(),
            "stopped": stopped,
        }
        database = self.recorder.database()
        if database is not None:  # a replica: is its cluster's database answering?
            payload["database"] = database
        return payload

    def write_liveness(self, now: datetime, *, stopped: bool = False) -> None:
        """The liveness file; `stopped`: the last one, after a clean stop (`crond health`
        then says so, instead of "fresh" for a pid that is gone)."""
        if self.path is None:
            return
        try:
            liveness.write(self.path, self.payload(now, stopped=stopped))
        except OSError as exc:
            # Once a heartbeat at most: this is called once a heartbeat.
            self.log.error("liveness.write_failed", path=str(self.path), error=str(exc))
            self._failed = True
        else:
            if self._failed:
                self.log.info("liveness.write_recovered", path=str(self.path))
                self._failed = False


def _raise(exc: ReplicaTaken) -> None:
    raise exc
