"""The pauses (`crond pause`, `crond resume`; docs/control.md): which jobs start no
scheduled run, until when, and how many slots each has passed over.

The rules `Pauses` keeps (crond/schedule/core.py asks it at every wake):

- A pause is held by job name, so it outlives a reload: a job removed from the file and
  added back keeps it, and a name not (or no longer) in the file is taken and kept.
- A paused job's due slots are passed over and counted, neither run nor missed, and
  nothing is made up afterwards, not even by `catchup: latest`: the planner moves the
  job's cursor on as for a disabled job (`crond.schedule.rules.decide`, `paused`).
- Pausing a paused job again replaces its end and keeps its count.
- A pause with an end is over at that end: a slot at the end itself runs. The core wakes
  at the earliest end (`ends`, kept as pauses come and go in constant time, worked out
  again only when the earliest one went: a `pause --all` of 10,000 jobs is linear), as
  for a fire; there the slots before the end that were
  not planned yet (the loop slept through them: a suspend) are passed over first, then
  the pause is dropped and its count reported (`expire`).
- Runs going are not touched, and a trigger starts a run of a paused job: both are the
  shell's, which asks nothing of a pause for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from crond.schedule.heap import Schedule
from crond.schedule.rules import Decision, Entry, decide

# The slots strictly before a pause's end are its own; the one at the end runs.
_JUST_BEFORE = timedelta(microseconds=1)


@dataclass
class _Pause:
    until: datetime | None  # None: until resumed
    skipped: int = 0  # the slots passed over so far


class Pauses:
    """The pauses of one loop, by job name, over its `Schedule`."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        # Read by the planner for every due entry: empty (the usual case), it costs one
        # truth test; otherwise one membership test.
        self.held: dict[str, _Pause] = {}
        self._ends: datetime | None = None  # the earliest end, when not `_stale`
        self._stale = False  # the earliest end went (replaced, resumed): find it again

    @property
    def ends(self) -> datetime | None:
        """The earliest end among the pauses: the loop wakes then."""
        if self._stale:
            self._changed()
        return self._ends

    def pause(self, name: str, until: datetime | None) -> None:
        held = self.held.get(name)
        if held is None:
            self.held[name] = _Pause(until)
        else:
            self._gone(held.until)
            held.until = until
        if until is not None and (self._ends is None or until < self._ends):
            self._ends = until  # (stale or not: an earlier end is a candidate either way)

    def resume(self, name: str) -> int | None:
        """The slots `name`'s pause passed over; None if it was not paused."""
        held = self.held.pop(name, None)
        if held is None:
            return None
        self._gone(held.until)
        return held.skipped

    def listing(self) -> dict[str, datetime | None]:
        return {name: held.until for name, held in self.held.items()}

    def decide(self, entry: Entry, at: datetime, going: int) -> Decision:
        """The decision as of `at` for an entry whose job is in `held`, its passed-over
        slots counted into its pause (a pause ending at `at` or before is over)."""
        held = self.held[entry.name]
        paused = held.until is None or held.until > at
        decision = decide(entry, at, going, paused=paused)
        held.skipped += decision.paused
        return decision

    def pass_over(self, name: str, at: datetime) -> bool:
        """Whether `name` is paused at `at`; if so, one of its slots (a run that waited
        in the daemon's queue) is counted as passed over."""
        held = self.held.get(name)
        if held is None or (held.until is not None and held.until <= at):
            return False
        held.skipped += 1
        return True

    def expire(self, now: datetime) -> list[tuple[str, int]]:
        """End the pauses whose end has come: the jobs, and the slots each passed over."""
        if self.ends is None or self.ends > now:
            return []
        ended = [
            (name, held.until, held)
            for name, held in self.held.items()
            if held.until is not None and held.until <= now
        ]
        for name, until, held in ended:
            held.skipped += self._pass_over(name, until)
            del self.held[name]
        self._changed()
        return [(name, held.skipped) for name, _, held in ended]

    def _gone(self, until: datetime | None) -> None:
        """A pause's end is no longer one: if it was the earliest, the next is looked for
        when `ends` is next read (once, however many pauses went meanwhile)."""
        if until is not None and until == self._ends:
            self._stale = True

    def _changed(self) -> None:
        ends = [held.until for held in self.held.values() if held.until is not None]
        self._ends = min(ends) if ends else None
        self._stale = False

    def _pass_over(self, name: str, until: datetime) -> int:
        """The slots of `name` due before `until` and not yet planned, passed over."""
        entry = self.schedule.entries.get(name)
        fire = None if entry is None else entry.next_fire
        if entry is None or fire is None or fire.at >= until:
            return 0
        decision = decide(entry, until - _JUST_BEFORE, 0, paused=True)
        self.schedule.apply(entry, decision)
        return decision.paused
