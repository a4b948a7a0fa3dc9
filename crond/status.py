"""`crond status` and `crond history`: the state store read beside the schedules file.

Pure apart from what it is handed: cli.py loads the file, opens the store read-only and
prints. The store may be missing (no daemon has run yet, or `state_dir: none`): status
then shows the file's jobs with their next fires and no history.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from crond.clock import iso_utc
from crond.config import Job
from crond.state import AttemptRow, Summary
from crond.timing import Fire

__all__ = ["StatusRow", "daemon_alive", "format_history", "format_status", "status_rows"]


@dataclass(frozen=True)
class StatusRow:
    job: str
    enabled: bool
    schedule: str
    last: AttemptRow | None
    success: Summary | None
    next_fire: Fire | None
    running: bool

    def as_dict(self) -> dict[str, Any]:
        last = self.last
        success = self.success
        has_success = success is not None and success.success_finished is not None
        return {
            "job": self.job,
            "enabled": self.enabled,
            "schedule": self.schedule,
            "last_run": None
            if last is None
            else {
                "run_id": last.run_id,
                "slot": iso_utc(last.slot),
                "attempt": last.attempt,
                "started": iso_utc(last.started),
                "finished": None if last.finished is None else iso_utc(last.finished),
                "outcome": last.outcome,
                "exit_code": last.exit_code,
                "duration_s": last.duration_s,
            },
            "last_success": {
                "run_id": success.success_run_id,
                "started": _iso(success.success_started),
                "finished": _iso(success.success_finished),
                "duration_s": success.success_duration_s,
            }
            if success is not None and has_success
            else None,
            "next_fire": None
            if self.next_fire is None
            else {
                "at": iso_utc(self.next_fire.at),
                "local": self.next_fire.local.isoformat(),
                "note": self.next_fire.note,
            },
            "running": self.running,
        }


def _iso(when: datetime | None) -> str | None:
    return None if when is None else iso_utc(when)


def daemon_alive(info: Mapping[str, Any] | None, boot: str | None) -> bool:
    """Whether the daemon that last opened the store is still running: same boot, and its
    pid is there (a pid of another user's process answers EPERM: there, too)."""
    if not info or not isinstance(info.get("pid"), int):
        return False
    if boot is not None and info.get("boot_id") not in (None, boot):
        return False
    try:
        os.kill(info["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status_rows(
    jobs: Mapping[str, Job],
    summaries: Mapping[str, Summary],
    now: datetime,
    *,
    alive: bool,
) -> list[StatusRow]:
    """One row a job of the file, in the file's order."""
    rows = []
    for name, job in jobs.items():
        summary = summaries.get(name)
        last = summary.last if summary else None
        fire = None
        if job.enabled:
            with contextlib.suppress(StopIteration):
                fire = job.make_timing().next_after(now)
        running = alive and last is not None and last.finished is None
        rows.append(StatusRow(name, job.enabled, job.schedule_text, last, summary, fire, running))
    return rows


def _when(when: datetime | None) -> str:
    """To the second: a table is for reading (--json has the microseconds)."""
    return "-" if when is None else iso_utc(when.replace(microsecond=0))


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    return f"{value:.1f}s" if value < 100 else f"{value:.0f}s"


def _table(header: Sequence[str], lines: Iterable[Sequence[str]]) -> str:
    rows = [tuple(header), *(tuple(line) for line in lines)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def format_status(rows: Sequence[StatusRow]) -> str:
    header = ("JOB", "SCHEDULE", "LAST RUN", "OUTCOME", "DURATION", "LAST SUCCESS", "NEXT FIRE")
    lines = []
    for row in rows:
        last = row.last
        if row.running:
            outcome = "running"
        elif last is not None and last.finished is None:
            outcome = "lost?"  # open, and the daemon that ran it is gone
        else:
            outcome = "-" if last is None or last.outcome is None else last.outcome
        success = row.success.success_finished if row.success else None
        if not row.enabled:
            nxt = "disabled"
        elif row.next_fire is None:
            nxt = "at next boot" if row.schedule == "@reboot" else "never"
        else:
            nxt = _when(row.next_fire.at)
            if row.next_fire.note:
                nxt += f" ({row.next_fire.note})"
        lines.append(
            (
                row.job,
                row.schedule,
                _when(last.started if last else None),
                outcome,
                _seconds(last.duration_s if last else None),
                _when(success),
                nxt,
            )
        )
    return _table(header, lines)


def format_status_json(rows: Sequence[StatusRow]) -> str:
    return "\n".join(json.dumps(row.as_dict()) for row in rows)


def format_history(attempts: Sequence[AttemptRow]) -> str:
    """Oldest first: one line an attempt, then its output tail indented."""
    out = []
    for a in attempts:
        exit_code = "-" if a.exit_code is None else str(a.exit_code)
        out.append(
            f"{_when(a.started)}  {a.job}  {a.run_id}  attempt {a.attempt}  "
            f"slot {iso_utc(a.slot)}  {a.outcome or 'running'}  exit {exit_code}  "
            f"{_seconds(a.duration_s)}"
        )
        out.extend(f"    | {line}" for line in a.output)
    return "\n".join(out)


def format_history_json(attempts: Sequence[AttemptRow]) -> str:
    return "\n".join(json.dumps(a.as_dict()) for a in attempts)
