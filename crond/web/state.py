"""What the pages show, read as `crond status`, `next` and `history` read it: the file's
jobs (loaded again when the file changes; a load that fails keeps the last good one, as
the daemon does), their next fires, and the state store opened read-only for each read
and closed after it (SQLite in WAL mode: a reader never holds the daemon's writes up).

Every read here is synchronous and runs in a thread (crond/web/app.py); the jobs' rows
are read at most once a second whoever asks (`Source.rows`), so a hundred open pages
cost the store what one does.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from crond import ownership
from crond.clifile import load, reader_for
from crond.status import alive_of
from crond.status_text import expired, pause_text
from crond.store.base import FAILED_OUTCOMES, AttemptRow, ClusterReader, Only, Reader, StateError
from crond.web.streaks import Streaks, streak
from crond.web.words import Said
from crond.when import preview

if TYPE_CHECKING:
    from crond.config.loaded import LoadedConfig
    from crond.store.base import PauseRow, ReplicaRow, Summary
    from crond.when.timing import Fire, Timing

NEXT_FIRES = 20
RUNS_SHOWN = 50
_MAX_ATTEMPTS = 1000


class JobRow(NamedTuple):
    """A job as the jobs page shows it."""

    name: str
    schedule: str
    zone: str
    enabled: bool
    next_utc: str | None
    next_local: str | None
    next_note: str | None
    outcome: str | None  # the newest attempt's; None: never ran
    run_id: str | None
    started: str | None
    duration_s: float | None
    exit_code: int | None
    running: bool
    paused: str | None  # as `crond status` says it; None: not paused
    last_success: str | None
    streak: int  # failed runs in a row (the job page's count); 0: the last one did not fail

    @property
    def failing(self) -> bool:
        return not self.running and self.outcome in FAILED_OUTCOMES

    def state(self) -> str:
        if self.running:
            return "running"
        if self.paused:
            return "paused"
        if self.failing:
            return "failing"
        return "ok" if self.outcome else "never"


@dataclass(frozen=True)
class Rows:
    """One read of every job, at `now`; `problem`: why the store could not be read."""

    now: datetime
    jobs: list[JobRow]
    alive: bool
    problem: str | None
    file_problem: str | None

    @cached_property
    def version(self) -> str:
        """What changes when anything a page shows of the jobs changes (crond/web/live.py):
        compared within this process only, so Python's own hash does (10,000 jobs: ~5 ms,
        a SHA-256 of their text ~90 ms)."""
        return f"{hash((tuple(self.jobs), self.alive, self.problem)) & (2**64 - 1):016x}"


@dataclass(frozen=True)
class JobPage:
    version: str  # of the rows it was read with
    row: JobRow
    fires: list[Fire]
    removed: list[str]
    runs: list[AttemptRow]  # newest first
    streak: int
    problem: str | None


class _Next(NamedTuple):
    fire: Fire | None
    utc: str | None
    local: str | None


class ClusterPage(NamedTuple):
    """What the dashboard's cluster page shows: the replicas, now, this file's digest and the
    timeout after which a silent replica counts as dead."""

    replicas: list[ReplicaRow]
    now: datetime
    digest: str
    timeout: timedelta


class Source:
    """The schedules file and its daemon's store, as the pages read them."""

    def __init__(self, path: Path, cfg: LoadedConfig, state_dir: str | None) -> None:
        self.path = path
        self.state_dir = state_dir
        self.cfg = cfg
        self._stamp = _stamp(path)
        self._timings: dict[str, Timing] = {}
        self._next: dict[str, _Next] = {}
        self._fixed: dict[str, tuple[str, str, bool]] = {}
        self.said = Said()  # the jobs' schedules in words, the file's zones
        self.file_problem: str | None = None
        self._cached: Rows | None = None
        self._streaks = Streaks(RUNS_SHOWN)
        self._reading = threading.Lock()

    # --- the file ----------------------------------------------------------------------

    def refresh_file(self) -> None:
        """Load the file again if it changed on disk; a file that does not load keeps the
        jobs loaded before (the daemon does the same), and says why."""
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        from crond.config import problems  # noqa: PLC0415  (pydantic: loaded already)

        try:
            self.cfg = load(self.path, check_owner=True)  # as `crond web` first read it
        except problems.ConfigError as exc:
            first = exc.problems[0] if exc.problems else exc
            self.file_problem = f"{self.path} has errors; showing the jobs it had: {first}"
            return
        self.file_problem = None
        self._timings.clear()
        self._next.clear()
        self._fixed.clear()

    def timing(self, name: str) -> Timing:
        found = self._timings.get(name)
        if found is None:
            found = self._timings[name] = self.cfg.jobs[name].make_timing()
        return found

    def next_fire(self, name: str, now: datetime) -> _Next:
        """The job's next fire after `now` and its texts, kept until it passes (10,000
        jobs' rows a second: their instants are formatted once a fire, not once a read)."""
        found = self._next.get(name)
        if found is None or (found.fire is not None and found.fire.at <= now):
            job = self.cfg.jobs[name]
            fire = self.timing(name).next_after(now) if job.settings.enabled else None
            found = self._next[name] = _Next(
                fire,
                None if fire is None else preview.utc_text(fire.at),
                None if fire is None else preview.local_text(fire.local),
            )
        return found

    def digest(self) -> str:
        try:
            return hashlib.sha256(
                ownership.read_schedules_file(self.path, enforce=False)
            ).hexdigest()
        except ownership.FileRefused:
            return ""

    # --- the store ---------------------------------------------------------------------

    def open(self) -> Reader:
        """The store, read-only. Raises StateError."""
        return reader_for(self.cfg, self.state_dir)

    def forget(self) -> None:
        """The next read is fresh (after an action: its page shows what it did)."""
        self._cached = None

    def rows(self, now: datetime) -> Rows:
        """Every job's row; read at most once a second (the cached read otherwise), by
        one thread at a time: pages asked for together wait for one read, not make ten."""
        with self._reading:
            cached = self._cached
            if cached is not None and timedelta(0) <= now - cached.now < timedelta(seconds=1):
                return cached
            self._cached = self._read(now)
            return self._cached

    def _read(self, now: datetime) -> Rows:
        self.refresh_file()
        summaries: Mapping[str, Summary] = {}
        pauses: Mapping[str, PauseRow] = {}
        streaks: Mapping[str, int] = {}
        alive, problem = False, None
        try:
            reader = self.open()
            try:
                summaries, pauses = reader.summaries(), reader.pauses()
                alive = alive_of(reader, self.cfg.daemon.replica_timeout)
                streaks = self._streaks.read(reader, summaries, self.cfg.jobs)
            finally:
                reader.close()
        except StateError as exc:
            problem = str(exc)
        jobs = [
            self._row(n, summaries.get(n), pauses.get(n), now, alive, streaks.get(n, 0))
            for n in self.cfg.jobs
        ]
        return Rows(now, jobs, alive, problem, self.file_problem)

    def _row(  # noqa: PLR0917  (the row's parts, as read)
        self,
        name: str,
        summary: Summary | None,
        pause: PauseRow | None,
        now: datetime,
        alive: bool,
        streak: int,
    ) -> JobRow:
        fixed = self._fixed.get(name)
        if fixed is None:
            job = self.cfg.jobs[name]
            zone = job.settings.timezone or self.cfg.config.timezone
            fixed = self._fixed[name] = (job.schedule_text, zone, job.settings.enabled)
        upcoming = self.next_fire(name, now)
        fire = upcoming.fire
        s = summary
        return JobRow(
            name=name,
            schedule=fixed[0],
            zone=fixed[1],
            enabled=fixed[2],
            next_utc=upcoming.utc,
            next_local=upcoming.local,
            next_note=None if fire is None else fire.note,
            outcome=None if s is None else s.outcome,
            run_id=None if s is None else s.run_id,
            started=None if s is None else s.started,
            duration_s=None if s is None else s.duration_s,
            exit_code=None if s is None else s.exit_code,
            running=alive and s is not None and s.run_id is not None and s.finished is None,
            paused=None if pause is None or expired(pause, now) else pause_text(pause, now),
            last_success=None if s is None else s.success_started,
            streak=streak,
        )

    def job(self, name: str, now: datetime) -> JobPage | None:
        """A job's page: next fires with their notes, what calendars removed, its runs;
        None when the file (loaded again) has no such job."""
        rows = self.rows(now)
        row = next((r for r in rows.jobs if r.name == name), None)
        if row is None:
            return None
        timing = self.timing(name)
        enabled = self.cfg.jobs[name].settings.enabled
        fires = list(itertools.islice(timing.fires(now), NEXT_FIRES)) if enabled else []
        listed = [preview.PreviewRow(name, f) for f in fires]
        removed = preview.removed_lines({name: timing}, listed, now, NEXT_FIRES)
        runs: list[AttemptRow] = []
        problem = None
        try:
            reader = self.open()
            try:
                runs = reader.recent(name, RUNS_SHOWN)[::-1]
            finally:
                reader.close()
        except StateError as exc:
            problem = str(exc)
        return JobPage(rows.version, row, fires, removed, runs, streak(runs), problem)

    def run(self, run_id: str) -> list[AttemptRow]:
        """The attempts of one run, oldest first. Raises StateError."""
        reader = self.open()
        try:
            return reader.recent(None, _MAX_ATTEMPTS, Only(run_id=run_id))
        finally:
            reader.close()

    def open_runs(self) -> list[AttemptRow] | None:
        """With a database, every replica's open attempts; None: a store of one daemon."""
        reader = self.open()
        try:
            return reader.open_runs() if isinstance(reader, ClusterReader) else None
        finally:
            reader.close()

    def cluster(self) -> ClusterPage | None:
        """The replicas of the file's cluster; None without a database. Raises StateError."""
        reader = self.open()
        try:
            if not isinstance(reader, ClusterReader):
                return None
            replicas, now = reader.replicas(), reader.clock()
        finally:
            reader.close()
        return ClusterPage(replicas, now, self.digest(), self.cfg.daemon.replica_timeout)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino
