"""`crond status` and `crond history`: the state store read beside the schedules file.

Pure apart from what it is handed: cli.py loads the file, opens the store read-only and
prints. The store may be missing (no daemon has run yet, or `state_dir: none`): status
then shows the file's jobs with their next fires and no history.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from crond import state
from crond.clock import iso_utc
from crond.state import AttemptRow, Summary

if TYPE_CHECKING:
    from crond.config import Job  # not at run time: pydantic is slow to import

__all__ = ["StatusRow", "daemon_alive", "format_history", "format_status", "status_rows"]


class NextFire(NamedTuple):
    at: str  # UTC, as `clock.iso_utc` writes it
    local: str  # ISO-8601 in the job's zone
    note: str | None


@dataclass(frozen=True)
class StatusRow:
    job: str
    enabled: bool
    schedule: str
    summary: Summary | None  # None: no attempt recorded
    next_fire: NextFire | None
    running: bool

    def as_dict(self) -> dict[str, Any]:
        s = self.summary
        return {
            "job": self.job,
            "enabled": self.enabled,
            "schedule": self.schedule,
            "last_run": None
            if s is None or s.run_id is None
            else {
                "run_id": s.run_id,
                "slot": s.slot,
                "attempt": s.attempt,
                "started": s.started,
                "finished": s.finished,
                "outcome": s.outcome,
                "exit_code": s.exit_code,
                "duration_s": s.duration_s,
            },
            "last_success": None
            if s is None or s.success_finished is None
            else {
                "run_id": s.success_run_id,
                "started": s.success_started,
                "finished": s.success_finished,
                "duration_s": s.success_duration_s,
            },
            "next_fire": None if self.next_fire is None else self.next_fire._asdict(),
            "running": self.running,
        }


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
    """One row a job of the file, in the file's order, next fires computed from `now`."""
    rows = []
    for name, job in jobs.items():
        summary = summaries.get(name)
        nxt = None
        if job.enabled:
            with contextlib.suppress(StopIteration):
                fire = job.make_timing().next_after(now)
                nxt = NextFire(iso_utc(fire.at), fire.local.isoformat(), fire.note)
        running = alive and _open(summary)
        rows.append(StatusRow(name, job.enabled, job.schedule_text, summary, nxt, running))
    return rows


def _open(summary: Summary | None) -> bool:
    return summary is not None and summary.run_id is not None and summary.finished is None


# A due slot is handled, and its next fire written, within milliseconds of the slot.
_STALE_S = 5.0


def quick_rows(path: Path, flag: str | None, now: datetime) -> list[StatusRow] | None:
    """The rows without loading the file, when that gives the same answer: the daemon
    that is running on the store has loaded exactly these bytes (their sha256 is the
    view's), so its view of the jobs is the file's. None otherwise: load the file.

    Where the store is: `--state-dir`, else the file's `daemon.state_dir` as read from
    that one block of the file, else the default. A misreading can only find no store, or
    one whose daemon loaded other bytes: then the file is loaded after all."""
    try:
        raw = path.read_bytes()
        reader = state.open_reader(flag, None if flag else _state_dir_hint(raw))
    except (OSError, state.StateError):
        return None
    try:
        found = _current_view(reader, hashlib.sha256(raw).hexdigest())
    finally:
        reader.close()
    if found is None:
        return None
    view, summaries = found
    rows = []
    oldest = now.timestamp() - _STALE_S
    for v in view:
        if v.next_at is not None and v.next_at < oldest:
            return None  # the daemon is behind (stopped, stalled): ask the file instead
        nxt = None
        if v.next_text is not None and v.next_local is not None:
            nxt = NextFire(v.next_text, v.next_local, v.next_note)
        summary = summaries.get(v.job)
        rows.append(StatusRow(v.job, v.enabled, v.schedule, summary, nxt, _open(summary)))
    return rows


def _current_view(
    reader: state.Reader, digest: str
) -> tuple[list[state.ViewRow], dict[str, Summary]] | None:
    """The view and the summaries, if a live daemon published the view for `digest`."""
    try:
        if reader.get_meta("view_sha256") != digest:
            return None
        info = reader.get_meta("daemon")
        if not daemon_alive(json.loads(info) if info else None, state.boot_id()):
            return None
        return reader.view(), reader.summaries()
    except (state.StateError, ValueError):
        return None


def _state_dir_hint(raw: bytes) -> str | None:
    """`daemon.state_dir` from the file's top-level `daemon:` block alone (its lines up to
    the next top-level key), without reading the whole file. None if absent or unclear."""
    import yaml  # noqa: PLC0415  (only here)

    lines = raw.decode("utf-8", errors="replace").splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("daemon:") and not line.startswith("daemon :"):
            continue
        block = [line]
        for more in lines[i + 1 :]:
            if more and not more[0].isspace() and not more.startswith("#"):
                break
            block.append(more)
        try:
            data = yaml.safe_load("\n".join(block))
        except yaml.YAMLError:
            return None
        daemon = data.get("daemon") if isinstance(data, dict) else None
        value = daemon.get("state_dir") if isinstance(daemon, dict) else None
        return value if isinstance(value, str) else None
    return None


def _when(when: datetime | str | None) -> str:
    """To the second: a table is for reading (--json has the milliseconds)."""
    if when is None:
        return "-"
    text = when if isinstance(when, str) else iso_utc(when)
    return text[:19] + "Z"


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
        s = row.summary
        if row.running:
            outcome = "running"
        elif _open(s):
            outcome = "lost?"  # open, and the daemon that ran it is gone
        else:
            outcome = "-" if s is None or s.outcome is None else s.outcome
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
                _when(s.started if s else None),
                outcome,
                _seconds(s.duration_s if s else None),
                _when(s.success_finished if s else None),
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
