"""What the loop logs of the core's decisions (`log_decision`), and the gate that holds a
wake's spawns and events until their slot (`gate`): crond/daemon/loop.py uses both. And
what a reload logs (`reloaded`): lists of names, bounded.
"""

from __future__ import annotations

from datetime import datetime

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock, iso_utc
from crond.config.loaded import LoadedJob
from crond.daemon.runs import Gate
from crond.schedule.actions import LockWait, Queued
from crond.schedule.rules import Decision


def log_decision(log: FilteringBoundLogger, job: LoadedJob, decision: Decision) -> None:
    """The events of a slot's decision: caught up, missed, skipped."""
    if decision.caught_up is not None and decision.wait_reason == "grace":
        # `catchup: all`: how many missed slots run, oldest first, one at a time
        slots = [*([decision.start] if decision.start else []), *decision.waits]
        log.warning(
            "job.caught_up",
            job=job.name,
            slot=iso_utc(slots[0]),
            skipped=0,
            slots=decision.caught_up,
            last_slot=iso_utc(slots[-1]),
        )
    elif decision.caught_up is not None and decision.start is not None:
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


def log_wait(log: FilteringBoundLogger, wait: Queued | LockWait) -> None:
    """A due run waits: for a place under the daemon's limit (`job.queued`), or for its
    locks (`job.waiting`, naming the lock and its holders)."""
    if isinstance(wait, Queued):
        slot = iso_utc(wait.slot)
        log.warning("job.queued", job=wait.job.name, slot=slot, running=wait.running)
        return
    log.warning(
        "job.waiting",
        job=wait.job.name,
        slot=iso_utc(wait.slot),
        reason="lock",
        lock=wait.lock,
        held_by=[f"{job}@{iso_utc(slot)}" for job, slot in wait.holders],
    )


# A log event stays a readable line whatever the file: a reload names at most this many
# jobs in each of its lists (the first, by name); `counts` has how many there were.
NAMES_LOGGED = 50


def reloaded(added: list[str], removed: list[str], changed: list[str]) -> dict[str, object]:
    """The fields of `config.reloaded` (docs/running.md): each list cut to NAMES_LOGGED
    names, the counts of all, and `truncated` when a list was cut."""
    lists = {"added": added, "removed": removed, "changed": changed}
    fields: dict[str, object] = {k: sorted(v)[:NAMES_LOGGED] for k, v in lists.items()}
    fields["counts"] = {k: len(v) for k, v in lists.items()}
    if any(len(v) > NAMES_LOGGED for v in lists.values()):
        fields["truncated"] = True
    return fields


def gate(clock: Clock, at: datetime) -> Gate:
    """A gate that blocks until `at` the first time it is called, and is open after."""
    waited = False

    def gate() -> None:
        nonlocal waited
        if not waited:
            waited = True
            clock.block_until(at)

    return gate
