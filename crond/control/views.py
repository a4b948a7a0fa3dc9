"""What `crond ps`, `trigger`, `kill`, `pause`, `resume` and `reload` print from the daemon's
results (crond/control/protocol.py has their shapes), and the exit status `trigger
--wait` passes on. Pure functions, so the CLI only calls and prints."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

_SIGNAL_BASE = 128  # a shell's convention: killed by signal N exits 128+N


def format_ps(runs: Sequence[Mapping[str, Any]]) -> str:
    """The runs as a table; with replicas, a REPLICA column (another replica's runs have
    no PID: it is theirs)."""
    header: tuple[str, ...] = ("JOB", "RUN_ID", "ATTEMPT", "PID", "SLOT", "STARTED", "ELAPSED")
    replicas = any("replica" in run for run in runs)
    if replicas:
        header = (*header[:3], "REPLICA", *header[3:])
    locks = any(run.get("locks") for run in runs)  # the locks each run holds
    lines = [
        (
            str(run.get("job", "?")),
            str(run.get("run_id", "?")),
            _text(run.get("attempt")),
            *((_text(run.get("replica")),) if replicas else ()),
            _text(run.get("pid")),
            _when(run.get("slot")),
            _when(run.get("started")),
            _seconds(run.get("elapsed")),
            *((",".join(map(str, run.get("locks") or [])),) if locks else ()),
        )
        for run in runs
    ]
    return _table((*header, *(("LOCKS",) if locks else ())), lines)


def format_waiting(waiting: Sequence[Mapping[str, Any]]) -> str:
    """The runs waiting for locks (docs/workflows.md), oldest slot first: each with the
    lock it waits for, who holds it, and when its grace runs out (then it is missed)."""
    header = ("WAITING", "SLOT", "LOCK", "HELD BY", "MISSED AFTER")
    lines = [
        (
            str(w.get("job", "?")),
            _when(w.get("slot")),
            _text(w.get("lock")),
            ", ".join(map(str, w.get("held_by") or [])) or "-",
            _when(w.get("deadline")),
        )
        for w in waiting
    ]
    return _table(header, lines)


def _table(header: tuple[str, ...], lines: Sequence[tuple[str, ...]]) -> str:
    rows = [header, *lines]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def format_daemon(answer: Mapping[str, Any]) -> str | None:
    """`ps`'s first line: `daemon pid 4242` (`, replica r1` with replicas); None from a
    daemon too old to say."""
    if answer.get("pid") is None:
        return None
    said = f"daemon pid {answer['pid']}"
    replica = answer.get("replica")
    return f"{said}, replica {replica}" if replica is not None else said


def format_reloaded(result: Mapping[str, Any]) -> str:
    """`reloaded: 12 jobs (1 added, 0 removed, 2 changed: backup, report)`."""
    jobs = result.get("jobs")
    parts = []
    for key in ("added", "removed", "changed"):
        names = [str(n) for n in result.get(key) or []]
        shown = f": {', '.join(names[:10])}{', ...' if len(names) > 10 else ''}" if names else ""
        parts.append(f"{len(names)} {key}{shown}")
    return f"reloaded: {_text(jobs)} job{'s' if jobs != 1 else ''} ({'; '.join(parts)})"


def format_reload_refused(file: object, result: Mapping[str, Any]) -> str:
    jobs = result.get("jobs")
    return (
        f"crond: {file} was not reloaded (errors above); the daemon keeps the "
        f"{_text(jobs)} job{'s' if jobs != 1 else ''} it had"
    )


def format_stopped(
    stopped: Sequence[Mapping[str, Any]],
    asked: Sequence[Mapping[str, Any]] = (),
    backfills: Sequence[Mapping[str, Any]] = (),
) -> str:
    """What `crond kill` did: runs stopped here; with replicas, runs another replica was
    asked to stop (it does within about two seconds); the backfills it cancelled."""
    lines = [
        f"stopped {s.get('job', '?')} run {s.get('run_id', '?')} (pid {_text(s.get('pid'))})"
        for s in stopped
    ]
    lines += [
        f"asked replica {_text(a.get('replica'))} to stop {a.get('job', '?')} run "
        f"{a.get('run_id', '?')}"
        for a in asked
    ]
    lines += [format_backfill(b) for b in backfills]
    return "\n".join(lines)


def format_backfill(result: Mapping[str, Any]) -> str:
    """A backfill as `crond backfill --wait` ends it and `crond kill` cancels it:
    `backfill ID of JOB: finished, 50/50 slots (49 succeeded, 1 failed)`."""
    state = result.get("state", "cancelled")
    done, total = _text(result.get("done")), _text(result.get("total"))
    ok, failed = _text(result.get("succeeded")), _text(result.get("failed"))
    return (
        f"backfill {result.get('id', '?')} of {result.get('job', '?')}: {state}, "
        f"{done}/{total} slots ({ok} succeeded, {failed} failed)"
    )


def json_line(result: Mapping[str, Any]) -> str:
    return json.dumps(dict(result))


def format_paused(result: Mapping[str, Any]) -> str:
    jobs = ", ".join(map(str, result.get("jobs") or [])) or "no job"
    until = result.get("until")
    said = f"paused {jobs} until {_when(until)}" if until else f"paused {jobs} until resumed"
    if result.get("stored") is False:
        said += "; the daemon has no state store: the pause lasts until it stops"
    return said


def format_resumed(resumed: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for entry in resumed:
        if entry.get("was_paused") is False:
            lines.append(f"{entry.get('job', '?')} was not paused")
            continue
        skipped = entry.get("skipped") or 0
        slots = f"{skipped} slot{'s' if skipped != 1 else ''}"
        lines.append(f"resumed {entry.get('job', '?')} ({slots} skipped while paused)")
    return "\n".join(lines) or "nothing was paused"


def format_ended(job: str, result: Mapping[str, Any]) -> str:
    """The last line of `trigger --wait`, on stderr: how the run ended."""
    code = result.get("exit_code")
    how = f"exit {code}" if isinstance(code, int) and code >= 0 else None
    if isinstance(code, int) and code < 0:
        how = f"signal {-code}"
    outcome = result.get("outcome", "ended")
    tail = f" ({how})" if how else ""
    return f"crond: {job} run {result.get('run_id', '?')}: {outcome}{tail}"


def exit_status(result: Mapping[str, Any]) -> int:
    """The run's exit status as a shell gives it: its code; 128+N for signal N; 1 for a
    run that did not succeed and has no code (killed or timed out before one)."""
    code = result.get("exit_code")
    success = result.get("outcome") == "success"
    if not isinstance(code, int) or isinstance(code, bool):
        return 0 if success else 1
    if code < 0:
        return min(_SIGNAL_BASE - code, 255)
    if code == 0 and not success:
        return 1
    return min(code, 255)


def _text(value: object) -> str:
    return "-" if value is None else str(value)


def _when(value: object) -> str:
    """To the second: a table is for reading (--json has the rest)."""
    if not isinstance(value, str) or len(value) < 19:
        return _text(value)
    return value[:19] + "Z"


def _seconds(value: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return _text(value)
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 60:
        return f"{value:.1f}s"
    minutes, seconds = divmod(int(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"
