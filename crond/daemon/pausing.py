"""A daemon's pauses (`crond pause`, `resume`; docs/control.md): each kept in the state
store, so it outlives reloads and restarts (with replicas, in the cluster's database,
first or not at all), and in the loop, which starts no scheduled run of a paused job
and wakes when a pause runs out; each begun or ended is logged (`job.paused`,
`job.resumed`) and told to the metrics (crond_job_paused).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc
from crond.control.protocol import ControlError
from crond.daemon.loop import Loop
from crond.daemon.offloop import SLOW  # the start's reads: the loop is not yet scheduling
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED
from crond.run import runner
from crond.store.base import PauseRow, Replicated, Store

T = TypeVar("T")
# The work of a pause or resume of many jobs goes in slices: rows a commit in the
# daemon's own store, and at most WORK_S of log lines (`job.paused`, `job.resumed`) and
# metrics; between two, REST_S for the loop, long enough for a due run's start (several
# of the loop's turns) to go through unslowed (docs/performance.md, bench_pause.py).
SLICE = 200
WORK_S, REST_S = 0.002, 0.001
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
        noted: Callable[[Sequence[str], datetime], None] | None = None,
    ) -> None:
        self.log = log
        self.clock = clock
        self.loop = loop
        self.recorder = recorder
        # Told (job, paused) whenever a pause begins or ends (the metrics' crond_job_paused).
        self.on_paused = on_paused
        # With replicas, the pauses are the cluster's database's: written there for all,
        # and `noted` tells the cluster's poll of those begun here (crond/daemon/polling.py).
        self.noted = noted
        self.replicated = noted is not None
        # One pause or resume applied at a time, in the order asked (the lock is fair).
        self._turn = asyncio.Lock()
        self._applying: set[asyncio.Task[dict[str, Any]]] = set()  # kept till done
        self._writing: set[str] = set()  # the jobs of a pause being written to the store

    async def restore(self) -> None:
        """The pauses kept in the store, applied before the first wake; those that ran out
        while no daemon ran are ended now (`job.resumed`, by null)."""
        got = await self.recorder.ask(lambda store: store.pauses(), deadline=SLOW)
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
        # Kept first: with replicas in the cluster's database, all in one commit or none;
        # else in the daemon's own store, a commit per slice. Then held by the loop, all
        # at once (microseconds a job); the log lines and metrics in slices.
        self._writing = set(names)
        try:
            await self._write(rows, lambda store, part: store.set_pauses(part), "pause")
        finally:
            self._writing = set()
        async with self.loop.lock:  # never in the middle of a wake
            for name in names:
                self.loop.pause(name, until)
            if self.noted is not None:
                self.noted(names, now)
        shown = None if until is None else iso_utc(until)
        rest = Rests()
        for name in names:
            self.log.warning("job.paused", job=name, until=shown, note=note, by=by)
            self._tell_paused(name, True)
            await rest.maybe()  # the loop's turn: a slot due now starts on time
        stored = self.recorder.store is not None and not self.recorder.degraded
        return {"jobs": names, "until": shown, "stored": stored}

    async def _resume(self, names: list[str], by: dict[str, object]) -> dict[str, Any]:
        if self.replicated:  # with who asked: the other replicas log it too
            row_by = json.dumps(by, separators=(",", ":"))
            now = self.clock.now()
            await self._write(
                names,
                lambda store, part: cast(Replicated, store).resume_many(part, row_by, now),
                "resume",
            )
        else:
            await self._write(names, lambda store, part: store.clear_pauses(part), "resume")
        async with self.loop.lock:
            ended = [(name, self.loop.resume(name)) for name in names]
        resumed: list[dict[str, Any]] = []
        rest = Rests()
        for name, skipped in ended:
            if skipped is None:  # it was not paused: nothing to say in the log
                resumed.append({"job": name, "skipped": 0, "was_paused": False})
                continue
            self.log.info("job.resumed", job=name, by=by, skipped=skipped)
            self._tell_paused(name, False)
            resumed.append({"job": name, "skipped": skipped})
            await rest.maybe()
        return {"resumed": resumed}

    def ran_out(self, name: str, skipped: int) -> None:
        """A pause's `until` came (the loop's `Effects.resumed`, through the daemon). Its
        row is kept when a pause being written replaced it (held by the loop next)."""
        if name not in self._writing:
            self._clear(name)
        self.log.info("job.resumed", job=name, by=None, skipped=skipped)
        self._tell_paused(name, False)

    async def _write(
        self, items: Sequence[T], write: Callable[[Store, Sequence[T]], None], what: str
    ) -> None:
        """A pause or resume kept in the store. With replicas, of the whole cluster: in its
        database first, in one commit, or refused (a replica that held or freed the jobs
        alone would be undone by the others, or by the database, when it answers again).
        The daemon's own store takes a commit per SLICE jobs, the loop's turn between two
        (10,000 rows in one SQLite commit held the loop ~0.1 s); one that fails is degraded
        (the answer says `stored`), and a pause running out meanwhile leaves the rows
        written alone (`ran_out`)."""
        if self.replicated:  # awaited, at most a second (crond/daemon/offloop.py)
            if await self.recorder.ask(lambda store: write(store, items)) is FAILED:
                raise ControlError("refused", DATABASE_AWAY.format(what=what))
            return
        for part in _slices(items):
            self.recorder.write(lambda store, part=part: write(store, part))  # type: ignore[misc]
            await asyncio.sleep(REST_S)

    def _clear(self, name: str) -> None:
        self.recorder.send(lambda store: store.clear_pause(name))

    def _tell_paused(self, name: str, paused: bool) -> None:
        if self.on_paused is not None:
            self.on_paused(name, paused)


class Rests:
    """A rest of REST_S for the loop after each WORK_S of work."""

    def __init__(self) -> None:
        self.since = time.perf_counter()

    async def maybe(self) -> None:
        if time.perf_counter() - self.since >= WORK_S:
            await asyncio.sleep(REST_S)
            self.since = time.perf_counter()


def _slices(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """`items` by SLICE: the work done between two of the loop's turns."""
    for at in range(0, len(items), SLICE):
        yield items[at : at + SLICE]
