"""The state store's seam (crond/store/base.py), what the daemon keeps beside its runs: the
pauses operators set (crond/daemon/pausing.py), the notifications not yet delivered
(crond/notify/delivery.py), and its upkeep: the view `crond status` reads, its marks, the
heartbeat's checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

from crond.store.rows import OutboxRow, PauseRow, ViewRow


class PauseRecords(Protocol):
    """The pauses operators set (`crond pause`), kept across restarts."""

    def set_pause(self, row: PauseRow) -> None:
        """Keep a job's pause, replacing the one it had, in one commit."""
        ...

    def clear_pause(self, job: str) -> None:
        """Forget a job's pause (none is no error), in one commit."""
        ...

    def set_pauses(self, rows: Sequence[PauseRow]) -> None:
        """`set_pause` of each row, all in one commit (`crond pause --all`)."""
        ...

    def clear_pauses(self, jobs: Sequence[str]) -> None:
        """`clear_pause` of each job, all in one commit (`crond resume --all`)."""
        ...


class OutboxRecords(Protocol):
    """Notifications kept until delivered or given up (crond/notify/delivery.py)."""

    def outbox_add(self, rows: Sequence[OutboxRow]) -> list[int]:
        """Keep notifications to deliver (their `id` is ignored), in one commit; their ids."""
        ...

    def outbox_pending(self, limit: int) -> list[OutboxRow]:
        """The oldest `limit` notifications not yet delivered nor given up."""
        ...

    def outbox_done(self, ids: Sequence[int]) -> None:
        """Forget notifications delivered or given up, in one commit."""
        ...


class Upkeep(Protocol):
    """The daemon's view of its jobs for `crond status`, its marks (`@reboot`'s boot,
    the streaks of notifications), and the heartbeat's checks."""

    @property
    def moved_aside(self) -> str | None:
        """Where opening it put a damaged store (kept as evidence), if it did."""
        ...

    def set_meta(self, key: str, value: str) -> None: ...

    def publish_view(self, rows: Iterable[ViewRow], digest: str | None) -> None:
        """Make the view a freshly loaded file's jobs. `digest`: the sha256 of the
        file's bytes (None: unknown, and no status will trust the view)."""
        ...

    def update_view(
        self,
        moved: Sequence[ViewRow],
        cursors: Sequence[tuple[str, datetime]] = (),
        first: Sequence[tuple[str, datetime]] = (),
    ) -> None:
        """Next fires that moved, and cursors that moved with no run started; `first`: the
        cursors of jobs the daemon sees for the first time, set only where a job has none
        (a downtime after it is then the job's too: docs/state.md)."""
        ...

    def check_in_place(self) -> None:
        """Raise StateError (corrupt) when the store was removed or replaced under the
        daemon: its writes would go where nobody looks."""
        ...

    def checkpoint(self) -> None:
        """Housekeeping the daemon's heartbeat does, off the start path."""
        ...
