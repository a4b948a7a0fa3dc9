"""What the loop logs of the core's decisions (`log_decision`), and the gate that holds a
wake's spawns and events until their slot (`gate`): crond/daemon/loop.py uses both.
"""

from __future__ import annotations

from datetime import datetime

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc
from crond.config.loaded import LoadedJob
from crond.daemon.runs import Gate
from crond.schedule.rules import Decision


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
