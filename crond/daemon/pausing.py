"""A daemon's pauses (`crond pause`, `resume`; docs/control.md): each kept in the state
store, so it outlives reloads and restarts (with replicas, in the cluster's database,
first or not at all), and in the loop, which starts no scheduled run of a paused job
and wakes when a pause runs out; each begun or ended is logged (`job.paused`,
`job.resumed`) and told to the metrics (crond_job_paused).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator, Sequence
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
# Jobs whose log lines (`job.paused`, `job.resumed`) and metrics are done between two of
# the loop's turns: about 3 ms here (docs/performance.md), however many jobs are asked.
SLICE = 200
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
        # One pause or resume applied at a time, in the order asked (the lock is fair).
        self._turn = asyncio.Lock()
        self._applying: set[asyncio.Task[dict[str, Any]]] = set()  # kept till done

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

    async def pause(
        self, names: list[str], until: datetime | None, note: str | None, by: dict[str, object]
    ) -> dict[str, Any]:
        """Pause each of `names` (jobs of the file) until `until` (None: until resumed),
        for `by` (who asked), after the pauses and resumes asked before. Raises
        ControlError (an `until` passed; the cluster's database away)."""
        return await self._in_turn(lambda: self._pause(names, until, note, by))

    async def resume(self, names: list[str], by: dict[str, object]) -> dict[str, Any]:
        """End the pause of each of `names`, for `by` (who asked), after the pauses and
        resumes asked before. Raises ControlError (the cluster's database away)."""
        return await self._in_turn(lambda: self._resume(names, by))

    async def _in_turn(self, work: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """`work` once the pauses and resumes asked before it are applied (one at a time,
        in the order asked: two `pause --all` never interleave), and carried through
        even if the caller hangs up meanwhile (the server cancels its answer): a pause
        half logged would not be what the store and the loop hold."""

        async def in_turn() -> dict[str, Any]:
            async with self._turn:
                return await work()

        task = asyncio.ensure_future(in_turn())
        self._applying.add(task)
        task.add_done_callback(self._applying.discard)
        return await asyncio.shield(task)

    async def _pause(
        self, names: list[str], until: datetime | None, note: str | None, by: dict[str, object]
    ) -> dict[str, Any]:
        now = self.clock.now()
        if until is not None and until <= now:
            raise ControlError("refused", f"{iso_utc(until)} has passed; give a later --until")
        row_by = json.dumps(by, separators=(",", ":"))
        rows = [PauseRow(name, now, until, note, row_by) for name in names]
        # The store and the loop at once, with no yield between them: every job in one
        # commit (with replicas in the cluster's database first, all or none), then held
        # by the loop (microseconds a job); only the log lines and metrics go in slices.
        self._write(lambda store: store.set_pauses(rows), "pause")
        for name in names:
            self.loop.pause(name, until)
        shown = None if until is None else iso_utc(until)
        for part in _slices(names):
            for name in part:
                self.log.warning("job.paused", job=name, until=shown, note=note, by=by)
                self._tell_paused(name, True)
            await asyncio.sleep(0)  # the loop's turn: a slot due now starts on time
        stored = self.recorder.store is not None and not self.recorder.degraded
        return {"jobs": names, "until": shown, "stored": stored}

    async def _resume(self, names: list[str], by: dict[str, object]) -> dict[str, Any]:
        if self.replicated:  # with who asked: the other replicas log it too
            row_by = json.dumps(by, separators=(",", ":"))
            now = self.clock.now()
            self._write(lambda store: cast(Replicated, store).resume_many(names, row_by, now),
                        "resume")  # fmt: skip
        else:
            self._write(lambda store: store.clear_pauses(names), "resume")
        ended = [(name, self.loop.resume(name)) for name in names]
        resumed: list[dict[str, Any]] = []
        for part in _slices(ended):
            for name, skipped in part:
                if skipped is None:  # it was not paused: nothing to say in the log
                    resumed.append({"job": name, "skipped": 0, "was_paused": False})
                    continue
                self.log.info("job.resumed", job=name, by=by, skipped=skipped)
                self._tell_paused(name, False)
                resumed.append({"job": name, "skipped": skipped})
            await asyncio.sleep(0)
        return {"resumed": resumed}

    def ran_out(self, name: str, skipped: int) -> None:
        """A pause's `until` came (the loop's `Effects.resumed`, through the daemon)."""
        self._clear(name)
        self.log.info("job.resumed", job=name, by=None, skipped=skipped)
        self._tell_paused(name, False)

    def _write(self, write: Callable[[Store], None], what: str) -> None:
        """A pause or resume kept in the store, in one commit. With replicas, of the whole
        cluster: written to its database first, or refused (a replica that held or freed
        the jobs alone would be undone by the others, or by the database, when it answers
        again). A daemon's own store that fails is degraded (the answer says `stored`)."""
        if self.recorder.write(write) is FAILED and self.replicated:
            raise ControlError("refused", DATABASE_AWAY.format(what=what))

    def _clear(self, name: str) -> None:
        self.recorder.write(lambda store: store.clear_pause(name))

    def _tell_paused(self, name: str, paused: bool) -> None:
        if self.on_paused is not None:
            self.on_paused(name, paused)


def _slices(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """`items` by SLICE: the work done between two of the loop's turns."""
    for at in range(0, len(items), SLICE):
        yield items[at : at + SLICE]
