"""The loop's decisions as pure steps, beside crond/daemon/loop.py: each due entry's
decision applied to the schedule (`plan`), where a job new to the loop starts
(`first_cursor`), the events a decision logs (`log_decision`), and the gate that holds a
wake's spawns until their slot (`gate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc
from crond.config.loaded import LoadedJob
from crond.config.model import Catchup
from crond.daemon.pauses import Pauses
from crond.daemon.runs import Gate, RunHandle
from crond.when.plan import Decision, Entry, Missed, Schedule, plan_entry

_SECOND = timedelta(seconds=1)


def plan(
    schedule: Schedule,
    due: list[Entry],
    at: datetime,
    running: Mapping[str, list[RunHandle]],
    *,
    pauses: Pauses,
    queued: Mapping[str, int],
) -> tuple[list[Decision], list[tuple[str, datetime]]]:
    """Each due entry's decision as of `at`, applied (its next fire moved on); and the
    `catchup: latest` cursors that moved with no run started (for `after_tick`). A job's
    queued runs count as going; a paused job's slots are counted into its pause (a pause
    ending at `at` or before is over: its slot at `at` runs)."""
    decisions: list[Decision] = []
    moved: list[tuple[str, datetime]] = []
    paused = pauses.held
    for entry in due:
        name = entry.name
        going = len(running.get(name, ()))
        if queued:
            going += queued.get(name, 0)
        if paused and name in paused:
            decision = pauses.plan(entry, at, going)
        else:
            decision = plan_entry(entry, at, going)
        schedule.apply(entry, decision)
        decisions.append(decision)
        if decision.start is None and entry.job.settings.catchup is Catchup.LATEST:
            moved.append((entry.name, entry.cursor))
    return decisions, moved


def first_cursor(job: LoadedJob, now: datetime, before: datetime | None) -> datetime:
    """Where a job new to this loop starts: now, or the cursor a previous daemon left
    (`before`) if later; a `catchup: latest` job from `before`, for its missed slots."""
    if before is None:
        return now
    if job.settings.catchup is Catchup.LATEST:
        # Slots older than the window can never run: not even counted (a year of a
        # minutely job would be half a million slots to walk).
        return max(before, now - job.settings.catchup_window - _SECOND)
    return max(now, before)


def log_decision(log: FilteringBoundLogger, job: LoadedJob, decision: Decision) -> None:
    """The events of a slot's decision: caught up, missed, skipped."""
    if decision.caught_up is not None and decision.start is not None:
        log.warning(
            "job.caught_up", job=job.name, slot=iso_utc(decision.start), skipped=decision.caught_up
        )
    if decision.missed:
        m = decision.missed
        log.warning(
            "job.missed",
            job=job.name,
            count=m.count,
            first_slot=iso_utc(m.first_slot),
            last_slot=iso_utc(m.last_slot),
            reason=m.reason,
        )
    if decision.skip:
        reason = decision.skip_reason or "overlap"
        log.warning("job.skipped", job=job.name, slot=iso_utc(decision.skip), reason=reason)


def gate(clock: Clock, at: datetime) -> Gate:
    """A gate that blocks until `at` the first time it is called, and is open after."""
    waited = False

    def gate() -> None:
        nonlocal waited
        if not waited:
            waited = True
            clock.block_until(at)

    return gate


def one_slot(schedule: Schedule, name: str, slot: datetime, **what: Any) -> Decision:
    """A decision about one slot of `name` taken outside the planner (a queued start
    missed, a claim refused): the job's cursor and next fire as the schedule has them."""
    entry = schedule.entries.get(name)
    cursor, fire = (slot, None) if entry is None else (entry.cursor, entry.next_fire)
    return Decision(name, cursor, fire, **what)


def missed_one(schedule: Schedule, name: str, slot: datetime, reason: str) -> Decision:
    """One slot of `name` missed, for `reason`."""
    return one_slot(schedule, name, slot, missed=Missed(1, slot, slot, reason=reason))
