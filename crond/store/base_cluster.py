"""The state store's seam (crond/store/base.py), what replicas sharing one database do with
one another (crond/daemon/cluster.py, polling.py, fencing.py, indoubt.py): heartbeats,
dead replicas' runs, claims in doubt, kill requests, resumes kept for the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from crond.store.rows import AttemptRow, Poll


class ClusterRecords(Protocol):
    """A replica's own part of a shared store (base.Replicated): its heartbeat, the runs
    of the replicas that stopped beating, its claims in doubt, kill requests and resumes."""

    @property
    def replica(self) -> str:
        """This replica's name: its attempts and claims (`replicas: all`) carry it."""
        ...

    def beat(self, now: datetime, skew: float | None = None) -> datetime:
        """This replica is alive at `now` (kept with its pid, host, boot, version and file's
        digest, and `skew`, its clock's skew the last beat measured; None keeps the one
        kept), in one commit; the database's clock then (`cluster.clock_skew`)."""
        ...

    def write_tails(
        self, tails: Sequence[tuple[str, Sequence[tuple[str, str]], int, bool]]
    ) -> None:
        """The output tails of watched runs (pg_follow.py): each (run_id, its last lines
        as (stream, line), the lines seen in all, whether its attempt ended)."""
        ...

    def close_dead(self, now: datetime, timeout: timedelta) -> list[AttemptRow]:
        """The open attempts of the other replicas whose last beat is older than
        `timeout`, closed as `lost` in one commit; when survivors race, each attempt is
        closed (and returned) by one of them only."""
        ...

    def abandon(self, run_ids: Sequence[str]) -> int:
        """Runs this replica claimed and never started (a claim in doubt, its start then
        missed) removed in one commit, their claims kept (the slot was told missed): none
        holds its job busy, each summary shows the attempt before, and a `max_runs` count
        is given back; how many were open."""
        ...

    def release_locks(self, run_id: str) -> None:
        """The locks run `run_id` holds given back (docs/workflows.md), when its last end
        has no attempt row to write (its start never reached the database)."""
        ...

    def lock_holds(self) -> dict[str, list[str]]:
        """The locks each run of the cluster holds, by run id (`crond ps`)."""
        ...

    # A KillRow kept for every replica to see, its id; and `Poll` in one transaction.
    def request_kill(self, target: str, by: str, now: datetime) -> int: ...
    def poll(self, after: int) -> Poll: ...

    def resume(self, job: str, by: str, now: datetime) -> None:
        """`clear_pause` by `by` (JSON): who ended it is kept an hour for `resumed_by`."""
        ...

    def resumed_by(self, job: str, since: datetime) -> str | None:
        """Who resumed the job's pause that began at `since` (JSON), if a resume ended it."""
        ...

    def resume_many(self, jobs: Sequence[str], by: str, now: datetime) -> None:
        """`resume` of each job, all in one commit."""
        ...
