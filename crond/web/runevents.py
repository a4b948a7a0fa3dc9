"""A run's events for its page, told from its attempts as the store keeps them: each
attempt's start (how long after its slot, or after the attempt before: a retry), its end
(succeeded, failed, timed out, killed, or closed `lost` when its daemon or replica
stopped), the end of a lost attempt that came late (kept beside `lost`), and the retry
still due. The store keeps attempts, not the daemon's log: who killed a run or what was
told to notifiers is in the log (job.kill_requested, notify.*), not here."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple

from crond.config.durations import format_duration

if TYPE_CHECKING:
    from crond.config.model import Retry
    from crond.store.base import AttemptRow

_ENDS = {
    "succeeded": "succeeded",
    "failed": "failed",
    "timeout": "timed out (stopped by its timeout)",
    "killed": "killed (crond kill or the dashboard; who: the daemon's log, job.kill_requested)",
    "lost": "closed lost: its daemon or replica stopped while it ran, no end was recorded",
}


class RunEvent(NamedTuple):
    at: datetime
    kind: str  # started, retry, an outcome, late, due, running
    text: str


def run_events(attempts: list[AttemptRow], retry: Retry | None) -> list[RunEvent]:
    """The events of one run's attempts (oldest first), in order of time. `retry`: the
    job's retry settings as the file has them now (None: the job is not in the file)."""
    found: list[RunEvent] = []
    before: AttemptRow | None = None
    for a in attempts:
        where = f" on {a.replica}" if a.replica else ""
        started = f"attempt {a.attempt} started{where}"
        if before is None or before.finished is None:
            lag = _span(a.started - a.slot)
            found.append(RunEvent(a.started, "started", f"{started}, {lag} after its slot"))
        else:
            wait = _span(a.started - before.finished)
            said = f"retry: {started}, {wait} after attempt {before.attempt} ended"
            found.append(RunEvent(a.started, "retry", said))
        found.extend(_end(a))
        before = a
    last = attempts[-1] if attempts else None
    if (
        last is not None
        and last.finished is not None
        and last.outcome in ("failed", "timeout")
        and retry is not None
        and last.attempt <= retry.attempts
    ):
        due = last.finished + retry.delay_before(last.attempt + 1)
        text = f"retry: attempt {last.attempt + 1} of {retry.attempts + 1} due (the job's retry)"
        found.append(RunEvent(due, "due", text))
    return sorted(found, key=lambda e: e.at)


def _end(a: AttemptRow) -> list[RunEvent]:
    if a.finished is None or a.outcome is None:
        said = f"attempt {a.attempt}: no end recorded yet (running)"
        return [RunEvent(a.started, "running", said)]
    said = f"attempt {a.attempt} {_ENDS.get(a.outcome, a.outcome)}"
    if a.outcome != "lost":
        if a.exit_code is not None:
            said += f", exit code {a.exit_code}"
        if a.duration_s is not None:
            said += f", after {_span(timedelta(seconds=a.duration_s))}"
    found = [RunEvent(a.finished, a.outcome, said)]
    if a.late_finished is not None:
        late = f"attempt {a.attempt} ended late, after it was closed lost: {a.late_outcome}"
        if a.late_exit_code is not None:
            late += f", exit code {a.late_exit_code}"
        found.append(RunEvent(a.late_finished, "late", late + " (kept beside lost)"))
    return found


def _span(delta: timedelta) -> str:
    """A duration: "0.3s" under a minute, else to the second ("2m5s"); never negative."""
    seconds = max(delta.total_seconds(), 0.0)
    if seconds < 59.95:
        return f"{seconds:.1f}s"
    return format_duration(timedelta(seconds=round(seconds)))
