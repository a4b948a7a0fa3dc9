"""A replica's poll of its cluster (`daemon.database`, docs/replicas.md), once a second, a
task of the daemon beside the loop.

The cluster's pauses, applied here as they change (a pause or resume asked of any
replica holds on all of them within about a second), and the kill requests other
replicas wrote for runs (a `crond kill` asked of any replica stops the run where it
runs). Polling, not LISTEN: nothing here depends on a session that a pooler or a
failover could cut. What a replica does once a heartbeat is crond/daemon/cluster.py's.

Every query goes through the recorder, off the loop and awaited with a deadline
(crond/daemon/offloop.py), so the database's absence is its business (one
`database.unavailable`, backoff) and this module just finds nothing to do meanwhile.
Pauses are applied to the loop under its lock (never in the middle of a wake).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import cast

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc
from crond.daemon.loop import Loop
from crond.daemon.pausing import Rests
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED
from crond.daemon.tails import Tails
from crond.run import runner
from crond.store.base import PauseRow, Replicated

POLL_EVERY = timedelta(seconds=1)  # kill and pause reach every replica within two


class Polling:
    """What one replica polls of its cluster: pauses set or ended, and kill requests."""

    def __init__(
        self,
        *,
        log: FilteringBoundLogger,
        clock: Clock,
        loop: Loop[runner.Run],
        recorder: StoreRecorder,
        on_paused: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.log = log
        self.clock = clock
        self.loop = loop
        self.recorder = recorder
        self.on_paused = on_paused  # a pause began or ended here (the metrics)
        self.replica = recorder.replica or ""
        self._last_kill: int | None = None  # None: not polled yet
        self._since = clock.now()  # kill requests before it are not this replica's to act on
        self._pauses: dict[str, PauseRow] = {}  # the cluster's, as last polled
        # Pauses begun on this replica (its socket), when: ended by the first poll asked
        # after them that no longer finds them (resumed on another replica within a poll).
        self._noted: dict[str, datetime] = {}
        self.tails = Tails(loop, recorder)  # the output of runs a dashboard watches

    async def poll_forever(self) -> None:
        while True:
            await self.clock.sleep_until(self.clock.now() + POLL_EVERY)
            await self.poll()

    def noted(self, names: Sequence[str], at: datetime) -> None:
        """Pauses of `names` begun here at `at`, in the database already."""
        self._noted.update(dict.fromkeys(names, at))

    async def poll(self) -> None:
        """The cluster's pauses and the kill requests since the last poll, applied."""
        if self.recorder.store is None:
            return
        after = self._last_kill
        asked = self.clock.now()
        found = await self.recorder.ask(
            lambda store: cast(Replicated, store).poll(after or 0)
        )  # not forced: while the database is away, tried once per backoff
        if found is FAILED:
            return
        async with self.loop.lock:
            paused, resumed = self._sync_pauses(found.pauses, asked)
        rest = Rests()  # 10,000 pauses: logged and told in slices, the loop's turn between
        for name, row in paused:
            self.log.warning(  # as the replica that was asked logs it
                "job.paused", job=name, until=None if row.until is None else iso_utc(row.until),
                note=row.note, by=_by(row.by), via="cluster",
            )  # fmt: skip
            self._tell(name, True)
            await rest.maybe()
        for name, since, skipped in resumed:
            by = await self._resumed_by(name, since)
            self.log.info("job.resumed", job=name, by=by, skipped=skipped, via="cluster")
            self._tell(name, False)
        for kill in found.kills:
            # At the first poll, the requests made before this replica began are old.
            if kill.replica != self.replica and (
                after is not None or kill.requested >= self._since
            ):
                self._kill(kill.target, kill.by, kill.replica)
        self._last_kill = max(found.last_kill, after or 0)
        self.tails.wanted(found.watched)
        await self.tails.flush()

    def _sync_pauses(
        self, rows: dict[str, PauseRow], asked: datetime
    ) -> tuple[list[tuple[str, PauseRow]], list[tuple[str, datetime, int]]]:
        """Pauses another replica set or ended: this loop holds (or frees) the job too, all
        at once (microseconds a job). The pauses begun here, to tell of; those ended here:
        each job's name, when its pause began, the slots skipped."""
        now = self.clock.now()
        mine = self.loop.core.pauses.listing()
        paused = []
        for name, row in rows.items():
            ended = row.until is not None and row.until <= now
            if ended or (name in mine and mine[name] == row.until):
                continue
            self.loop.pause(name, row.until)
            paused.append((name, row))
        resumed = []
        for name in mine:
            # Not in the database: ended by another replica, if this one saw the pause
            # there (a poll before) or began it before this poll was asked (a pause begun
            # since may be newer than what the poll read).
            noted = self._noted.get(name)
            seen = self._pauses.get(name)
            if name in rows or (seen is None and (noted is None or noted >= asked)):
                continue
            skipped = self.loop.resume(name)
            if skipped is not None:
                resumed.append((name, seen.since if seen else noted or asked, skipped))
        self._noted = {n: at for n, at in self._noted.items() if n not in rows and at >= asked}
        self._pauses = rows
        return paused, resumed

    async def _resumed_by(self, name: str, since: datetime) -> object:
        """Who resumed the pause of `name` that began at `since` (None: no resume kept
        says, as for a pause cleared when it ran out)."""
        text = await self.recorder.ask(
            lambda store: cast(Replicated, store).resumed_by(name, since), force=True
        )
        return None if text is None or text is FAILED else _by(text)

    def _kill(self, target: str, by: str, replica: str) -> None:
        for run in self.loop.kill(target):
            self.log.warning(
                "job.kill_requested", job=run.job, run_id=run.run_id, by=_by(by),
                via=replica,
            )  # fmt: skip

    def _tell(self, name: str, paused: bool) -> None:
        if self.on_paused is not None:
            self.on_paused(name, paused)


def _by(text: str) -> object:
    """Who asked, as the store keeps it (JSON text), for the log."""
    try:
        return json.loads(text)
    except ValueError:
        return text
