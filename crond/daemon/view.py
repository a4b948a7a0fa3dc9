"""What the state store keeps of the daemon's schedule, besides its runs: the jobs as the
daemon sees them (for `crond status`: published at each load and each reopen of the
store, their moved next fires and cursors after each wake), and the `@reboot` jobs'
starts, once per host boot (docs/state.md).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable

from crond.clock import Clock
from crond.config import schedparts
from crond.config.loaded import LoadedJob
from crond.daemon.locksview import kept
from crond.daemon.loop import Loop
from crond.daemon.offloop import SLOW  # the start's reads: the loop is not yet scheduling
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED
from crond.run import runner
from crond.schedule.actions import Key
from crond.schedule.rules import Entry
from crond.status_locks import KEY as LOCKS_KEY
from crond.store import files
from crond.store.base import ViewRow, view_row

_REBOOT = "reboot:"  # the marks of the boots `@reboot` jobs started in


class StoreView:
    """The store's copy of one daemon's schedule, through its recorder."""

    def __init__(self, *, clock: Clock, loop: Loop[runner.Run], recorder: StoreRecorder) -> None:
        self.clock = clock
        self.loop = loop
        self.recorder = recorder
        self._locks_due = False  # a look at the locks asked for the loop's next turn
        self._locks_kept = ""  # what the store has of them

    def publish(self, jobs: Iterable[str], digest: str | None) -> None:
        """The jobs as the daemon now sees them, into the store for `crond status`."""
        entries = self.loop.core.schedule.entries
        self.recorder.publish_view((_view_row(entries[name]) for name in jobs), digest)

    def first_seen(self, names: Iterable[str]) -> None:
        """Jobs the store has no cursor of (new to the file, or never run): their cursors
        as the schedule starts them, kept where they have none, so that a downtime from
        now on is theirs too (a missed slot is caught up, docs/schedules.md)."""
        entries = self.loop.core.schedule.entries
        first = [(name, entries[name].cursor) for name in names if name in entries]
        if first and self.recorder.store is not None:
            self.recorder.update_view([], [], first)

    def locks_moved(self) -> None:
        """The locks may have moved (a wake, a run's end): kept for `crond status` on the
        loop's next turn (after the run's locks were given back), when they changed."""
        if (
            self.recorder.store is not None
            and not self._locks_due
            and self.loop.core.locks.capacity
        ):
            self._locks_due = True
            asyncio.get_running_loop().call_soon(self._keep_locks)

    def _keep_locks(self) -> None:
        self._locks_due = False
        value = kept(self.loop.core.locks)
        if value != self._locks_kept:
            self._locks_kept = value
            key = LOCKS_KEY + (self.recorder.replica or "")  # (status reads them all)
            self.recorder.send(lambda store: store.set_meta(key, value))

    def moved(self, entries: list[Entry], cursors: list[Key]) -> None:
        """The store's copy of the moved next fires and cursors: on the loop's next turn,
        after the runs this wake started have settled (their `job.started`, their pipes)."""
        if self.recorder.store is not None:
            rows = [_view_row(entry) for entry in entries]
            asyncio.get_running_loop().call_soon(self.recorder.update_view, rows, cursors)

    async def start_reboot_jobs(self, jobs: Iterable[LoadedJob]) -> None:
        """`@reboot` jobs: once per host boot (the recorder remembers which boot, read in
        one call: with replicas awaited off the loop)."""
        now, boot = self.clock.now(), files.boot_id()
        due = [job for job in jobs if job.reboot and job.settings.enabled]
        marks = await self._boot_marks(boot) if due else {}
        for job in due:
            if marks.get(self._reboot_key(job.name)) != boot:
                mark = functools.partial(self._mark_boot, job.name, boot)
                self.loop.start_soon(job, now, before=mark)

    async def _boot_marks(self, boot: str | None) -> dict[str, str]:
        """The boots the `@reboot` jobs last started in, by key. Without a store, or a
        boot id, every daemon start counts as a boot (no marks)."""
        if self.recorder.store is None or boot is None:
            return {}
        got = await self.recorder.ask(lambda store: store.metas(_REBOOT), deadline=SLOW)
        return {} if got is FAILED else got

    def _mark_boot(self, job: str, boot: str | None) -> None:
        """`job` (`@reboot`) starts in this boot: recorded before it is spawned."""
        if boot is not None:
            self.recorder.mark(self._reboot_key(job), boot)

    def _reboot_key(self, job: str) -> str:
        """`@reboot` is per host: with replicas, each replica keeps its own mark."""
        replica = self.recorder.replica
        return f"{_REBOOT}{job}" if replica is None else f"{_REBOOT}{replica}:{job}"


def _view_row(entry: Entry) -> ViewRow:
    job = entry.job
    fire = entry.next_fire
    done = (
        None
        if fire is not None
        else schedparts.done_text(job, entry.cursor, entry.runs, no_fire_left=True)
    )
    return view_row(entry.name, job.settings.enabled, job.schedule_text, fire, done)
