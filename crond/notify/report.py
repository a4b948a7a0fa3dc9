"""What delivery (delivery.py) says of its items: one log line per fact — `notify.sent`,
`notify.retry`, `notify.failed`, `notify.stale`, `notify.dropped`, `notify.error`
(docs/running.md) — and each item delivered or given up counted through `on_result`
(the metrics).

An endpoint far slower than the jobs fail overflows its lane many times a second: those
"queue full" give-ups are summed per notifier into one `notify.failed` (with `count`),
logged at once and then at most every OVERFLOW_LOG_S. No time is read here: `now` is
Delivery's monotonic seconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Final

from structlog.typing import FilteringBoundLogger

from crond.notify.outbox import OutboxItem

PING: Final = "ping"  # the notifier name pings are logged and counted under
OVERFLOW_LOG_S: Final = 10.0  # at most one "queue full" notify.failed a notifier this often


class Report:
    """Delivery's log lines and counts; see the module docstring."""

    def __init__(
        self, log: FilteringBoundLogger, on_result: Callable[[str, str], None] | None
    ) -> None:
        self.log = log
        self.on_result = on_result
        # Per notifier: "queue full" give-ups not yet logged (how many, the last), and
        # when the last such line was logged (monotonic).
        self._overflow: dict[str, tuple[int, OutboxItem]] = {}
        self._overflow_logged: dict[str, float] = {}

    def sent(self, item: OutboxItem, tries: int) -> None:
        # Seen at the default level (docs/alerting.md): a notifier's message, and a
        # ping that needed retries (its first failure was a warning); a ping at its
        # first try is debug, as every run sends two.
        quiet = item.kind == "ping" and tries == 1
        (self.log.debug if quiet else self.log.info)(
            "notify.sent", notifier=_name(item), job=item.job, job_event=item.event, tries=tries
        )
        self._tell("sent", item)

    def retry(self, item: OutboxItem, tries: int, delay: float, error: str) -> None:
        # The first failure of a notification is said at warning level: a dead or
        # mistyped endpoint shows at once, not after the 5 minutes of retries.
        level = self.log.warning if tries == 1 else self.log.debug
        level(
            "notify.retry",
            notifier=_name(item),
            job=item.job,
            job_event=item.event,
            tries=tries,
            delay_s=round(delay, 3),
            error=error,
        )

    def stale(self, item: OutboxItem) -> None:
        """Its notifier or job is gone from the file."""
        self.log.debug("notify.stale", notifier=_name(item), job=item.job, job_event=item.event)

    def failed(self, item: OutboxItem, error: str) -> None:
        """Given up: not delivered, and never will be."""
        self.log.error(
            "notify.failed", notifier=_name(item), job=item.job, job_event=item.event, error=error
        )
        self._tell("failed", item)

    def overflowed(self, item: OutboxItem, now: float) -> float | None:
        """An item given up because its lane was full: logged now, or summed with the
        next ones of its notifier. When the first is held back, the instant a pass must
        call `overflow_due` to log them (None: no new instant)."""
        self._tell("failed", item)
        name = _name(item)
        count, _ = self._overflow.get(name, (0, item))
        self._overflow[name] = (count + 1, item)
        due = self._overflow_logged.get(name, float("-inf")) + OVERFLOW_LOG_S
        if now >= due:
            self._log_overflow(name, now)
        elif count == 0:  # the first held back: a pass then logs it (loop time = monotonic)
            return due
        return None

    def overflow_due(self, now: float) -> None:
        """Log the held back "queue full" give-ups whose OVERFLOW_LOG_S is over."""
        for name in list(self._overflow):
            if now >= self._overflow_logged.get(name, 0.0) + OVERFLOW_LOG_S:
                self._log_overflow(name, now)

    def overflow_all(self, now: float) -> None:
        """Log every held back "queue full" give-up (delivery ends)."""
        for name in list(self._overflow):
            self._log_overflow(name, now)

    def _log_overflow(self, name: str, now: float) -> None:
        count, item = self._overflow.pop(name, (0, None))
        if item is None or not count:
            return
        self._overflow_logged[name] = now
        self.log.error(
            "notify.failed",
            notifier=name,
            job=item.job,
            job_event=item.event,
            error="queue full",
            count=count,
        )

    def refused(self) -> None:
        """An item put while delivery closes: not taken."""
        self.log.warning("notify.dropped", count=1, reason="closing")

    def dropped(self, count: int) -> None:
        """`count` items left undelivered as delivery ends, kept nowhere."""
        if count:
            self.log.warning("notify.dropped", count=count)

    def bug(self, exc: Exception) -> None:
        """crond's own bug in delivery: said, never raised (telling must not stop
        scheduling, nor a bug end delivery)."""
        with contextlib.suppress(Exception):
            self.log.error("notify.error", error=type(exc).__name__)

    def _tell(self, result: str, item: OutboxItem) -> None:
        if self.on_result is not None:
            try:
                self.on_result(_name(item), result)
            except Exception as exc:  # noqa: BLE001  (metrics must not stop delivery)
                self.bug(exc)


def _name(item: OutboxItem) -> str:
    return PING if item.kind == "ping" else item.notifier
