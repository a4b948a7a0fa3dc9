"""The output tails of this replica's runs that a dashboard watches (docs/web.md, "Runs on
other replicas"; crond/store/pg_follow.py has the rows).

Each poll (crond/daemon/polling.py, once a second) says which runs are watched in the
cluster; for those going here, a listener on the run's output keeps its last lines, and
`flush` writes the tails that changed, in one transaction off the loop: at most once a
poll, nothing when no line came. A run that ends is written once more (its last lines,
`ended`) and forgotten; so is a run no longer watched. While no one watches, this does
nothing at all.
"""

from __future__ import annotations

from collections import deque
from typing import cast

from crond.daemon.loop import Loop
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED
from crond.run import runner
from crond.store.base import Replicated
from crond.store.rows import LINE_CHARS, TAIL_LINES


class _Watch:
    """One watched run's last lines, as its output comes."""

    def __init__(self, run: runner.Run) -> None:
        self.run = run
        # The lines of its attempt before the watch began (the last 20, as the store
        # keeps them: their stream not told, "earlier"), then each as it comes.
        earlier = [("earlier", line[:LINE_CHARS]) for line in run.budget.tail]
        self.lines: deque[tuple[str, str]] = deque(earlier, maxlen=TAIL_LINES)
        self.seen = len(earlier)
        self.written = -1  # lines seen at the last write; -1: none yet (an empty tail too)
        run.budget.listeners.append(self.heard)

    def heard(self, stream: str, line: str) -> None:  # on the loop; quick, never raises
        self.lines.append((stream, line[:LINE_CHARS]))
        self.seen += 1

    def stop(self) -> None:
        if self.heard in self.run.budget.listeners:
            self.run.budget.listeners.remove(self.heard)


class Tails:
    """The watched runs going on this replica, and their tails written."""

    def __init__(self, loop: Loop[runner.Run], recorder: StoreRecorder) -> None:
        self.loop = loop
        self.recorder = recorder
        self._watching: dict[str, _Watch] = {}

    def wanted(self, run_ids: frozenset[str]) -> None:
        """The runs watched in the cluster now (a poll's): those going here are listened
        to from now on; the others are let go."""
        if not run_ids and not self._watching:
            return
        going = {r.run_id: r for r in self.loop.going.all() if r.run_id in run_ids}
        for run_id in [k for k in self._watching if k not in run_ids]:
            self._watching.pop(run_id).stop()
        for run_id, run in going.items():
            if run_id not in self._watching:
                self._watching[run_id] = _Watch(run)

    async def flush(self) -> None:
        """Write the tails that changed, and the last of each run that ended."""
        if not self._watching:
            return
        going = {id(r) for r in self.loop.going.all()}
        rows, ended = [], []
        for run_id, watch in self._watching.items():
            over = id(watch.run) not in going
            if over:
                ended.append(run_id)
            if watch.seen != watch.written or over:
                rows.append((run_id, list(watch.lines), watch.seen, over))
        if rows:
            done = await self.recorder.ask(lambda store: cast(Replicated, store).write_tails(rows))
            if done is not FAILED:
                for run_id, _, seen, _ in rows:
                    if run_id in self._watching:
                        self._watching[run_id].written = seen
            else:
                ended = []  # written again at the next poll
        for run_id in ended:
            if run_id in self._watching:
                self._watching.pop(run_id).stop()
