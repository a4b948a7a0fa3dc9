"""The daemon's lifecycle: start, signals, reload, shutdown; `crond run` and `crond run-job`.

SIGHUP re-reads the file through the same `config.load` as `crond validate`; a bad file
is logged and the old jobs keep running. SIGTERM/SIGINT start no new run, wait up to
`shutdown_timeout` for the running ones, then stop them as for a timeout; a second
signal stops them at once. The heartbeat (liveness file, systemd watchdog, the store's
checks) is crond/daemon/heartbeat.py, called by the scheduling loop itself; what is
recorded in the state store, crond/daemon/recorder.py; what a failing store costs,
crond/daemon/stores.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import resource
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
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
from crond.daemon import reaper, stores
from crond.daemon import taken as socket_taken
from crond.daemon.cluster import Cluster, database_url, given_problems, replica_name
from crond.daemon.control import Steering
from crond.daemon.heartbeat import Heartbeat
from crond.daemon.loop import Gate, Loop
from crond.daemon.recorder import StoreRecorder
from crond.daemon.systemd import Systemd
from crond.daemon.telling import Telling
from crond.run import runner
from crond.schedule.actions import Claims, Key
from crond.schedule.rules import Decision, Entry
from crond.store import files, locate
from crond.store.base import ReplicaTaken, Start, Store, ViewRow, view_row
from crond.when.zones import tzdata_version

# systemd's messages to this process: a job must not talk to systemd in crond's name.
_DAEMON_ONLY = frozenset(
    {
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "INVOCATION_ID",
        "CROND_DATABASE_URL",  # crond's own database (and its password) is not the jobs'
        "CROND_REPLICA",
    }
)


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
        self.notifier = Systemd()
        self.specs: dict[str, tuple[LoadedJob, runner.RunSpec]] = {}
        state_dir = locate.resolve_dir(options.state_dir, cfg.daemon.state_dir)
        url = database_url(cfg)
        # Read once: every job's environment starts here, without what is the daemon's own
        # (with a database, libpq's PG* variables are how crond reaches it: a job that runs
        # as another user must not inherit its password; a job gives its own in `env:`).
        self.environ = {
            k: v
            for k, v in os.environ.items()
            if k not in _DAEMON_ONLY and not (url is not None and k.startswith("PG"))
        }
        replica = None if url is None else replica_name(options.replica, cfg)
        opener: Callable[[bool], Store] | None
        # Which replica of which cluster this is: in daemon.started and in the store's
        # events (database.*), so that a log shared by replicas tells them apart.
        self.named: dict[str, str] = {}
        if url is not None and replica is not None:  # replicas share the database's state
            opener = stores.cluster_opener(url, cfg, replica)
            self.named = {"replica": replica, "cluster": cfg.daemon.cluster}
        else:
            opener = None if state_dir is None else stores.opener(state_dir)
        self.recorder = StoreRecorder(opener, log.bind(**self.named), clock, replica=replica)
        # The daemon is the loop's Effects: what the loop does goes through the methods
        # of "the loop's Effects" below, to the parts made here.
        self.loop: Loop[runner.Run] = Loop(
            clock=clock, log=log, effects=self, heartbeat=cfg.daemon.heartbeat
        )
        self.heartbeat = Heartbeat(self.loop, self.recorder, self.notifier, log, self._publish)
        self.heartbeat.on_taken = self._taken
        self._status = 0  # crond run's exit status after a stop
        self.telling = Telling(
            log=log, clock=clock, loop=self.loop, recorder=self.recorder, heartbeat=self.heartbeat
        )
        self.cluster = None
        if replica is not None:
            self.cluster = Cluster(
                log=log, clock=clock, loop=self.loop, recorder=self.recorder,
                on_paused=self.telling.paused,
            )  # fmt: skip
            self.heartbeat.cluster = self.cluster.beat
        self.steering = Steering(
            log=log,
            clock=clock,
            loop=self.loop,
            recorder=self.recorder,
            on_paused=self.telling.paused,
            cluster=self.cluster,
            reload=self.reload_asked,  # `crond reload`, as SIGHUP
        )
        self._settings(cfg)
        self._signals = 0
        self._reload_wanted = False
        self._reloading: asyncio.Task[None] | None = None
        self._reloaded: dict[str, Any] = {}  # the last reload's outcome, for `crond reload`
        self._tasks: asyncio.TaskGroup | None = None
        self._run_ids: dict[tuple[str, datetime], str] = {}  # run ids chosen by _prepare

    def _settings(self, cfg: LoadedConfig) -> None:
        """What a (re)loaded file says of the daemon (the flags of `crond run` win)."""
        flags = self.options
        self.heartbeat.configure(cfg, liveness_file=flags.liveness_file, heartbeat=flags.heartbeat)
        self.loop.heartbeat = self.heartbeat.period
        self.recorder.configure(cfg)
        self.telling.configure(cfg, self._metrics_address(cfg))
        self.loop.limit(cfg.daemon.max_running)
        if self.cluster is not None:
            self.cluster.configure(cfg, self.digest)

    def _metrics_address(self, cfg: LoadedConfig) -> str | None:
        return self.options.metrics or cfg.daemon.metrics

    # --- the loop's Effects (crond/daemon/loop.py) ---------------------------------------

    def launch(self, job: LoadedJob, slot: datetime, gate: Gate | None = None) -> runner.Run:
        """A run of `job`, spawned now; the loop drives it in its TaskGroup."""
        cached = self.specs.get(job.name)
        if cached is None or cached[0] is not job:
            cached = (job, runner.spec_for(job, self.environ))
            self.specs[job.name] = cached
        run_id = self._run_ids.pop((job.name, slot), None)
        return runner.Run(
            cached[1],
            slot,
            run_id=run_id,
            clock=self.clock,
            log=self.log,
            recorder=self.recorder,
            gate=gate,
        )

    def claim(
        self, starts: Sequence[tuple[LoadedJob, datetime]], told: Sequence[Key], at: datetime
    ) -> Claims:
        """The runs one wake is about to start at `at` (the wake may come just before):
        their `started` rows in one commit, before the first spawn (one per run would
        cost each later spawn of the wake the commits of those before). A replica claims
        them in that commit: those it may not start, and why; and of the `told` slots
        (skipped, missed), those another replica claimed first, and so tells of."""
        if self.recorder.store is None and self.recorder.replica is None:
            return Claims()
        self._run_ids = {(job.name, slot): runner.new_run_id(at) for job, slot in starts}
        records = [Start(name, rid, slot) for (name, slot), rid in self._run_ids.items()]
        return self.recorder.prepare(records, told, started=at)

    def beat(self, now: datetime) -> None:
        self.heartbeat.beat(now)

    def decided(self, job: LoadedJob, decision: Decision) -> None:
        self.telling.decided(job, decision)

    def run_started(self, job: LoadedJob, run: runner.Run) -> None:
        self.telling.run_started(job, run)

    def run_ended(self, job: LoadedJob, run: runner.Run, result: runner.RunResult) -> None:
        self.telling.run_ended(job, run, result)

    def resumed(self, job: str, skipped: int) -> None:
        self.steering.ran_out(job, skipped)

    def moved(self, entries: list[Entry], cursors: list[Key]) -> None:
        """The store's copy of the moved next fires and cursors: on the loop's next turn,
        after the runs this wake started have settled (their `job.started`, their pipes)."""
        if self.recorder.store is not None:
            rows = [_view_row(entry) for entry in entries]
            asyncio.get_running_loop().call_soon(self.recorder.update_view, rows, cursors)

    # --- the state store --------------------------------------------------------------

    def _publish(self) -> None:
        """The jobs as the daemon now sees them, into the store for `crond status`."""
        entries = self.loop.core.schedule.entries
        self.recorder.publish_view(
            (_view_row(entries[name]) for name in self.cfg.jobs), self.digest
        )

    def _start_reboot_jobs(self) -> None:
        """`@reboot` jobs: once per host boot (the recorder remembers which boot)."""
        now, boot = self.clock.now(), files.boot_id()
        for job in self.cfg.jobs.values():
            due = job.reboot and job.settings.enabled
            if due and not self.recorder.ran_in_boot(job.name, boot):
                mark = functools.partial(self.recorder.mark_boot, job.name, boot)
                self.loop.start_soon(job, now, before=mark)

    def _taken(self, exc: ReplicaTaken) -> None:
        """A live replica has this one's name (found at start, or when the database first
        answered): this one stops, with exit status 1."""
        print(f"crond: {exc}", file=sys.stderr)
        self.log.error("cluster.replica_taken", error=str(exc))
        self._status = 1
        self.loop.stop()

    # --- signals ----------------------------------------------------------------------

    def _on_hup(self) -> None:
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
                self._reloaded = {"reloaded": False, "errors": new, "jobs": len(self.cfg.jobs)}
            elif not self._signals:
                self._swap(*new)
            self.telling.reloaded(not isinstance(new, list))
            self.notifier.ready()

    async def reload_asked(self) -> dict[str, Any]:
        """A reload asked on the control socket: SIGHUP's, and its outcome once done (a
        reload already under way reads the file once more, as for a second SIGHUP)."""
        if self._signals:
            jobs = len(self.cfg.jobs)
            return {"reloaded": False, "errors": ["the daemon is stopping"], "jobs": jobs}
        self._on_hup()
        assert self._reloading is not None
        await asyncio.shield(self._reloading)  # a caller that hangs up stops no reload
        return self._reloaded

    def _swap(self, new: LoadedConfig, digest: str | None) -> None:
        with loader.gc_paused():
            diff = self.loop.load(new.jobs)
        self._reloaded = {"reloaded": True, "jobs": len(new.jobs), **dataclasses.asdict(diff)}
        self.cfg = new
        self.digest = digest
        self.specs = {name: spec for name, spec in self.specs.items() if name in new.jobs}
        self._settings(new)
        self.log.info(
            "config.reloaded", added=diff.added, removed=diff.removed, changed=diff.changed
        )
        # For `crond status`, once the new jobs are scheduled: after the loop's next wake.
        asyncio.get_running_loop().call_soon(self._publish)

    def _on_stop(self, signum: int) -> None:
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
            async with asyncio.timeout(self.cfg.daemon.shutdown_timeout.total_seconds()):
                await self.loop.idle.wait()
        except TimeoutError:
            for run in self.loop.going.all():
                run.stop()

    def _own(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        assert self._tasks is not None, "signals are handled only while serving"
        return self._tasks.create_task(coro)

    # --- main -------------------------------------------------------------------------

    async def serve(self) -> int:
        _raise_fd_limit()
        aio = asyncio.get_running_loop()
        reap = reaper.install(aio, _owned_pids) if os.getpid() == 1 else None
        try:
            async with asyncio.TaskGroup() as tasks:
                self._tasks = tasks
                aio.add_signal_handler(signal.SIGHUP, self._on_hup)
                for signum in (signal.SIGTERM, signal.SIGINT):
                    aio.add_signal_handler(signum, self._on_stop, signum)
                try:
                    self.recorder.open()
                except ReplicaTaken as exc:  # a live replica has this one's name
                    self._taken(exc)
                    return 1
                with loader.gc_paused():  # 10,000 entries: ~100,000 objects, see there
                    self.loop.load(self.cfg.jobs, resume=self.recorder.cursors())
                self.steering.restore()  # the pauses kept in the store, before the first wake
                self._start_reboot_jobs()
                self.log.info(
                    "daemon.started",
                    pid=os.getpid(),
                    config=str(self.path),
                    jobs=len(self.cfg.jobs),
                    version=__version__,
                    tzdata=tzdata_version(),
                    **self.named,
                )
                await self.telling.start(tasks, self._metrics_address(self.cfg))
                self.telling.reloaded(True)
                await self.steering.start(socket_path(self.cfg, self.options.state_dir))
                self.notifier.ready(f"{len(self.cfg.jobs)} jobs")
                asyncio.get_running_loop().call_soon(self._publish)  # after the first wake
                polling = tasks.create_task(self.cluster.poll_forever()) if self.cluster else None
                await self.loop.run()
                if polling is not None:
                    polling.cancel()
                await self.steering.aclose()
                await self.telling.aclose()
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


def _view_row(entry: Entry) -> ViewRow:
    job = entry.job
    return view_row(entry.name, job.settings.enabled, job.schedule_text, entry.next_fire)


def _raise_fd_limit() -> None:
    """Each running job holds three descriptors (two pipes, a pidfd): systemd's default
    soft limit of 1,024 would cap crond at ~340 concurrent runs. Use the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
