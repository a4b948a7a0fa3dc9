"""The daemon's lifecycle: start and shutdown, `crond run`.

`Service` owns the daemon's parts (made and wired in crond/daemon/parts.py) and is the
scheduling loop's Effects (the protocol in crond/daemon/runs.py): what the loop does to
the world goes through it to them. What the signals do (SIGHUP's reload, SIGTERM's
drain) is crond/daemon/signals.py; the spawn path of the runs, crond/daemon/spawning.py;
the heartbeat (liveness file, systemd watchdog, the store's checks),
crond/daemon/heartbeat.py, called by the scheduling loop itself; what is recorded in the
state store, crond/daemon/recorder.py and crond/daemon/view.py; what a failing store
costs, crond/daemon/stores.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import resource
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from structlog.typing import FilteringBoundLogger

from crond import __version__, ownership
from crond.clock import Clock, SystemClock
from crond.config import loader, problems
from crond.config.loaded import LoadedConfig, LoadedJob
from crond.control.server import socket_path
from crond.daemon import events, parts, reaper
from crond.daemon import taken as socket_taken
from crond.daemon.cluster import database_url, given_problems
from crond.daemon.loop import Gate
from crond.daemon.runs import Starts
from crond.run import runner
from crond.schedule.actions import Claims, Key
from crond.schedule.rules import Decision, Entry
from crond.store import locate
from crond.store.base import AttemptRow, ReplicaTaken
from crond.when.zones import tzdata_version


@dataclass(frozen=True)
class Options:
    """`crond run` flags; each overrides the file's `daemon:` setting when given."""

    liveness_file: Path | None = None
    heartbeat: timedelta | None = None
    state_dir: str | None = None  # a directory, or "none" for no state store
    metrics: str | None = None  # HOST:PORT for /metrics and /healthz
    replica: str | None = None  # this replica's name (with daemon.database)


class Service:
    """`crond run` once the file is loaded: serves its jobs until a stop signal, reloads
    the file on SIGHUP, records the runs in the state store."""

    def __init__(
        self,
        path: Path,
        cfg: LoadedConfig,
        options: Options,
        log: FilteringBoundLogger,
        clock: Clock,
        *,
        digest: str | None = None,
    ) -> None:
        self.path = path
        self.cfg = cfg
        self.digest = digest  # sha256 of the file's bytes, for `crond status`'s quick path
        self.options = options
        self.log = log
        self.clock = clock
        self._status = 0  # crond run's exit status after a stop
        # The daemon is the loop's Effects and the recorder's Told (parts.Owner): what the
        # loop does goes through the methods of "the loop's Effects" below, to the parts.
        made = parts.make(
            path, cfg, log, clock, self, state_dir=options.state_dir, replica=options.replica
        )
        self.notifier = made.notifier
        self.named = made.named  # in daemon.started and the store's events
        self.recorder = made.recorder
        self.spawner = made.spawner
        self.loop = made.loop
        self.view = made.view
        self.telling = made.telling
        self.cluster = made.cluster
        self.heartbeat = made.heartbeat
        self.serving = made.serving
        self.signals = made.signals
        self.pausing = made.pausing
        self.steering = made.steering
        self.chaining = made.chaining
        self._settings(cfg)

    def _settings(self, cfg: LoadedConfig) -> None:
        """What a (re)loaded file says of the daemon (the flags of `crond run` win)."""
        flags = self.options
        self.heartbeat.configure(cfg, liveness_file=flags.liveness_file, heartbeat=flags.heartbeat)
        self.loop.heartbeat = self.heartbeat.period
        self.recorder.configure(cfg)
        metrics = flags.metrics or cfg.daemon.metrics  # HOST:PORT, or None: not served
        self.telling.configure(cfg, metrics)
        self.serving.configure(metrics)
        self.loop.core.locks.capacity = dict(cfg.config.locks)  # (the limit below wakes)
        self.loop.limit(cfg.daemon.max_running)
        self.signals.configure(cfg)
        if self.cluster is not None:
            self.cluster.configure(cfg, self.digest)

    # --- the loop's Effects (crond/daemon/loop.py) ---------------------------------------

    def launch(self, job: LoadedJob, slot: datetime, gate: Gate | None = None) -> runner.Run:
        return self.spawner.launch(job, slot, gate)

    async def claim(
        self, starts: Starts, told: Sequence[Key], at: datetime, *, counted: bool = False
    ) -> Claims:
        return await self.spawner.claim(starts, told, at, counted=counted)

    def beat(self, now: datetime) -> None:
        self.heartbeat.beat(now)
        self.chaining.beat()  # (with replicas: the chained runs the database keeps)
        self.view.locks_moved()  # (a run told to wait since: for `crond status`)

    def decided(self, job: LoadedJob, decision: Decision) -> None:
        self.telling.decided(job, decision)
        if (missed := decision.missed) is not None:  # a claim in doubt given up: closed
            self.recorder.missed(job.name, missed.first_slot, missed.last_slot)
        self.chaining.forget_dropped()  # chained runs skipped, missed (or of jobs gone)

    def run_started(self, job: LoadedJob, run: runner.Run) -> None:
        self.telling.run_started(job, run)
        self.view.locks_moved()  # (taken: for `crond status`)

    def run_ended(self, job: LoadedJob, run: runner.Run, result: runner.RunResult) -> None:
        self.telling.run_ended(job, run, result)
        self.chaining.ended(run, result)
        self.view.locks_moved()  # (given back: for `crond status`)

    def resumed(self, job: str, skipped: int) -> None:
        self.pausing.ran_out(job, skipped)

    def moved(self, entries: list[Entry], cursors: list[Key]) -> None:
        self.view.moved(entries, cursors)
        self.view.locks_moved()

    # --- the recorder's Told (crond/daemon/recorder.py) ---------------------------------

    def ending(self, run: runner.Run, result: runner.RunResult, tail: Sequence[str]) -> None:
        self.telling.ending(run, result, tail)

    def lost(self, row: AttemptRow) -> None:
        self.telling.lost(row)

    # --- the state store --------------------------------------------------------------

    def publish(self) -> None:
        """The jobs as the daemon now sees them, into the store for `crond status`."""
        self.view.publish(self.cfg.jobs, self.digest)

    def replica_taken(self, exc: ReplicaTaken) -> None:
        """A live replica has this one's name (found at start, or when the database first
        answered): this one stops, with exit status 1."""
        print(f"crond: {exc}", file=sys.stderr)
        self.log.error("cluster.replica_taken", error=str(exc))
        self._status = 1
        self.loop.stop()

    # --- SIGHUP's reload (what the signals do: crond/daemon/signals.py) ----------------

    def swap(self, new: LoadedConfig, digest: str | None) -> dict[str, Any]:
        """A reloaded file that passed, swapped in: the reload's outcome."""
        with loader.gc_paused():
            diff = self.loop.load(new.jobs)
        self.view.first_seen(diff.added)
        reloaded = {"reloaded": True, "jobs": len(new.jobs), **dataclasses.asdict(diff)}
        self.cfg = new
        self.digest = digest
        self.spawner.reload(new)
        self._settings(new)
        self.log.info("config.reloaded", **events.reloaded(diff.added, diff.removed, diff.changed))
        # For `crond status`, once the new jobs are scheduled: after the loop's next wake.
        asyncio.get_running_loop().call_soon(self.publish)
        return reloaded

    # --- main -------------------------------------------------------------------------

    async def serve(self) -> int:
        _raise_fd_limit()
        aio = asyncio.get_running_loop()
        reap = reaper.install(aio, _owned_pids) if os.getpid() == 1 else None
        try:
            async with asyncio.TaskGroup() as tasks:
                self.signals.start(tasks)
                aio.add_signal_handler(signal.SIGHUP, self.signals.hup)
                for signum in (signal.SIGTERM, signal.SIGINT):
                    aio.add_signal_handler(signum, self.signals.stop, signum)
                if not await self.heartbeat.open_store():  # a live one has this one's name
                    return 1
                cursors, counts = await self.recorder.kept()
                with loader.gc_paused():  # 10,000 entries: ~100,000 objects, see there
                    self.loop.load(self.cfg.jobs, cursors, counts)
                self.view.first_seen(name for name in self.cfg.jobs if name not in cursors)
                await self.pausing.restore()  # the pauses kept in the store, before the first wake
                self.chaining.restore()  # chained runs recorded and never started
                await self.view.start_reboot_jobs(self.cfg.jobs.values())
                self.log.info(
                    "daemon.started",
                    pid=os.getpid(),
                    config=str(self.path),
                    jobs=len(self.cfg.jobs),
                    version=__version__,
                    tzdata=tzdata_version(),
                    **self.named,
                )
                await self.telling.start(tasks)
                await self.serving.start(tasks)
                self.telling.reloaded(True)
                await self.steering.start(socket_path(self.cfg, self.options.state_dir))
                self.notifier.ready(f"{len(self.cfg.jobs)} jobs")
                asyncio.get_running_loop().call_soon(self.publish)  # after the first wake
                cluster = self.cluster
                polling = tasks.create_task(cluster.polling.poll_forever()) if cluster else None
                await self.loop.run()
                if polling is not None:
                    polling.cancel()
                await self.steering.aclose()
                await self.telling.aclose()
                await self.serving.aclose()
        finally:
            for signum in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
                aio.remove_signal_handler(signum)
            if reap:
                reap()
            self.notifier.close()
            self.recorder.close()
        self.heartbeat.write_liveness(self.clock.now(), stopped=True)
        self.log.info("daemon.stopped")
        return self._status


def _owned_pids() -> frozenset[int]:
    """The children the reaper must leave alone (as pid 1): the runs' and the notifier
    commands' (their module is loaded only when a file has a command notifier)."""
    command = sys.modules.get("crond.notify.command")
    notifiers: set[int] = command.owned_pids() if command is not None else set()
    return frozenset(runner.owned_pids()) | notifiers


def run(path: Path, options: Options, log: FilteringBoundLogger) -> int:
    """`crond run`: exit 1 when the file is invalid (or, as root, unsafe) at start, 0 after
    a clean stop."""
    try:
        cfg, digest = loader.load_file(path, strict=True)
    except problems.ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        log.error("config.load_failed", errors=[str(p) for p in exc.problems])
        return 1
    if database_url(cfg) is not None and (given := given_problems(options.replica)):
        for said in given:
            print(f"crond: {said}", file=sys.stderr)
        log.error("config.load_failed", errors=given)
        return 1
    state_dir = locate.resolve_dir(options.state_dir, cfg.daemon.state_dir)
    refusal = ownership.directory_problem(state_dir) if state_dir is not None else None
    if refusal is not None:  # as root, a directory others can write into: refused
        print(refusal, file=sys.stderr)
        log.error("state.refused", path=str(state_dir), error=refusal)
        return 1
    control = socket_path(cfg, options.state_dir)
    taken = socket_taken.refusal(control)
    if taken is not None:  # before the store: a replica registers no name then
        print(f"crond: {taken[0]}", file=sys.stderr)
        log.error("control.taken", path=str(control), pid=taken[1], error=taken[0])
        return 1
    return asyncio.run(Service(path, cfg, options, log, SystemClock(), digest=digest).serve())


def _raise_fd_limit() -> None:
    """Each running job holds three descriptors (two pipes, a pidfd): systemd's default
    soft limit of 1,024 would cap crond at ~340 concurrent runs. Use the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
