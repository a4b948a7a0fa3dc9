"""The daemon's answers on its control socket (docs/control.md): `ps`, `trigger`, `kill`,
`pause`, `resume`, `reload`, between the socket's server (crond/control/server.py) and the loop.

Each answer is worked out on the loop's own thread, in a few microseconds, and logged
with who asked (`by`: the caller's uid, user and pid from the socket's credentials). A
pause is kept in the state store (so it outlives reloads and restarts) and in the loop
(which starts no scheduled run of a paused job, and wakes when a pause runs out).
`trigger --wait` follows the run's output lines as they are logged and sends them on;
a caller that stops reading is dropped by the server, never waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc
from crond.config import problems
from crond.control.protocol import ControlError, ok
from crond.control.server import Caller, ControlServer, Send
from crond.daemon.cluster import Cluster
from crond.daemon.loop import Loop, Pending
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED
from crond.run import runner
from crond.store.base import PauseRow, Replicated, Store

# A pause's until: an instant crond can store and show (a pause for longer than that is
# one `until resumed`).
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_LATEST = datetime(2200, 1, 1, tzinfo=UTC)
T = TypeVar("T")
STREAM_BACKLOG = 1000  # lines of a waited-for run queued for a caller that reads slowly
# A pause or resume refused while the database is away, as docs/control.md and
# docs/replicas.md quote it: the event it names is in every replica's log, with no setting.
DATABASE_AWAY = (
    "the cluster's database is unavailable: a {what} applies to every replica and is kept "
    "there; try again when it answers (the daemon logs database.available then)"
)


class Steering:
    """The control socket's Handler for one daemon."""

    def __init__(
        self,
        *,
        log: FilteringBoundLogger,
        clock: Clock,
        loop: Loop[runner.Run],
        recorder: StoreRecorder,
        on_paused: Callable[[str, bool], None] | None = None,
        cluster: Cluster | None = None,
        reload: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self.log = log
        self.cluster = cluster  # a replica's: ps and kill reach the other replicas
        self.clock = clock
        self.loop = loop
        self.recorder = recorder
        # Told (job, paused) whenever a pause begins or ends (the metrics' crond_job_paused).
        self.on_paused = on_paused
        self._server: ControlServer | None = None
        # `reload`: the daemon's reload, as SIGHUP's, answering its outcome (lifecycle.py).
        self.reload = reload

    async def start(self, path: Path | None) -> None:
        """Listen at `path` (None: `control_socket: none`). A socket that cannot be made is
        logged (`control.failed`) and the daemon runs on without it."""
        if path is None:
            return
        from crond.control import server  # noqa: PLC0415  (only when on)

        try:
            self._server = await server.serve(path, self, log=self.log)
        except server.SocketRefused as exc:
            self.log.error("control.failed", path=str(path), error=str(exc))
            return
        except OSError as exc:  # its directory cannot be made or reached
            self.log.error("control.failed", path=str(path), error=exc.strerror or str(exc))
            return
        self.log.info("control.listening", path=str(path))

    async def aclose(self) -> None:
        if self._server is not None:
            await self._server.aclose()
            self._server = None

    # --- start --------------------------------------------------------------------------

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

    # --- the Handler --------------------------------------------------------------------

    async def handle(
        self, cmd: str, args: dict[str, Any], caller: Caller, send: Send
    ) -> dict[str, Any]:
        if cmd == "ps":
            return ok({"runs": self._ps(), **self._whoami()})
        if cmd == "reload" and self.reload is not None:
            self.log.info("config.reload_requested", by=caller.by())
            return ok(await self.reload())
        if cmd == "trigger":
            return await self._trigger(str(args["job"]), bool(args.get("wait")), caller, send)
        if cmd == "kill":
            return ok(self._kill(str(args["target"]), caller))
        if cmd == "pause":
            return ok(self._pause(args, caller))
        if cmd == "resume":
            return ok(self._resume(args, caller))
        raise ControlError("unknown_command", f"{cmd!r} is not a command of this daemon")

    def _ps(self) -> list[dict[str, Any]]:
        """The runs going: this daemon's, and with replicas every other replica's too."""
        rows = [self._run_row(run) for run in self.loop.going.all()]
        if self.cluster is None:
            return rows
        for row in rows:
            row["replica"] = self.cluster.replica
        return rows + self.cluster.other_runs()

    def _whoami(self) -> dict[str, Any]:
        """This daemon's pid (for a `kill -HUP` or a debugger), and its replica's name."""
        mine: dict[str, Any] = {"pid": os.getpid()}
        if self.cluster is not None:
            mine["replica"] = self.cluster.replica
        return mine

    def _run_row(self, run: runner.Run) -> dict[str, Any]:
        started = run.slot + timedelta(milliseconds=max(0.0, run.lag_ms))
        elapsed = (self.clock.now() - started).total_seconds()
        return {
            "job": run.job,
            "run_id": run.run_id,
            "attempt": run.attempt,
            "pid": run.pid,
            "slot": iso_utc(run.slot),
            "started": iso_utc(started),
            "elapsed": round(max(0.0, elapsed), 3),
        }

    async def _trigger(self, name: str, wait: bool, caller: Caller, send: Send) -> dict[str, Any]:
        self._known([name])
        started = self.loop.trigger(name)
        if isinstance(started, str):
            raise ControlError("refused", started)
        if isinstance(started, Pending):  # overlap: replace: it starts once they stopped
            became = await started.started()
            if became is None:
                raise ControlError("refused", f"{name}'s triggered run was stopped before it began")
            started = became
        run = started
        self.log.info("job.triggered", job=name, run_id=run.run_id, by=caller.by())
        if not wait:
            return ok({"run_id": run.run_id})

        lines: asyncio.Queue[tuple[str, str]] = asyncio.Queue(STREAM_BACKLOG)

        def follow(stream: str, line: str) -> None:
            with contextlib.suppress(asyncio.QueueFull):  # a slow reader loses lines
                lines.put_nowait((stream, line))

        run.budget.listeners.append(follow)
        ended = asyncio.ensure_future(run.wait())
        try:
            while not (ended.done() and lines.empty()):  # the pumps drain before the end
                item = await _next_line(lines, ended)
                if item is not None:
                    await send({"stream": item[0], "line": item[1]})
            result = await ended
        finally:
            with contextlib.suppress(ValueError):
                run.budget.listeners.remove(follow)
        return ok(
            {
                "run_id": run.run_id,
                "outcome": result.outcome.value,
                "exit_code": result.exit_code,
            }
        )

    def _kill(self, target: str, caller: Caller) -> dict[str, Any]:
        runs = self.loop.kill(target)
        if (
            not runs
            and target not in self.loop.core.schedule.entries
            and not _looks_like_run_id(target)
        ):
            self._known([target])
        stopped: list[dict[str, Any]] = []
        for run in runs:
            self.log.warning("job.kill_requested", job=run.job, run_id=run.run_id, by=caller.by())
            stopped.append({"job": run.job, "run_id": run.run_id, "pid": run.pid})
        if self.cluster is None:
            return {"stopped": stopped}
        for row in stopped:
            row["replica"] = self.cluster.replica
        mine = runs and _looks_like_run_id(target)  # the one run, here: no other to ask
        return {"stopped": stopped, "asked": [] if mine else self.cluster.request_kill(
            target, caller.by())}  # fmt: skip

    def _pause(self, args: dict[str, Any], caller: Caller) -> dict[str, Any]:
        names = self._names(args)
        until = _instant(args.get("until"))
        now = self.clock.now()
        if until is not None and until <= now:
            raise ControlError("refused", f"{iso_utc(until)} has passed; give a later --until")
        note = args.get("note")
        by = caller.by()
        row_by = json.dumps(by, separators=(",", ":"))
        if self.cluster is not None:  # the cluster's pauses are the database's, or none
            rows = [PauseRow(name, now, until, note, row_by) for name in names]
            self._cluster_write(lambda store: _each(store.set_pause, rows), "pause")
        for name in names:
            self.loop.pause(name, until)
            if self.cluster is None:  # else written above, for all of them
                row = PauseRow(name, now, until, note, row_by)
                self.recorder.write(lambda store, row=row: store.set_pause(row))  # type: ignore[misc]
            shown = None if until is None else iso_utc(until)
            self.log.warning("job.paused", job=name, until=shown, note=note, by=by)
            self._tell_paused(name, True)
        stored = self.recorder.store is not None and not self.recorder.degraded
        return {"jobs": names, "until": None if until is None else iso_utc(until), "stored": stored}

    def _resume(self, args: dict[str, Any], caller: Caller) -> dict[str, Any]:
        names = list(self.loop.core.pauses.listing()) if args.get("all") else self._names(args)
        if self.cluster is not None:  # with who asked: the other replicas log it too
            row_by = json.dumps(caller.by(), separators=(",", ":"))
            self._cluster_write(_resume_each(names, row_by, self.clock.now()), "resume")
        resumed = []
        for name in names:
            skipped = self.loop.resume(name)
            if self.cluster is None:  # else cleared above, for all of them
                self._clear(name)
            if skipped is None:  # it was not paused: nothing to say in the log
                resumed.append({"job": name, "skipped": 0, "was_paused": False})
                continue
            self.log.info("job.resumed", job=name, by=caller.by(), skipped=skipped)
            self._tell_paused(name, False)
            resumed.append({"job": name, "skipped": skipped})
        return {"resumed": resumed}

    def ran_out(self, name: str, skipped: int) -> None:
        """A pause's `until` came (the loop's `Effects.resumed`, through the daemon)."""
        self._clear(name)
        self.log.info("job.resumed", job=name, by=None, skipped=skipped)
        self._tell_paused(name, False)

    # --- helpers ------------------------------------------------------------------------

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

    def _names(self, args: dict[str, Any]) -> list[str]:
        if args.get("all"):
            return list(self.loop.core.schedule.entries)
        names = [str(name) for name in args.get("jobs") or []]
        self._known(names)
        return names

    def _known(self, names: Iterable[str]) -> None:
        """Every name a job of the file, or not_found with the closest names."""
        jobs = self.loop.core.schedule.entries
        for name in names:
            if name not in jobs:
                close = problems.close_matches(name, _candidates(name, jobs), cutoff=0.6)
                hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
                raise ControlError("not_found", f"no job {name!r} in the file{hint}")


async def _next_line(
    lines: asyncio.Queue[tuple[str, str]], ended: asyncio.Future[Any]
) -> tuple[str, str] | None:
    """The next line of a waited-for run, or None once it ended (and nothing is left)."""
    if not lines.empty():
        return lines.get_nowait()
    getter = asyncio.ensure_future(lines.get())
    await asyncio.wait({getter, ended}, return_when=asyncio.FIRST_COMPLETED)
    if getter.done():
        return getter.result()
    getter.cancel()
    return None


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


def _instant(value: object) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        raise ControlError("bad_request", f"{value!r} is not an ISO-8601 instant") from None
    if when.tzinfo is None:
        raise ControlError("bad_request", f"{value!r} has no UTC offset")
    try:
        utc = when.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not _EARLIEST <= utc <= _LATEST:
        raise ControlError("bad_request", f"{value!r} is not an instant between now and 2200")
    return utc


def _looks_like_run_id(text: str) -> bool:
    return len(text) == 36 and text.count("-") == 4


_SUGGEST_FROM = 500  # names compared for a did-you-mean, at most (difflib is quadratic)


def _candidates(name: str, jobs: Iterable[str]) -> list[str]:
    """The job names a did-you-mean compares `name` with: those of about its length, at
    most _SUGGEST_FROM, so a file of 10,000 jobs answers a typo in a millisecond or two on
    the loop's thread, not in seconds. A name longer than any job's may be has none."""
    if len(name) > 64:  # longer than a job name can be (docs/configuration.md)
        return []
    near = (job for job in jobs if abs(len(job) - len(name)) <= 2)
    return list(itertools.islice(near, _SUGGEST_FROM))
