"""The due heap: one entry per job, ordered by their next fires (crond/schedule/core.py
pops the due ones at every wake). Stale heap items (a job removed or moved on) are
skipped when met, never searched for.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from crond.config.loaded import LoadedJob
from crond.schedule.rules import Decision, Entry, Missed, first_cursor, make_entry
from crond.when.timing import Fire


@dataclass(frozen=True)
class ConfigDiff:
    added: list[str]
    removed: list[str]
    changed: list[str]


@dataclass
class Schedule:
    """The set of entries and the heap of their next fires."""

    entries: dict[str, Entry] = field(default_factory=dict)
    _heap: list[tuple[datetime, int, str]] = field(default_factory=list)
    _seq: Iterator[int] = field(default_factory=itertools.count)

    def put(self, entry: Entry) -> None:
        self.entries[entry.name] = entry
        if entry.next_fire is not None and entry.job.settings.enabled:
            heapq.heappush(self._heap, (entry.next_fire.at, next(self._seq), entry.name))

    def load(
        self,
        jobs: Mapping[str, LoadedJob],
        now: datetime,
        resume: Mapping[str, datetime] | None,
        runs: Mapping[str, int] | None = None,
    ) -> ConfigDiff:
        """Swap in a new set of jobs. Unchanged jobs keep their entry; changed jobs keep
        their cursor (no slot runs twice) and their count of runs. `resume`: the cursors a
        previous daemon left (`rules.first_cursor` says where a new job starts); `runs`:
        the scheduled runs each job has had (`max_runs`), as the store counted them."""
        old = self.entries
        added = [name for name in jobs if name not in old]
        removed = [name for name in old if name not in jobs]
        changed = [name for name in jobs if name in old and old[name].job != jobs[name]]
        for name in removed:
            self.remove(name)
        for name in added:
            before = resume.get(name) if resume else None
            count = runs.get(name, 0) if runs else 0
            self.put(make_entry(jobs[name], first_cursor(jobs[name], now, before), count))
        for name in changed:
            cursor = max(old[name].cursor, now)
            count = old[name].runs
            self.remove(name)
            self.put(make_entry(jobs[name], cursor, count))
        return ConfigDiff(added, removed, changed)

    def counted(self, name: str) -> None:
        """A scheduled run of `name` starts: one more toward its `max_runs`; the last one
        leaves it no next fire."""
        entry = self.entries.get(name)
        if entry is None or entry.job.settings.max_runs is None:
            return
        entry.runs += 1
        if not entry.runs_left:
            entry.next_fire = None

    def done(self, name: str) -> None:
        """`name` has had its `max_runs` (another replica's claims counted the last)."""
        entry = self.entries.get(name)
        limit = None if entry is None else entry.job.settings.max_runs
        if entry is not None and limit is not None:
            entry.runs = max(entry.runs, limit)
            entry.next_fire = None

    def remove(self, name: str) -> Entry | None:
        return self.entries.pop(name, None)  # its heap items become stale

    def _is_current(self, at: datetime, name: str) -> bool:
        entry = self.entries.get(name)
        return entry is not None and entry.next_fire is not None and entry.next_fire.at == at

    def next_due(self) -> tuple[datetime, str] | None:
        """The earliest (instant, job) still current."""
        while self._heap:
            at, _, name = self._heap[0]
            if self._is_current(at, name):
                return at, name
            heapq.heappop(self._heap)
        return None

    def next_fire(self) -> tuple[str, Fire] | None:
        """The earliest fire of all, and its job."""
        due = self.next_due()
        if due is None:
            return None
        fire = self.entries[due[1]].next_fire
        return (due[1], fire) if fire else None

    def pop_due(self, now: datetime) -> list[Entry]:
        """Entries whose next fire is at or before `now`, each once, taken off the heap."""
        due: dict[str, Entry] = {}
        while self._heap and self._heap[0][0] <= now:
            at, _, name = heapq.heappop(self._heap)
            if self._is_current(at, name):
                due[name] = self.entries[name]
        return list(due.values())

    def apply(self, entry: Entry, decision: Decision) -> None:
        """Move the entry on as decided: its cursor (never back) and its next fire."""
        entry.cursor = max(entry.cursor, decision.cursor)
        entry.next_fire = decision.next_fire
        self.put(entry)

    def about(self, name: str, slot: datetime, **what: Any) -> Decision:
        """A decision about one slot of `name` taken outside the rules of a wake (a queued
        start missed, a claim refused): the job's cursor and next fire as they are now."""
        entry = self.entries.get(name)
        cursor, fire = (slot, None) if entry is None else (entry.cursor, entry.next_fire)
        return Decision(name, cursor, fire, **what)

    def missed(self, name: str, slot: datetime, reason: str) -> Decision:
        """One slot of `name` missed, for `reason`."""
        return self.about(name, slot, missed=Missed(1, slot, slot, reason=reason))
