"""The slots of a backfill (docs/schedules.md, "Backfill"): a job's fires in [from, to),
oldest first, each with the note a DST or calendar rule gives it. Pure, like the rest of
crond/when: given a timing and the range, it computes.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from crond.when.timing import Fire, Timing

__all__ = ["MAX_SLOTS", "backfill_slots"]

# The most slots one backfill lists: a year of an hourly job, and a bound on what a
# mistyped range (a minutely job over ten years) may cost.
MAX_SLOTS = 10_000
_US = timedelta(microseconds=1)


def backfill_slots(timing: Timing, start: datetime, end: datetime) -> list[Fire]:
    """The fires of `timing` at or after `start` and before `end`, oldest first. Raises
    ValueError past MAX_SLOTS, or when `end` is not after `start`."""
    if end <= start:
        raise ValueError(f"--to ({_utc(end)}) must be after --from ({_utc(start)})")
    fires = itertools.takewhile(lambda f: f.at < end, timing.fires(start - _US))
    found = list(itertools.islice(fires, MAX_SLOTS + 1))
    if len(found) > MAX_SLOTS:
        raise ValueError(
            f"more than {MAX_SLOTS:,} slots in [{_utc(start)}, {_utc(end)}): give a narrower range"
        )
    return found


def _utc(when: datetime) -> str:
    """`2026-03-08T07:00:00Z`, as crond writes instants (crond.when imports nothing of
    crond: the same words as crond.clock's iso_utc)."""
    spec = "microseconds" if when.microsecond else "seconds"
    return when.astimezone(UTC).isoformat(timespec=spec).replace("+00:00", "Z")
