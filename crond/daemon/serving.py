"""/metrics and /healthz over HTTP (crond/notify/http.py), served where `crond run
--metrics` or the file's `daemon.metrics` says: the counts crond/daemon/telling.py keeps,
and the heartbeat's liveness (crond/daemon/heartbeat.py).

An address that cannot be bound is logged (`metrics.failed`) and the daemon goes on; a
reload that moves it, or turns it on or off, serves it anew. The HTTP module is imported
only when metrics are on. docs/alerting.md is the user's side of this.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock
from crond.config.address import split_address
from crond.daemon.heartbeat import Heartbeat
from crond.daemon.telling import Telling


class Serving:
    """The metrics server of one daemon: `start` once, `configure` at each load."""

    def __init__(
        self, *, log: FilteringBoundLogger, clock: Clock, telling: Telling, heartbeat: Heartbeat
    ) -> None:
        self.log = log
        self.clock = clock
        self.telling = telling  # its metrics, made when a file first asks for them
        self.heartbeat = heartbeat
        self.address: str | None = None  # where /metrics is served (the port bound)
        self._server: asyncio.Server | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._wanted: str | None = None  # the address asked for (bound or not)

    def configure(self, metrics: str | None) -> None:
        """A file just loaded: /metrics at `metrics` (HOST:PORT, the flag's or the file's;
        None: not served). After `start`, served anew there if it changed (turned on,
        moved, or off). The telling's `configure` comes first: it makes the metrics."""
        if metrics == self._wanted:
            return
        self._wanted = metrics
        if self._tasks is not None:
            self._tasks.create_task(self._serve(metrics), name="crond-metrics-serve")

    async def start(self, tasks: asyncio.TaskGroup) -> None:
        """Serve /metrics where the last `configure` said; later moves in tasks of `tasks`."""
        self._tasks = tasks
        await self._serve(self._wanted)

    async def _serve(self, address: str | None) -> None:
        if self._server is not None:
            await self.aclose()
            self.log.info("metrics.stopped", address=self.address)
        self.address = None
        metrics = self.telling.metrics
        if address is None or metrics is None:
            return
        from crond.notify import http  # noqa: PLC0415  (only when on)

        host, port = split_address(address)
        routes = {"/metrics": metrics.route, "/healthz": self._healthz}
        try:
            self._server = await http.serve(host, port, routes, log=self.log)
        except OSError as exc:
            self.log.error("metrics.failed", address=address, error=exc.strerror or str(exc))
            return
        bound = self._server.sockets[0].getsockname() if self._server.sockets else (host, port)
        self.address = f"[{bound[0]}]:{bound[1]}" if ":" in bound[0] else f"{bound[0]}:{bound[1]}"
        self.log.info("metrics.serving", address=self.address)  # the port bound, for `:0`

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    def _healthz(self) -> tuple[int, str, bytes]:
        """200 and the liveness JSON while the loop beats; 503 when it is stale."""
        beat = self.heartbeat
        payload = beat.payload(beat.last_beat or self.clock.now())
        fresh = beat.fresh()
        payload["fresh"] = fresh
        body = json.dumps(payload, separators=(",", ":")).encode() + b"\n"
        return (200 if fresh else 503), "application/json", body
