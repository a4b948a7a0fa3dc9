"""What `crond status` says of a job with no fire left (crond/config/schedparts.py's
`done_text`, for an enabled job whose schedule ran out), the words the daemon's view and
the file's share (docs/schedules.md, "Bounds")."""

from __future__ import annotations

import functools
from datetime import UTC, datetime

from crond.config import loader, schedparts

done_text = functools.partial(schedparts.done_text, no_fire_left=True)

FILE = """\
jobs:
  bounded: {every: 2s, end: "2026-12-04T10:00:37Z", command: x}
  limited: {every: 2s, end: "2026-12-04T10:00:37Z", max_runs: 3, command: x}
  once: {at: "2026-12-04T10:00:00Z", command: x}
  open: {every: 2s, command: x}
"""


def _at(second: int) -> datetime:
    return datetime(2026, 12, 4, 10, 0, second, tzinfo=UTC)


def test_an_end_between_slots_is_ended_from_the_last_slot_on() -> None:
    jobs = loader.loads(FILE).jobs
    ended = "ended at 2026-12-04T10:00:37Z (end)"
    assert done_text(jobs["bounded"], _at(36), 18) == ended  # its last slot: none is left
    assert done_text(jobs["bounded"], _at(37), 18) == ended
    assert done_text(jobs["bounded"], _at(59), 18) == ended
    assert done_text(jobs["limited"], _at(36), 3) == "done: max_runs 3 reached"
    assert done_text(jobs["once"], _at(0), 1) == "done: its at instants have run"
    assert done_text(jobs["open"], _at(36), 18) is None
