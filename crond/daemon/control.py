"""The daemon's answers on its control socket (docs/control.md): `ps`, `trigger`, `kill`,
`pause`, `resume`, `reload`, between the socket's server (crond/control/server.py) and the loop.

Each answer is worked out on the loop's own thread, in a few microseconds (with replicas,
what the database is asked is awaited, at most a second, and not asked while it is
away: crond/daemon/offloop.py), and logged
with who asked (`by`: the caller's uid, user and pid from the socket's credentials).
A pause or resume is checked here (the jobs are the file's, the instant is one) and
carried out by the daemon's Pausing (crond/daemon/pausing.py).
`trigger --wait` and `follow` send a run's output lines on as they are logged;
a caller that stops reading is dropped by the server, never waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc
from crond.control.callers import Caller
from crond.control.names import no_job
from crond.control.protocol import ControlError, ok, parse_instant
from crond.control.server import ControlServer, Send
from crond.daemon.backfill_control import backfill_command
from crond.daemon.backfilling import Backfilling
from crond.daemon.cluster import Cluster
from crond.daemon.locksview import lock_waits
from crond.daemon.loop import Loop, Pending
from crond.daemon.pausing import Pausing
from crond.run import runner

STREAM_BACKLOG = 1000  # lines of a waited-for run queued for a caller that reads slowly


class Steering:
    """The control socket's Handler for one daemon."""

    def __init__(
        self,
        *,
        log: FilteringBoundLogger,
        clock: Clock,
        loop: Loop[runner.Run],
        pausing: Pausing,
        backfilling: Backfilling,
        cluster: Cluster | None = None,
        reload: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self.log = log
        self.no_chain: set[str] = set()  # `trigger --no-chain`'s runs (daemon/chaining.py)
        self.cluster = cluster  # a replica's: ps and kill reach the other replicas
        self.clock = clock
        self.loop = loop
        self.pausing = pausing
        self._server: ControlServer | None = None
        self.reload = reload  # the daemon's, as SIGHUP's, answering its outcome (lifecycle.py)
        self.backfilling = backfilling  # `crond backfill`, and kill's

    async def start(self, path: Path | None) -> None:
        """Listen at `path` (None: `control_socket: none`). A socket that cannot be made is
        logged (`control.failed`) and the daemon runs on without it."""
        if path is None:
            return
        from crond.control import server, socketfile  # noqa: PLC0415  (only when on)

        try:
            self._server = await server.serve(path, self, log=self.log)
        except socketfile.SocketRefused as exc:
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

    # --- the Handler --------------------------------------------------------------------

    async def handle(  # noqa: PLR0911  (one return a command)
        self, cmd: str, args: dict[str, Any], caller: Caller, send: Send
    ) -> dict[str, Any]:
        if cmd == "ps":
            waiting = {"waiting": w} if (w := lock_waits(self.loop.core.locks)) else {}
            return ok({"runs": await self._ps(), **waiting, **self._whoami()})
        if cmd == "reload" and self.reload is not None:
            self.log.info("config.reload_requested", by=caller.by())
            return ok(await self.reload())
        if cmd == "trigger":
            chain = bool(args.get("chain", True))
            return await self._trigger(
                str(args["job"]), bool(args.get("wait")), caller, send, chain
            )
        if cmd == "kill":
            return ok(await self._kill(str(args["target"]), caller))
        if cmd == "follow":
            return await self._follow(str(args["run_id"]), send)
        if cmd == "backfill":
            return await backfill_command(self.backfilling, self._known, args, caller, send)
        if cmd == "pause":
            names, until = self._names(args), parse_instant(args.get("until"))
            return ok(await self.pausing.pause(names, until, args.get("note"), caller.by()))
        if cmd == "resume":
            every = args.get("all")
            names = list(self.loop.core.pauses.listing()) if every else self._names(args)
            return ok(await self.pausing.resume(names, caller.by()))
        raise ControlError("unknown_command", f"{cmd!r} is not a command of this daemon")

    async def _ps(self) -> list[dict[str, Any]]:
        """The runs going: this daemon's, and with replicas every other replica's too."""
        rows = [self._run_row(run) for run in self.loop.going.all()]
        if self.cluster is None:
            return rows
        for row in rows:
            row["replica"] = self.cluster.replica
        return rows + await self.cluster.other_runs()

    def _whoami(self) -> dict[str, Any]:
        """This daemon's pid (for a `kill -HUP` or a debugger), and its replica's name."""
        mine: dict[str, Any] = {"pid": os.getpid()}
        if self.cluster is not None:
            mine["replica"] = self.cluster.replica
        return mine

    def _run_row(self, run: runner.Run) -> dict[str, Any]:
        started = run.slot + timedelta(milliseconds=max(0.0, run.lag_ms))
        elapsed = (self.clock.now() - started).total_seconds()
        held = self.loop.core.locks.taken_by(run.job, run.slot)
        return {
            **({"locks": list(held)} if held else {}),
            "job": run.job,
            "run_id": run.run_id,
            "attempt": run.attempt,
            "pid": run.pid,
            "slot": iso_utc(run.slot),
            "started": iso_utc(started),
            "elapsed": round(max(0.0, elapsed), 3),
        }

    async def _trigger(
        self, name: str, wait: bool, caller: Caller, send: Send, chain: bool = True
    ) -> dict[str, Any]:
        self._known([name])
        started = await self.loop.trigger(name)
        if isinstance(started, str):
            raise ControlError("refused", started)
        if isinstance(started, Pending):  # overlap: replace: it starts once they stopped
            became = await started.started()
            if became is None:
                raise ControlError("refused", f"{name}'s triggered run was stopped before it began")
            started = became
        run = started
        if not chain:  # `trigger --no-chain`: its end starts no chained run
            self.no_chain.add(run.run_id)
        self.log.info("job.triggered", job=name, run_id=run.run_id, by=caller.by())
        if not wait:
            return ok({"run_id": run.run_id})
        return await self._stream(run, send)

    async def _follow(self, run_id: str, send: Send) -> dict[str, Any]:
        """A run going here: its output lines from now on, then how it ended."""
        run = next((r for r in self.loop.going.all() if r.run_id == run_id), None)
        if run is None:
            raise ControlError("not_found", f"no run {run_id!r} is going in this daemon")
        return await self._stream(run, send)

    async def _stream(self, run: runner.Run, send: Send) -> dict[str, Any]:
        """Send `run`'s output lines as they come, then its end (a slow reader loses
        lines: at most STREAM_BACKLOG wait for it)."""
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

    async def _kill(self, target: str, caller: Caller) -> dict[str, Any]:
        told, runs = self.backfilling.kill(target, caller.by())
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
            return {"stopped": stopped, **told}
        for row in stopped:
            row["replica"] = self.cluster.replica
        mine = runs and _looks_like_run_id(target)  # the one run, here: no other to ask
        asked = [] if mine else await self.cluster.request_kill(target, caller.by())
        return {"stopped": stopped, "asked": asked, **told}

    # --- helpers ------------------------------------------------------------------------

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
                raise ControlError("not_found", no_job(name, jobs))


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


def _looks_like_run_id(text: str) -> bool:
    return len(text) == 36 and text.count("-") == 4
