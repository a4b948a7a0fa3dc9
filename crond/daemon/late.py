"""A run's end written late: beside the `lost` another replica closed it with while this
replica could not beat (docs/replicas.md, "A replica dies"). The store keeps it beside
`lost`, never over it (`Store.end`); the replica logs `job.late_end` once per attempt.
The notifiers are not told again: they had the `lost`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from crond.clock import iso_utc

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from crond.run.runner import Run, RunResult

KEPT = 10_000  # late ends remembered, so each is told once


@dataclass(frozen=True)
class LateEnd:
    """A run's end the store kept beside `lost` (`Store.end`'s answer): the run, how its
    attempt ended, and when it had been closed lost."""

    run: Run
    result: RunResult
    lost_at: datetime


class LateEnds:
    """The late ends told (`job.late_end`), each once: an end written again after an
    answer that was lost finds the same `lost` and is not told twice."""

    def __init__(self, log: FilteringBoundLogger, replica: str | None) -> None:
        self.log = log
        self.replica = replica
        self._told: set[tuple[str, int]] = set()  # (run id, attempt)

    def told(self, said: LateEnd) -> None:
        run, result = said.run, said.result
        key = (run.run_id, result.attempt)
        if key in self._told:
            return
        if len(self._told) >= KEPT:
            self._told.clear()
        self._told.add(key)
        self.log.warning(
            "job.late_end", job=run.job, run_id=run.run_id, slot=iso_utc(run.slot),
            replica=self.replica, attempt=result.attempt, outcome=result.outcome.value,
            exit_code=result.exit_code, lost_at=iso_utc(said.lost_at),
        )  # fmt: skip
