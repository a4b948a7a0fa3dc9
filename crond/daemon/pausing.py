"""A daemon's pauses (`crond pause`, `resume`; docs/control.md): each kept in the state
store, so it outlives reloads and restarts (with replicas, in the cluster's database,
first or not at all), and in the loop, which starts no scheduled run of a paused job
and wakes when a pause runs out; each begun or ended is logged (`job.paused`,
`job.resumed`) and told to the metrics (crond_job_paused).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar, cast

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc
from crond.control.protocol import ControlError
from crond.daemon.loop import Loop
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED
from crond.run import runner
from crond.store.base import PauseRow, Replicated, Store

T = TypeVar("T")
# A pause or resume refused while the database is away, as docs/control.md and
# docs/replicas.md quote it: the event it names is in every replica's log, with no setting.
DATABASE_AWAY = (
    "the cluster's database is unavailable: a {what} applies to every replica and is kept "
    "there; try again when it answers (the daemon logs database.available then)"
)


class Pausing:
    """The pauses of one daemon: begun and ended when the control socket is asked
    (crond/daemon/control.py), restored at start, ended when their `until` comes."""

    def __init__(
        self,
        *,
        log: FilteringBoundLogger,
        clock: Clock,
        loop: Loop[runner.Run],
        recorder: StoreRecorder,
        on_paused: Callable[[str, bool], None] | None = None,
        replicated: bool = False,
    ) -> None:
        self.log = log
        self.clock = clock
        self.loop = loop
        self.recorder = recorder
        # Told (job, paused) whenever a pause begins or ends (the metrics' crond_job_paused).
        self.on_paused = on_paused
        # With replicas, the pauses are the cluster's database's: written there for all.
        self.replicated = replicated

    def restore(self) -> None:
        """The pauses kept in the store, applied before the first wake; those that ran out
        while no daemon ran are ended now (`job.resumed`, by null)."""
        got = self.recorder.write(lambda store: store.pauses())
        rows = {} if got is FAILED else got
        now = self.clock.now()
        for name, row in rows.items():
            if row.until is not None and row.until <= now:
                self._clear(name)
                self.log.info("job.resumed", job=name, by=None, skipped=0)
                continue
            self.loop.pause(name, row.until)
            self._tell_paused(name, True)

    def pause(
        self, names: list[str], until: datetime | None, note: str | None, by: dict[str, object]
    ) -> dict[str, Any]:
        """Pause each of `names` (jobs of the file) until `until` (None: until resumed),
        for `by` (who asked). Raises ControlError (an `until` passed; the cluster's
        database away)."""
        now = self.clock.now()
        if until is not None and until <= now:
            raise ControlError("refused", f"{iso_utc(until)} has passed; give a later --until")
        row_by = json.dumps(by, separators=(",", ":"))
        if self.replicated:  # the cluster's pauses are the database's, or none
            rows = [PauseRow(name, now, until, note, row_by) for name in names]
            self._cluster_write(lambda store: _each(store.set_pause, rows), "pause")
        for name in names:
            self.loop.pause(name, until)
            if not self.replicated:  # else written above, for all of them
                row = PauseRow(name, now, until, note, row_by)
                self.recorder.write(lambda store, row=row: store.set_pause(row))  # type: ignore[misc]
            shown = None if until is None else iso_utc(until)
            self.log.warning("job.paused", job=name, until=shown, note=note, by=by)
            self._tell_paused(name, True)
        stored = self.recorder.store is not None and not self.recorder.degraded
        return {"jobs": names, "until": None if until is None else iso_utc(until), "stored": stored}

    def resume(self, names: list[str], by: dict[str, object]) -> dict[str, Any]:
        """End the pause of each of `names`, for `by` (who asked). Raises ControlError (the
        cluster's database away)."""
        if self.replicated:  # with who asked: the other replicas log it too
            row_by = json.dumps(by, separators=(",", ":"))
            self._cluster_write(_resume_each(names, row_by, self.clock.now()), "resume")
        resumed = []
        for name in names:
            skipped = self.loop.resume(name)
            if not self.replicated:  # else cleared above, for all of them
                self._clear(name)
            if skipped is None:  # it was not paused: nothing to say in the log
                resumed.append({"job": name, "skipped": 0, "was_paused": False})
                continue
            self.log.info("job.resumed", job=name, by=by, skipped=skipped)
            self._tell_paused(name, False)
            resumed.append({"job": name, "skipped": skipped})
        return {"resumed": resumed}

    def ran_out(self, name: str, skipped: int) -> None:
        """A pause's `until` came (the loop's `Effects.resumed`, through the daemon)."""
        self._clear(name)
        self.log.info("job.resumed", job=name, by=None, skipped=skipped)
        self._tell_paused(name, False)

    def _cluster_write(self, write: Callable[[Store], None], what: str) -> None:
        """A pause or resume of the whole cluster: written to its database first, or
        refused (a replica that held or freed the job alone would be undone by the others,
        or by the database, when it answers again)."""
        if self.recorder.write(write) is FAILED:
            raise ControlError("refused", DATABASE_AWAY.format(what=what))

    def _clear(self, name: str) -> None:
        self.recorder.write(lambda store: store.clear_pause(name))

    def _tell_paused(self, name: str, paused: bool) -> None:
        if self.on_paused is not None:
            self.on_paused(name, paused)


def _each(write: Callable[[T], None], items: Iterable[T]) -> None:
    """`write` each of `items` (in the store's one transaction each)."""
    for item in items:
        write(item)


def _resume_each(names: list[str], by: str, now: datetime) -> Callable[[Store], None]:
    """A resume's write to the cluster's store: each job's pause ended, and who asked
    kept for the other replicas' `job.resumed`."""

    def write(store: Store) -> None:
        for name in names:
            cast(Replicated, store).resume(name, by, now)

    return write
