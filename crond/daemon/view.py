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
from crond.daemon.loop import Loop
from crond.daemon.recorder import StoreRecorder
from crond.run import runner
from crond.schedule.actions import Key
from crond.schedule.rules import Entry
from crond.store import files
from crond.store.base import ViewRow, view_row


class StoreView:
    """The store's copy of one daemon's schedule, through its recorder."""

    def __init__(self, *, clock: Clock, loop: Loop[runner.Run], recorder: StoreRecorder) -> None:
        self.clock = clock
        self.loop = loop
        self.recorder = recorder

    def publish(self, jobs: Iterable[str], digest: str | None) -> None:
        """The jobs as the daemon now sees them, into the store for `crond status`."""
        entries = self.loop.core.schedule.entries
        self.recorder.publish_view((_view_row(entries[name]) for name in jobs), digest)

    def moved(self, entries: list[Entry], cursors: list[Key]) -> None:
        """The store's copy of the moved next fires and cursors: on the loop's next turn,
        after the runs this wake started have settled (their `job.started`, their pipes)."""
        if self.recorder.store is not None:
            rows = [_view_row(entry) for entry in entries]
            asyncio.get_running_loop().call_soon(self.recorder.update_view, rows, cursors)

    def start_reboot_jobs(self, jobs: Iterable[LoadedJob]) -> None:
        """`@reboot` jobs: once per host boot (the recorder remembers which boot)."""
        now, boot = self.clock.now(), files.boot_id()
        for job in jobs:
            due = job.reboot and job.settings.enabled
            if due and not self._ran_in_boot(job.name, boot):
                mark = functools.partial(self._mark_boot, job.name, boot)
                self.loop.start_soon(job, now, before=mark)

    def _ran_in_boot(self, job: str, boot: str | None) -> bool:
        """Whether `job` (`@reboot`) started in this host boot. Without a store, or a boot
        id, every daemon start counts as a boot."""
        if self.recorder.store is None or boot is None:
            return False
        key = self._reboot_key(job)
        return self.recorder.write(lambda store: store.get_meta(key)) == boot

    def _mark_boot(self, job: str, boot: str | None) -> None:
        """`job` (`@reboot`) starts in this boot: recorded before it is spawned."""
        if boot is not None:
            self.recorder.mark(self._reboot_key(job), boot)

    def _reboot_key(self, job: str) -> str:
        """`@reboot` is per host: with replicas, each replica keeps its own mark."""
        replica = self.recorder.replica
        return f"reboot:{job}" if replica is None else f"reboot:{replica}:{job}"


def _view_row(entry: Entry) -> ViewRow:
    job = entry.job
    fire = entry.next_fire
    done = None if fire is not None else schedparts.done_text(job, entry.cursor, entry.runs)
    return view_row(entry.name, job.settings.enabled, job.schedule_text, fire, done)
