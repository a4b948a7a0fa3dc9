"""Failure streaks as the pages show them: a job's failed runs in a row, newest first,
among its last runs kept (a run's outcome: its last attempt's). The jobs page shows every
failing job's; `Streaks` reads a job's runs again only when its newest attempt changed,
so a file of 10,000 failing jobs costs their reads once, not once a second."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from crond.store.base import FAILED_OUTCOMES, AttemptRow, Reader, Summary


def streak(runs: list[AttemptRow]) -> int:
    """Failed runs in a row, `runs` newest first; an unfinished attempt is passed over."""
    count, seen = 0, set()
    for attempt in runs:
        if attempt.run_id in seen or attempt.finished is None:
            continue
        seen.add(attempt.run_id)
        if attempt.outcome not in FAILED_OUTCOMES:
            break
        count += 1
    return count


class Streaks:
    """The streaks of the jobs failing or running, each read from the job's last `runs`
    attempts (as its page counts them) when its newest attempt changed since the last
    read."""

    def __init__(self, runs: int) -> None:
        self.runs = runs
        # job -> (its newest attempt as summarised, its streak)
        self._known: dict[str, tuple[tuple[str | None, ...], int]] = {}

    def read(
        self, reader: Reader, summaries: Mapping[str, Summary], jobs: Collection[str]
    ) -> dict[str, int]:
        found = {}
        for name, s in summaries.items():
            # A failed newest attempt, or one going (it may follow failed runs: the job's
            # page counts those, so the jobs page does too).
            going = s.run_id is not None and s.finished is None
            if (s.outcome not in FAILED_OUTCOMES and not going) or name not in jobs:
                continue
            key = (s.run_id, s.outcome, s.finished)
            known = self._known.get(name)
            if known is None or known[0] != key:
                known = self._known[name] = (key, streak(reader.recent(name, self.runs)[::-1]))
            found[name] = known[1]
        if len(self._known) > 2 * len(jobs) + 100:  # jobs gone from the file
            self._known = {n: v for n, v in self._known.items() if n in jobs}
        return found
