"""The rules of one job's due slots (docs/schedules.md): R9 grace, missed slots, overlap,
the job's max_running, catch-up, pauses; and where a job new to the schedule starts.

`decide` is arithmetic over instants: given an entry's cursor and timing, `now`, how
many runs of the job are going and whether it is paused, it says which slot starts,
which is skipped (for overlap or the job's max_running), which were missed and how many
were passed over while paused. crond/schedule/core.py asks it for every due entry.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from crond.config.loaded import LoadedJob
from crond.config.model import Catchup, Overlap
from crond.when.timing import Fire, Timing


@dataclass(slots=True)
class Entry:
    """A job as the planner sees it: its schedule and where it has got to. (Slots: one
    per job, kept for the daemon's life.)"""

    job: LoadedJob
    timing: Timing
    cursor: datetime  # R9: UTC, never decreasing; slots at or before it are handled
    next_fire: Fire | None = None  # the first fire after the cursor (cached); None: never
    name: str = field(init=False)  # the job's, kept here: the hot path reads it often
    # Scheduled runs started so far (`max_runs`: counted only with one). Once they are
    # all started, `next_fire` is None (here, and `Schedule.counted`): nothing is due.
    runs: int = 0

    def __post_init__(self) -> None:
        self.name = self.job.name
        if self.next_fire is None and self.runs_left:
            self.next_fire = self.timing.next_after(self.cursor)

    @property
    def runs_left(self) -> bool:
        """Whether the job may start another scheduled run (`max_runs` not reached)."""
        limit = self.job.settings.max_runs
        return limit is None or self.runs < limit


@dataclass(frozen=True)
class Missed:
    count: int
    first_slot: datetime
    last_slot: datetime
    # "grace": too late to start (R9); "queue": waited for the daemon's max_running until
    # its grace ran out (the loop's, docs/schedules.md).
    reason: str = "grace"


@dataclass(frozen=True)
class Decision:
    """What to do for one entry at one wake."""

    job: str
    cursor: datetime
    next_fire: Fire | None  # None: the job never fires again
    start: datetime | None = None  # the slot to run now
    skip: datetime | None = None  # the slot not run because runs are still going
    skip_reason: str | None = None  # why: "overlap" (skip) or "max_running" (allow)
    replace: bool = False  # stop the running runs first (overlap: replace)
    missed: Missed | None = None
    caught_up: int | None = None  # `start` is a catch-up run; this many older slots skipped
    paused: int = 0  # the job is paused: this many due slots passed over (not run, not missed)
    # Slots that wait for the job's runs to end (backlog.py), oldest first: `overlap:
    # queue`'s buffered one (`wait_reason` "queue"), `catchup: all`'s ("grace").
    waits: tuple[datetime, ...] = ()
    wait_reason: str = "queue"


class _Due(NamedTuple):
    slots: int  # how many in [first, now]
    first: datetime
    latest: datetime
    before: datetime | None  # the slot before `latest`; None when it is the only one


def _due(timing: Timing, first: Fire, now: datetime) -> _Due:
    """The slots in [first, now], `first` being due."""
    period = timing.period
    if period is not None:
        # Intervals by arithmetic: a month's suspend of an every-second job is 2.6 million
        # slots, seconds to walk.
        count = (now - first.at) // period + 1
        latest = first.at + (count - 1) * period
        return _Due(count, first.at, latest, latest - period if count > 1 else None)
    count, latest, before = 1, first.at, None
    for fire in timing.fires(first.at):
        if fire.at > now:
            break
        count, latest, before = count + 1, fire.at, latest
    return _Due(count, first.at, latest, before)


def decide(  # noqa: PLR0911  (one return a rule)
    entry: Entry, now: datetime, running: int, *, paused: bool = False, waiting: int = 0
) -> Decision:
    """R9 for one entry: the latest due slot starts if within grace; the others are missed.
    With `catchup: latest`, a latest slot later than grace but within `catchup_window`
    still starts, as a catch-up run (the older slots are skipped, counted, not missed).
    `running`: the job's runs going (or waiting to). `paused`: every due slot is passed
    over and counted, the cursor moves to `now` as for a disabled job, so nothing of the
    paused time is made up later, not even by `catchup: latest`. `waiting`: the job's
    slots waiting for its runs to end (backlog.py): `overlap: queue` and `catchup: all`
    (`catchup.py`) decide with them."""
    fire = entry.next_fire
    if now <= entry.cursor:  # the clock stepped back: nothing is due, the cursor stays
        return Decision(entry.name, entry.cursor, fire)
    if fire is None or fire.at > now or not entry.job.settings.enabled:
        nxt = fire if fire is None or fire.at > now else entry.timing.next_after(now)
        return Decision(entry.name, now, nxt)
    due = _due(entry.timing, fire, now)
    next_fire = entry.timing.next_after(now)
    if paused:
        return Decision(entry.name, now, next_fire, paused=due.slots)
    settings = entry.job.settings
    if settings.catchup is Catchup.ALL and (
        due.slots > 1 or waiting or now - due.latest > settings.grace
    ):
        return catch_up_all(entry, now, next_fire, busy=bool(running or waiting))
    if settings.overlap is Overlap.QUEUE and (running or waiting):
        return _buffered(entry.name, now, next_fire, due, waiting)
    late = now - due.latest
    caught_up = None
    if late > settings.grace:
        if settings.catchup is Catchup.NONE or late > settings.catchup_window:
            every_slot = Missed(due.slots, due.first, due.latest)
            return Decision(entry.name, now, next_fire, missed=every_slot)
        caught_up = due.slots - 1
    # The slots before the latest: missed, unless the latest is a catch-up run (then they
    # are counted in `caught_up`) that is itself not skipped for overlap.
    missed = None if due.before is None else Missed(due.slots - 1, due.first, due.before)
    if running:
        reason = skip_reason(settings.overlap, settings.max_running, running)
        if reason is not None:
            return Decision(
                entry.name, now, next_fire, skip=due.latest, skip_reason=reason, missed=missed
            )
    return Decision(
        entry.name,
        now,
        next_fire,
        start=due.latest,
        replace=bool(running) and settings.overlap is Overlap.REPLACE,
        missed=None if caught_up is not None else missed,
        caught_up=caught_up,
    )


def catch_up_all(entry: Entry, now: datetime, next_fire: Fire | None, *, busy: bool) -> Decision:
    """`catchup: all`: every due slot within `catchup_window`, oldest first, one at a time
    (the first starts now unless the job is `busy`, the others wait for it: backlog.py);
    at most `catchup_max`, the newest of them: older ones, and those older than the
    window, are missed. `caught_up`: how many run, when more than the one slot R9 would run
    (a restart, a suspend, a stall) is made up."""
    settings = entry.job.settings
    oldest = now - settings.catchup_window
    kept: deque[datetime] = deque(maxlen=settings.catchup_max)
    dropped, first_dropped, last_dropped = 0, None, None
    fire = entry.next_fire
    fires = entry.timing.fires(fire.at) if fire is not None else iter(())
    while fire is not None and fire.at <= now:
        if fire.at < oldest or len(kept) == kept.maxlen:
            gone = fire.at if fire.at < oldest else kept[0]
            dropped, first_dropped, last_dropped = dropped + 1, first_dropped or gone, gone
        if fire.at >= oldest:
            kept.append(fire.at)
        fire = next(fires, None)
    missed = None
    if dropped and first_dropped is not None and last_dropped is not None:
        missed = Missed(dropped, first_dropped, last_dropped)
    slots = tuple(kept)
    late = len(slots) > 1 or bool(slots and now - slots[-1] > settings.grace)
    caught_up = len(slots) if late else None
    if busy or not slots:
        return Decision(
            entry.name,
            now,
            next_fire,
            missed=missed,
            waits=slots,
            wait_reason="grace",
            caught_up=caught_up,
        )
    return Decision(
        entry.name,
        now,
        next_fire,
        start=slots[0],
        missed=missed,
        caught_up=caught_up,
        waits=slots[1:],
        wait_reason="grace",
    )


def _buffered(
    name: str, now: datetime, next_fire: Fire | None, due: _Due, waiting: int
) -> Decision:
    """`overlap: queue` with a run going: the latest slot waits for it, unless one waits
    already (then it is skipped); older slots are missed as R9 says."""
    missed = None if due.before is None else Missed(due.slots - 1, due.first, due.before)
    if waiting:
        return Decision(name, now, next_fire, skip=due.latest, skip_reason="overlap", missed=missed)
    return Decision(name, now, next_fire, missed=missed, waits=(due.latest,))


def skip_reason(overlap: Overlap, max_running: int | None, running: int) -> str | None:
    """Why a due slot does not start while `running` runs of its job are going, if not."""
    if overlap is Overlap.SKIP:
        return "overlap"
    if max_running is not None and running >= max_running:
        return "max_running"  # (only `overlap: allow` has one: config/model.py)
    return None


_SECOND = timedelta(seconds=1)


def first_cursor(job: LoadedJob, now: datetime, before: datetime | None) -> datetime:
    """Where a job new to the schedule starts: now, or the cursor a previous daemon left
    (`before`) if later; a `catchup: latest` job from `before`, for its missed slots."""
    if before is None:
        return now
    if job.settings.catchup is not Catchup.NONE:
        # Slots older than the window can never run: not even counted (a year of a
        # minutely job would be half a million slots to walk).
        return max(before, now - job.settings.catchup_window - _SECOND)
    return max(now, before)


def make_entry(job: LoadedJob, cursor: datetime, runs: int = 0) -> Entry:
    return Entry(job, job.make_timing(), cursor, None, runs)  # (positional: one per job)
