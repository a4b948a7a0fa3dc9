"""What the daemon does on its signals, and on `crond reload` (docs/control.md).

SIGHUP re-reads the file, in a thread, through the same `config.load` as `crond validate`;
a bad file is logged (`config.reload_failed`) and the old jobs keep running; SIGHUPs that
arrive while a file is being read coalesce into one more read. `crond reload` is a SIGHUP
that answers its outcome. SIGTERM/SIGINT start no new run, wait up to `shutdown_timeout`
for the running ones, then stop them as for a timeout; a second signal stops them at once.
Swapping in a file that passed is the daemon's (crond/daemon/lifecycle.py).
"""

from __future__ import annotations

import asyncio
import functools
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from structlog.typing import FilteringBoundLogger

from crond.config import loader, problems
from crond.config.loaded import LoadedConfig
from crond.daemon.loop import Loop
from crond.daemon.systemd import Systemd
from crond.run import runner

# Swaps in a file that passed (and its digest): the reload's outcome, for `crond reload`.
Swap = Callable[[LoadedConfig, str | None], dict[str, Any]]


class Signals:
    """SIGHUP's reload and SIGTERM's drain for one daemon; `configure` at each load,
    `start` with the TaskGroup that owns what they start."""

    def __init__(
        self,
        *,
        path: Path,
        log: FilteringBoundLogger,
        notifier: Systemd,
        loop: Loop[runner.Run],
        swap: Swap,
        on_reloaded: Callable[[bool], None],
    ) -> None:
        self.path = path
        self.log = log
        self.notifier = notifier
        self.loop = loop
        self.swap = swap
        self.on_reloaded = on_reloaded  # a reload's outcome (the metrics)
        self.jobs = 0  # the jobs of the file in use (a refused reload keeps them)
        self.shutdown_timeout = 0.0
        self._signals = 0  # stop signals received
        self._reload_wanted = False
        self._reloading: asyncio.Task[None] | None = None
        self._reloaded: dict[str, Any] = {}  # the last reload's outcome, for `crond reload`
        self._tasks: asyncio.TaskGroup | None = None

    def configure(self, cfg: LoadedConfig) -> None:
        self.jobs = len(cfg.jobs)
        self.shutdown_timeout = cfg.daemon.shutdown_timeout.total_seconds()

    def start(self, tasks: asyncio.TaskGroup) -> None:
        """From now on, what the signals start is a task of `tasks`."""
        self._tasks = tasks

    # --- SIGHUP, `crond reload` --------------------------------------------------------

    def hup(self) -> None:
        self._reload_wanted = True
        if self._reloading is None or self._reloading.done():
            self._reloading = self._own(self._reload())

    async def _reload(self) -> None:
        # Signals that arrive while a file is being read coalesce into one more read,
        # so a burst of SIGHUPs ends with exactly the last file loaded.
        while self._reload_wanted and not self._signals:
            self._reload_wanted = False
            self.notifier.reloading()
            new = await _read(self.path, self.log)
            if isinstance(new, list):
                self._reloaded = {"reloaded": False, "errors": new, "jobs": self.jobs}
            elif not self._signals:
                async with self.loop.lock:  # never in the middle of a wake
                    self._reloaded = self.swap(*new)
            self.on_reloaded(not isinstance(new, list))
            self.notifier.ready()

    async def reload_asked(self) -> dict[str, Any]:
        """A reload asked on the control socket: SIGHUP's, and its outcome once done (a
        reload already under way reads the file once more, as for a second SIGHUP)."""
        if self._signals:
            return {"reloaded": False, "errors": ["the daemon is stopping"], "jobs": self.jobs}
        self.hup()
        assert self._reloading is not None
        await asyncio.shield(self._reloading)  # a caller that hangs up stops no reload
        return self._reloaded

    # --- SIGTERM, SIGINT ---------------------------------------------------------------

    def stop(self, signum: int) -> None:
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals == 1:
            self.log.info("daemon.stopping", signal=name, running=self.loop.going.count())
            self.notifier.stopping()
            self.loop.stop()
            self._own(self._drain())
        else:
            self.log.warning("daemon.stopping", signal=name, running=self.loop.going.count())
            for run in self.loop.going.all():
                run.kill()

    async def _drain(self) -> None:
        """After shutdown_timeout, stop what still runs as for a timeout."""
        try:
            async with asyncio.timeout(self.shutdown_timeout):
                await self.loop.idle.wait()
        except TimeoutError:
            for run in self.loop.going.all():
                run.stop()

    def _own(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        assert self._tasks is not None, "signals are handled only while serving"
        return self._tasks.create_task(coro)


async def _read(
    path: Path, log: FilteringBoundLogger
) -> tuple[LoadedConfig, str | None] | list[str]:
    """The file again, through the same checks as at start; its errors (logged) if refused."""
    try:
        return await asyncio.to_thread(functools.partial(loader.load_file, path, strict=True))
    except problems.ConfigError as exc:
        errors = [str(p) for p in exc.problems]
    except Exception as exc:  # noqa: BLE001  (a bug of the loader must not stop the jobs)
        errors = [f"{path}: could not be loaded ({type(exc).__name__}: {exc})"]
    log.error("config.reload_failed", errors=errors)
    return errors
