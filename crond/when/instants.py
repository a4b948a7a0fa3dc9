"""Instants a person writes (`at`, `start`, `end`, backfill's `--from`/`--to`): an
ISO-8601 instant with an offset is that instant; a local time without one is read in
the job's zone by the rules fixed-time jobs follow (docs/schedules.md, R4 and R5):

- a wall time a forward jump skips (DST starts) is the instant of the jump (`02:30` in
  New York on 2026-03-08 is 03:00 EDT, 07:00Z), with a note;
- a wall time that happens twice (DST ends) is its first pass, with a note.

Pure: no clock, no I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

__all__ = ["resolve"]

_MINUTE = timedelta(minutes=1)


def resolve(written: datetime, zone: tzinfo) -> tuple[datetime, str | None]:
    """The UTC instant of `written` (aware: as it is; naive: a wall time in `zone`) and a
    note when a DST rule decided which instant it is."""
    if written.utcoffset() is not None:
        return written.astimezone(UTC), None
    first = written.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = written.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if first == second:
        return first, None
    wall = f"{written:%Y-%m-%d %H:%M}"
    if first < second:  # the wall time happens twice: the first pass (R5)
        return first, f"{wall} happens twice (the clocks go back): the first pass"
    # A gap: fold=1 reads it with the offset after the jump (an instant before the jump),
    # fold=0 with the one before (after it). The jump is the first instant between them
    # whose wall time is at or past `written`; transitions fall on whole minutes, and a
    # gap is at most a day (Pacific/Apia 2011): at most 1,440 steps.
    u = second.replace(second=0, microsecond=0)
    while u < first and u.astimezone(zone).replace(tzinfo=None) < written:
        u += _MINUTE
    landed = u.astimezone(zone)
    return u, f"{wall} does not exist (the clocks jump): runs at {landed:%H:%M %Z}, the jump"
