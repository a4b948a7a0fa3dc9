"""The daemon's lifecycle: start, signals, reload, heartbeat, shutdown.

SIGHUP re-reads the file through the same `config.load` as `crond validate`; a bad file
is logged and the old jobs keep running. SIGTERM/SIGINT start no new run, wait up to
`shutdown_timeout` for the running ones, then stop them as for a timeout; a second
signal stops them at once. The heartbeat (liveness file, systemd watchdog) is called by
the scheduling loop itself, so a stuck loop lets it go stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import resource
import signal
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from structlog.typing import FilteringBoundLogger

from crond import __version__, ownership
from crond.clock import Clock, SystemClock, iso_utc
from crond.config import loader, problems
from crond.config.loaded import LoadedConfig, LoadedJob
from crond.daemon import liveness, reaper
from crond.daemon.loop import Gate, Loop
from crond.daemon.systemd import Notifier
from crond.run import runner
from crond.store import sqlite as state
from crond.when.plan import Entry
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
    }
)


@dataclass(frozen=True)
class Options:
    """`crond run` flags; each overrides the file's `daemon:` setting when given."""

    liveness_file: Path | None = None
    heartbeat: timedelta | None = None
    state_dir: str | None = None  # a directory, or "none" for no state store


class Daemon:
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
        self.notifier = Notifier()
        self.specs: dict[str, tuple[LoadedJob, runner.RunSpec]] = {}
        # Read once: every job's environment starts here, without what is the daemon's own.
        self.environ = {k: v for k, v in os.environ.items() if k not in _DAEMON_ONLY}
        self.state_dir = state.resolve_dir(options.state_dir, cfg.daemon.state_dir)
        self.recorder = state.StoreRecorder(
            None, log, clock, quiet=self._heartbeat().total_seconds()
        )
        self.loop = Loop(
            clock=clock,
            log=log,
            launch=self._launch,
            heartbeat=self._heartbeat(),
            beat=self._beat,
            after_tick=self._after_tick,
            prepare=self._prepare,
        )
        self._signals = 0
        self._reload_wanted = False
        self._reloading: asyncio.Task[None] | None = None
        self._liveness_failed = False
        self._tasks: asyncio.TaskGroup | None = None
        self._store_opened = False  # the store has been opened once (lost runs closed)
        self._run_ids: dict[tuple[str, datetime], str] = {}  # run ids chosen by _prepare

    # --- settings -------------------------------------------------------------------

    def _heartbeat(self) -> timedelta:
        beat = self.options.heartbeat or self.cfg.daemon.heartbeat
        if self.notifier.watchdog is not None:
            beat = min(beat, self.notifier.watchdog)
        return beat

    def _liveness_path(self) -> Path | None:
        if self.options.liveness_file is not None:
            return self.options.liveness_file
        configured = self.cfg.daemon.liveness_file
        return Path(configured) if configured else None

    # --- runs -------------------------------------------------------------------------

    def _launch(self, job: LoadedJob, slot: datetime, gate: Gate | None = None) -> runner.Run:
        cached = self.specs.get(job.name)
        if cached is None or cached[0] is not job:
            cached = (job, runner.spec_for(job, self.environ))
            self.specs[job.name] = cached
        run_id = self._run_ids.pop((job.name, slot), None)
        return runner.start_run(
            cached[1],
            slot,
            run_id=run_id,
            clock=self.clock,
            log=self.log,
            recorder=self.recorder,
            gate=gate,
        )

    def _prepare(self, starts: list[tuple[LoadedJob, datetime]], at: datetime) -> None:
        """The runs one wake is about to start at `at` (the wake may come just before):
        their `started` rows in one commit, before the first spawn (one per run would
        cost each later spawn of the wake the commits of those before)."""
        if self.recorder.store is None:
            return
        self._run_ids = {(job.name, slot): runner.new_run_id(at) for job, slot in starts}
        self.recorder.prepare(
            [(name, rid, slot) for (name, slot), rid in self._run_ids.items()], started=at
        )

    # --- the state store --------------------------------------------------------------

    def _state_label(self) -> str:
        if self.state_dir is None:
            return "off"
        store_ok = self.recorder.store is not None
        return "ok" if store_ok and not self.recorder.degraded else "degraded"

    def _open_state(self) -> None:
        """Open the store (again, after a failure or a corrupt file). A store that cannot
        be opened is logged and scheduling goes on without it, reported as degraded."""
        if self.state_dir is None:
            return
        aside = self.recorder.corrupt  # a write met damage: keep the file, start afresh
        if self.recorder.store is not None:
            self.recorder.store.close()
            self.recorder.store = None
        try:
            store = state.Store(self.state_dir, aside=aside)
            # Runs a dead daemon left open. Only at the first open: at a later one, the
            # open rows may be this daemon's own runs (and a moved-aside store has none).
            lost = [] if self._store_opened else store.close_lost(self.clock.now())
        except state.StateError as exc:
            self.recorder.failed(exc, "state.unavailable")
            return
        self._store_opened = True
        if store.moved_aside is not None:
            self.log.error(
                "state.moved_aside", path=str(store.path), moved_to=str(store.moved_aside)
            )
        self.recorder.store = store
        self.recorder.corrupt = False
        if self.recorder.degraded:
            self.log.info("state.recovered")
        self.recorder.degraded = False
        self.log.info("state.opened", path=str(store.path))
        info = {
            "pid": os.getpid(),
            "boot_id": state.boot_id(),
            "started": iso_utc(self.clock.now()),
        }
        self.recorder.mark("daemon", json.dumps(info))
        for row in lost:
            self.log.warning("job.lost", job=row.job, run_id=row.run_id, slot=iso_utc(row.slot))
        if self.loop.schedule.entries:  # a reopen while serving: the view is gone or old
            self._publish()

    def _publish(self) -> None:
        """The jobs as the daemon now sees them, into the store for `crond status`."""
        entries = self.loop.schedule.entries
        self.recorder.publish_view(
            (_view_row(entries[name]) for name in self.cfg.jobs), self.digest
        )

    def _after_tick(self, due: list[Entry], cursors: list[tuple[str, datetime]]) -> None:
        """The store's copy of the moved next fires and cursors: on the loop's next turn,
        after the runs this wake started have settled (their `job.started`, their pipes)."""
        if self.recorder.store is not None:
            asyncio.get_running_loop().call_soon(self._update_view, due, cursors)

    def _update_view(self, due: list[Entry], cursors: list[tuple[str, datetime]]) -> None:
        self.recorder.update_view([_view_row(entry) for entry in due], cursors)

    def _resume(self) -> dict[str, datetime]:
        """The cursors the previous daemon left, or none."""
        store = self.recorder.store
        if store is None:
            return {}
        try:
            return store.cursors()
        except state.StateError as exc:
            self.recorder.failed(exc)
            return {}

    def _start_reboot_jobs(self) -> None:
        """`@reboot` jobs: once per host boot. The store remembers, per job, the boot it
        last started in; without a store (or a boot id) every daemon start is a boot."""
        now = self.clock.now()
        boot = state.boot_id()
        store = self.recorder.store
        for job in self.cfg.jobs.values():
            if not (job.reboot and job.settings.enabled):
                continue
            key = f"reboot:{job.name}"
            mark = None
            if store is not None and boot is not None:
                try:
                    if store.get_meta(key) == boot:
                        continue
                except state.StateError as exc:
                    self.recorder.failed(exc)
                mark = functools.partial(self.recorder.mark, key, boot)
            self.loop.start_soon(job, now, before=mark)

    # --- heartbeat --------------------------------------------------------------------

    def _beat(self, now: datetime) -> None:
        self.notifier.ping()
        if self.state_dir is not None and (self.recorder.store is None or self.recorder.corrupt):
            self._open_state()  # once per heartbeat at most: this is called once per heartbeat
        elif self.recorder.store is not None:
            try:
                self.recorder.store.check_in_place()
            except state.StateError as exc:
                self.recorder.failed(exc, "state.unavailable")  # reopened at the next beat
            try:
                self.recorder.store.checkpoint()
            except state.StateError as exc:
                self.recorder.failed(exc)
        self._write_liveness(now)

    def _write_liveness(self, now: datetime, *, stopped: bool = False) -> None:
        """The liveness file; `stopped`: the last one, after a clean stop (`crond health`
        then says so, instead of "fresh" for a pid that is gone)."""
        path = self._liveness_path()
        if path is None:
            return
        nxt = None if stopped else self.loop.next_fire()
        payload = {
            "pid": os.getpid(),
            "updated_at": iso_utc(now),
            "jobs": len(self.cfg.jobs),
            "running": self.loop.running_count(),
            "next_fire": {"job": nxt[0], "at": iso_utc(nxt[1].at)} if nxt else None,
            "heartbeat_s": self._heartbeat().total_seconds(),
            "state": self._state_label(),
            "stopped": stopped,
        }
        try:
            liveness.write(path, payload)
        except OSError as exc:
            # Once per heartbeat at most: this is called once per heartbeat.
            self.log.error("liveness.write_failed", path=str(path), error=str(exc))
            self._liveness_failed = True
        else:
            if self._liveness_failed:
                self.log.info("liveness.write_recovered", path=str(path))
                self._liveness_failed = False

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
            new = await self._read()
            if new is not None and not self._signals:
                self._swap(*new)
            self.notifier.ready()

    async def _read(self) -> tuple[LoadedConfig, str | None] | None:
        """The file again, through the same checks as at start; None (logged) if refused."""
        try:
            return await asyncio.to_thread(loader.load_file, self.path)
        except problems.ConfigError as exc:
            self.log.error("config.reload_failed", errors=[str(p) for p in exc.problems])
            return None
        except Exception as exc:  # noqa: BLE001  (a bug of the loader must not stop the jobs)
            self.log.error(
                "config.reload_failed",
                errors=[f"{self.path}: could not be loaded ({type(exc).__name__}: {exc})"],
            )
            return None

    def _swap(self, new: LoadedConfig, digest: str | None) -> None:
        with loader.gc_paused():
            diff = self.loop.load(new.jobs)
        self.cfg = new
        self.digest = digest
        self.specs = {name: spec for name, spec in self.specs.items() if name in new.jobs}
        self.recorder.history = {name: job.settings.history for name, job in new.jobs.items()}
        self.loop.heartbeat = self._heartbeat()
        self.recorder.quiet = self.loop.heartbeat.total_seconds()
        self.log.info(
            "config.reloaded", added=diff.added, removed=diff.removed, changed=diff.changed
        )
        # For `crond status`, once the new jobs are scheduled: after the loop's next wake.
        asyncio.get_running_loop().call_soon(self._publish)

    def _on_stop(self, signum: int) -> None:
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals == 1:
            self.log.info("daemon.stopping", signal=name, running=self.loop.running_count())
            self.notifier.stopping()
            self.loop.stop()
            self._own(self._drain())
        else:
            self.log.warning("daemon.stopping", signal=name, running=self.loop.running_count())
            for run in self.loop.all_runs():
                run.kill()

    async def _drain(self) -> None:
        """After shutdown_timeout, stop what still runs as for a timeout."""
        try:
            async with asyncio.timeout(self.cfg.daemon.shutdown_timeout.total_seconds()):
                await self.loop.idle.wait()
        except TimeoutError:
            for run in self.loop.all_runs():
                run.stop()

    def _own(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        assert self._tasks is not None, "signals are handled only while serving"
        return self._tasks.create_task(coro)

    # --- main -------------------------------------------------------------------------

    async def serve(self) -> int:
        _raise_fd_limit()
        aio = asyncio.get_running_loop()
        reap = reaper.install(aio, runner.owned_pids) if os.getpid() == 1 else None
        try:
            async with asyncio.TaskGroup() as tasks:
                self._tasks = tasks
                aio.add_signal_handler(signal.SIGHUP, self._on_hup)
                for signum in (signal.SIGTERM, signal.SIGINT):
                    aio.add_signal_handler(signum, self._on_stop, signum)
                self._open_state()
                jobs = self.cfg.jobs
                self.recorder.history = {name: job.settings.history for name, job in jobs.items()}
                with loader.gc_paused():  # 10,000 entries: ~100,000 objects, see there
                    self.loop.load(self.cfg.jobs, resume=self._resume())
                self._start_reboot_jobs()
                self.log.info(
                    "daemon.started",
                    pid=os.getpid(),
                    config=str(self.path),
                    jobs=len(self.cfg.jobs),
                    version=__version__,
                    tzdata=tzdata_version(),
                )
                self.notifier.ready(f"{len(self.cfg.jobs)} jobs")
                asyncio.get_running_loop().call_soon(self._publish)  # after the first wake
                await self.loop.run()
        finally:
            for signum in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
                aio.remove_signal_handler(signum)
            if reap:
                reap()
            self.notifier.close()
            if self.recorder.store is not None:
                self.recorder.store.close()
        self._write_liveness(self.clock.now(), stopped=True)
        self.log.info("daemon.stopped")
        return 0


def run(path: Path, options: Options, log: FilteringBoundLogger) -> int:
    """`crond run`: exit 1 when the file is invalid (or, as root, unsafe) at start, 0 after
    a clean stop."""
    try:
        cfg, digest = loader.load_file(path)
    except problems.ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        log.error("config.load_failed", errors=[str(p) for p in exc.problems])
        return 1
    state_dir = state.resolve_dir(options.state_dir, cfg.daemon.state_dir)
    refusal = ownership.directory_problem(state_dir) if state_dir is not None else None
    if refusal is not None:  # as root, a directory others can write into: refused
        print(refusal, file=sys.stderr)
        log.error("state.refused", path=str(state_dir), error=refusal)
        return 1
    return asyncio.run(Daemon(path, cfg, options, log, SystemClock(), digest=digest).serve())


def _view_row(entry: Entry) -> state.ViewRow:
    job = entry.job
    return state.view_row(entry.name, job.settings.enabled, job.schedule_text, entry.next_fire)


def _raise_fd_limit() -> None:
    """Each running job holds three descriptors (two pipes, a pidfd): systemd's default
    soft limit of 1,024 would cap crond at ~340 concurrent runs. Use the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def exit_status(result: runner.RunResult) -> int:
    """A job's result as a process exit status, as shells and timeout(1) report them."""
    if result.outcome is runner.Outcome.SUCCESS:
        return 0
    if result.outcome is runner.Outcome.TIMEOUT:
        return 124
    code = result.exit_code
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def run_once(job: LoadedJob, log: FilteringBoundLogger) -> int:
    """`crond run-job`: one run now (with its retries), as the daemon would; Ctrl-C stops it
    as for a timeout, a second Ctrl-C kills it."""

    async def main() -> int:
        clock = SystemClock()
        run = runner.start_run(runner.spec_for(job), clock.now(), clock=clock, log=log)
        aio = asyncio.get_running_loop()
        stops = 0

        def on_signal() -> None:
            nonlocal stops
            stops += 1
            run.stop() if stops == 1 else run.kill()

        for signum in (signal.SIGTERM, signal.SIGINT):
            aio.add_signal_handler(signum, on_signal)
        return exit_status(await run.wait())

    return asyncio.run(main())
