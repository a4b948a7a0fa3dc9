"""Claims whose commit is in doubt (docs/replicas.md, "A database that hangs").

A claim that gets no answer by its deadline may still have committed: its `COMMIT` may
have reached the server before it stopped answering (or the answer was lost on the
way). Its start then waits and is tried again, with the same run id (crond/daemon/
spawning.py asks `run_id`); if that claim finds the slot taken, the recorder looks among
the cluster's unfinished runs (`ours`) for one of this replica with that run id: then the
first claim did commit, the slot is this replica's, and its run starts on that row — not
a slot held by nobody's run, nor a job held "busy" by a run that never started.
A start in doubt that is missed instead (its grace ran out first) is given up: its run,
had the claim committed, is removed from the database's runs (its claim kept: the slot
was told missed), or it would hold an `overlap: skip` job "busy" for as long as this
replica lives.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from crond.store.base import AttemptRow, Claim, Start

Key = tuple[str, datetime]
KEEP = 1000  # claims in doubt kept at most (one waiting start a job: a bound, not a need)


class InDoubt:
    """The run ids of the claims that got no answer, by (job, slot)."""

    def __init__(self) -> None:
        self._run_ids: dict[Key, str] = {}

    def run_id(self, key: Key) -> str | None:
        """The run id a start of `key` was claimed with, when that claim is in doubt."""
        return self._run_ids.get(key)

    def failed(self, starts: Iterable[Start]) -> None:
        """These claims got no answer (or an error): each may have committed."""
        for start in starts:
            self._run_ids[(start.job, start.slot)] = start.run_id
        while len(self._run_ids) > KEEP:
            del self._run_ids[next(iter(self._run_ids))]

    def given_up(self, job: str, first: datetime, last: datetime) -> list[str]:
        """The run ids of `job`'s claims in doubt for slots from `first` to `last`, whose
        starts were given up (missed): no longer tried again, they may hold a claimed run
        that never started (the recorder closes it)."""
        keys = [key for key in self._run_ids if key[0] == job and first <= key[1] <= last]
        return [self._run_ids.pop(key) for key in keys]

    def doubted(self, starts: Sequence[Start], claims: Sequence[Claim]) -> list[Start]:
        """The starts found taken whose own earlier claim is in doubt; the others'
        doubt is settled (they were answered)."""
        found = []
        for start, claim in zip(starts, claims, strict=True):
            key = (start.job, start.slot)
            if claim is None and self._run_ids.get(key) == start.run_id:
                found.append(start)
            self._run_ids.pop(key, None)
        return found


def ours(doubted: Sequence[Start], runs: Iterable[AttemptRow], replica: str) -> dict[str, int]:
    """Of the cluster's unfinished runs, those of `doubted` this replica claimed: run id ->
    the attempt's row."""
    ids = {start.run_id for start in doubted}
    return {r.run_id: r.id for r in runs if r.run_id in ids and r.replica == replica}
