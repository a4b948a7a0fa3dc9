"""What `crond status` and `crond history` print of the state store (crond/status.py reads
it): the status table and its JSON lines, each job's pause, the history's lines. Plain
text from plain values; escaped where a value came from the store (a note, a replica's
name), so nothing read can forge a line or a terminal escape.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from json.encoder import encode_basestring
from types import MappingProxyType
from typing import Any

from crond.clock import iso_utc
from crond.config.wording import escape
from crond.store.base import AttemptRow, PauseRow, StatusRow

# A pause's note as a line shows it: the daemon keeps no longer ones (docs/control.md); a
# store written some other way costs no more.
_NOTE_SHOWN = 500
# Who paused a job, as the store keeps it: `{"uid", "user", "pid"}` is far shorter.
_BY_MAX = 1024
_NO_PAUSES: Mapping[str, PauseRow] = MappingProxyType({})
# A replica's name as a cell shows it (the database keeps what a replica said).
_REPLICA_SHOWN = 64


def _when(when: datetime | str | None) -> str:
    """To the second: a table is for reading (--json has the microseconds)."""
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
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    # One format for every row (10,000 rows: ~10x faster than a ljust a cell).
    row_format = "  ".join(f"{{:<{width}}}" for width in widths)
    return "\n".join(row_format.format(*row).rstrip() for row in rows)


def format_status(
    rows: Sequence[StatusRow],
    *,
    alive: bool,
    pauses: Mapping[str, PauseRow] = _NO_PAUSES,
    now: datetime | None = None,
    replicas: Mapping[str, str] | None = None,
    live: Collection[str] | None = None,
    by_row: Sequence[str | None] | None = None,
) -> str:
    """The table. A PAUSE column is there when a job shown has a pause kept (or one that
    ran out and is not cleared yet): a line a job, greppable, whatever the note says. A
    REPLICA column (before it) for a cluster (`replicas`: by job, who ran the newest
    attempt; `live`: the replicas running, whose open attempts run: others' are lost)."""
    header: tuple[str, ...] = (
        "JOB", "SCHEDULE", "LAST RUN", "OUTCOME", "DURATION", "LAST SUCCESS", "NEXT FIRE"
    )  # fmt: skip
    if replicas is not None:
        header += ("REPLICA",)
    when = now or datetime.now(UTC)
    paused = [pauses.get(row.job) for row in rows] if pauses else []
    if any(paused):
        header += ("PAUSE",)
    lines: list[tuple[str, ...]] = []
    for i, row in enumerate(rows):
        by = _by(i, row, replicas, by_row)
        # An open attempt is running, or was left open by a daemon that is gone.
        runs = alive if live is None or replicas is None else by in live
        outcome = ("running" if runs else "lost?") if row.open else row.outcome or "-"
        if not row.enabled:
            nxt = "disabled"
        elif row.next_text is None:
            nxt = "at next boot" if row.schedule == "@reboot" else row.next_note or "never"
        else:
            nxt = _when(row.next_text)
            if row.next_note:
                nxt += f" ({row.next_note})"
        lines.append(
            (
                row.job,
                row.schedule,
                _when(row.started),
                outcome,
                _seconds(row.duration_s),
                _when(row.success_finished),
                nxt,
                *(() if replicas is None else (_replica_cell(by),)),
            )
        )
    if any(paused):
        lines = [
            (*line, "-" if pause is None else pause_text(pause, when))
            for line, pause in zip(lines, paused, strict=True)
        ]
    return _table(header, lines)


def _by(
    i: int, row: StatusRow, replicas: Mapping[str, str] | None, by_row: Sequence[str | None] | None
) -> str | None:
    """The replica of the i-th row: its own (a `replicas: all` job's row a replica), else
    the one that ran its job's newest attempt."""
    if by_row is not None:
        return by_row[i]
    return None if replicas is None else replicas.get(row.job)


def _replica_cell(name: str | None) -> str:
    """A replica's name as a cell: escaped and bounded (a row stays one line)."""
    return "-" if name is None else escape(name[:_REPLICA_SHOWN]) or "-"


def expired(pause: PauseRow, now: datetime) -> bool:
    """The pause ran out (the daemon clears it then; one that is not running cannot)."""
    return pause.until is not None and pause.until <= now


def pause_text(pause: PauseRow, now: datetime) -> str:
    """A pause as the table shows it, escaped (a note is anybody's text):
    `paused until 2026-12-02 18:00 UTC by alice ("db migration")`, `paused (until
    resumed) by alice`, or `pause expired 2026-12-02 18:00 UTC ...` for one that ran out."""
    if pause.until is None:
        text = "paused (until resumed)"
    else:
        verb = "pause expired" if expired(pause, now) else "paused until"
        text = f"{verb} {_minute(pause.until)}"
    by = _by_of(pause.by)
    if by is not None and by["user"] is not None:
        text += f" by {escape(by['user'][:64])}"
    elif by is not None and by["uid"] is not None:
        text += f" by uid {by['uid']}"
    if pause.note:
        note = pause.note[:_NOTE_SHOWN] + ("..." if len(pause.note) > _NOTE_SHOWN else "")
        text += f' ("{escape(note)}")'
    return text


def pause_json(pause: PauseRow) -> dict[str, Any]:
    """A pause as --json shows it: `until` (null: until resumed), `note`, `by`
    ({"uid", "user", "pid"}, or null when the store's text does not decode)."""
    return {
        "until": None if pause.until is None else iso_utc(pause.until),
        "note": pause.note,
        "by": _by_of(pause.by),
    }


def _minute(when: datetime) -> str:
    """To the minute when that is exact (an `--until` as people write it), else the second."""
    utc = when.astimezone(UTC)
    exact = utc.second == 0 and utc.microsecond == 0
    return utc.strftime("%Y-%m-%d %H:%M UTC" if exact else "%Y-%m-%d %H:%M:%S UTC")


def _by_of(text: str) -> dict[str, Any] | None:
    """Who paused, from the store's JSON text: uid, user and pid, each of its own type or
    None; None when it is not such an object (bounded: it is read, not trusted)."""
    if len(text) > _BY_MAX:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    uid, user, pid = value.get("uid"), value.get("user"), value.get("pid")
    return {
        "uid": uid if _is_int(uid) else None,
        "user": user if isinstance(user, str) else None,
        "pid": pid if _is_int(pid) else None,
    }


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def format_history(attempts: Sequence[AttemptRow]) -> str:
    """Oldest first: one line an attempt (ending `replica NAME` for a cluster's, `backfill`
    for a backfill's), then its output tail indented."""
    out = []
    for a in attempts:
        exit_code = "-" if a.exit_code is None else str(a.exit_code)
        ran_by = "" if a.replica is None else f"  replica {_replica_cell(a.replica)}"
        kind = "" if a.kind is None else f"  {a.kind}"  # a backfill's run
        out.append(
            f"{_when(a.started)}  {a.job}  {a.run_id}  attempt {a.attempt}  "
            f"slot {iso_utc(a.slot)}  {a.outcome or 'running'}  exit {exit_code}  "
            f"{_seconds(a.duration_s)}{ran_by}{kind}{_late_end(a)}"
        )
        out.extend(f"    | {line}" for line in a.output)
    return "\n".join(out)


def _late_end(a: AttemptRow) -> str:
    """Beside `lost`, the end its cut-off replica recorded later (docs/replicas.md)."""
    if a.late_finished is None:
        return ""
    code = "" if a.late_exit_code is None else f" exit {a.late_exit_code}"
    return f"  (ended late: {a.late_outcome}{code} at {_when(a.late_finished)})"


def output_heading(a: AttemptRow) -> str:
    """`crond output`'s line before an attempt's output (on stderr, so that the output
    alone can be piped): `== backup run ID attempt 2: failed, exit 3, 1.2s (started ...)`."""
    how = a.outcome or "running"
    if a.exit_code is not None:
        how += f", exit {a.exit_code}"
    if a.duration_s is not None:
        how += f", {_seconds(a.duration_s)}"
    ran_by = "" if a.replica is None else f", replica {_replica_cell(a.replica)}"
    return (
        f"== {a.job} run {a.run_id} attempt {a.attempt}: {how} (started {_when(a.started)}{ran_by})"
    )


def output_note(a: AttemptRow, kept: int) -> str | None:
    """After an attempt with as many lines as the store keeps: earlier ones may be gone."""
    if len(a.output) < kept:
        return None
    return (
        f"   (the store keeps the last {kept} lines of an attempt: any before these are in the "
        f"daemon's log, as job.output events with run_id {a.run_id})"
    )


def format_history_json(attempts: Sequence[AttemptRow]) -> str:
    return "\n".join(json.dumps(_attempt_dict(a)) for a in attempts)


def _attempt_dict(a: AttemptRow) -> dict[str, Any]:
    """`replica` only for a cluster's attempt (a lone daemon's have none)."""
    return (
        {
            "job": a.job,
            "run_id": a.run_id,
            "slot": iso_utc(a.slot),
            "attempt": a.attempt,
            "started": iso_utc(a.started),
            "finished": None if a.finished is None else iso_utc(a.finished),
            "outcome": a.outcome,
            "exit_code": a.exit_code,
            "duration_s": a.duration_s,
            "output": a.output,
        }
        | ({} if a.replica is None else {"replica": a.replica})
        | ({} if a.kind is None else {"kind": a.kind})
        | _late_end_json(a)
    )


def _late_end_json(a: AttemptRow) -> dict[str, Any]:
    if a.late_finished is None:
        return {}
    late = {"finished": iso_utc(a.late_finished), "outcome": a.late_outcome}
    return {"late_end": late | {"exit_code": a.late_exit_code}}


def format_status_json(
    rows: Sequence[StatusRow],
    *,
    alive: bool,
    pauses: Mapping[str, PauseRow] = _NO_PAUSES,
    now: datetime | None = None,
    replicas: Mapping[str, str] | None = None,
    live: Collection[str] | None = None,
    by_row: Sequence[str | None] | None = None,
) -> str:
    """One compact JSON object a job, a line each (docs/state.md shows one). Written by
    hand, not by json.dumps: 10,000 lines in a third of the time. `alive`: whether the
    daemon that wrote the store runs; if not, nothing is running (an open attempt is a
    lost one). `paused`: the job's pause, or null; `pause_expired`: one that ran out and
    is not cleared yet (the daemon is not running), or null. For a cluster (`replicas`),
    `last_run` has the `replica` that ran it (`live` as for `format_status`)."""
    when = now or datetime.now(UTC)
    if replicas is None:
        return "\n".join([_status_line(row, alive, pauses.get(row.job), when) for row in rows])
    return "\n".join(
        [
            _status_line(row, alive if live is None else by in live, pauses.get(row.job), when, by)
            for i, row in enumerate(rows)
            for by in (_by(i, row, replicas, by_row),)
        ]
    )


_REPLICA_KEY = ',"replica":'
_NOT_PAUSED = '"paused":null,"pause_expired":null'


def _pause_fields(pause: PauseRow, now: datetime) -> str:
    """`"paused":...,"pause_expired":...`, ASCII-escaped: a note is anybody's text, and a
    line must stay one line (U+2028 among them)."""
    shown = json.dumps(pause_json(pause), separators=(",", ":"))
    if expired(pause, now):
        return f'"paused":null,"pause_expired":{shown}'
    return f'"paused":{shown},"pause_expired":null'


def _status_line(
    row: StatusRow, alive: bool, pause: PauseRow | None, now: datetime, replica: str | None = None
) -> str:
    """A job's line (`replica`: last in `last_run`, when there is one). Each value is a
    JSON string (`esc`: not ASCII-escaped, text printed as written), a number (an int's
    or a float's repr, as json.dumps writes them) or null, tested inline: a helper call a
    value was a third of the time."""
    (job, enabled, schedule, next_text, next_local, next_note, run_id, slot, attempt, started,
     finished, outcome, exit_code, duration_s, ok_run_id, ok_started, ok_finished,
     ok_duration_s) = row  # fmt: skip
    esc, null = encode_basestring, "null"
    last = success = fire = null
    if run_id is not None:
        last = (
            f'{{"run_id":{esc(run_id)},"slot":{null if slot is None else esc(slot)},'
            f'"attempt":{null if attempt is None else repr(attempt)},'
            f'"started":{null if started is None else esc(started)},'
            f'"finished":{null if finished is None else esc(finished)},'
            f'"outcome":{null if outcome is None else esc(outcome)},'
            f'"exit_code":{null if exit_code is None else repr(exit_code)},'
            f'"duration_s":{null if duration_s is None else repr(duration_s)}'
            f"{'' if replica is None else _REPLICA_KEY + esc(replica)}}}"
        )
    if ok_finished is not None:
        success = (
            f'{{"run_id":{null if ok_run_id is None else esc(ok_run_id)},'
            f'"started":{null if ok_started is None else esc(ok_started)},'
            f'"finished":{esc(ok_finished)},'
            f'"duration_s":{null if ok_duration_s is None else repr(ok_duration_s)}}}'
        )
    done = ""
    if next_text is not None:
        local = null if next_local is None else esc(next_local)
        note = null if next_note is None else esc(next_note)
        fire = f'{{"at":{esc(next_text)},"local":{local},"note":{note}}}'
    elif next_note is not None:
        done = f'"done":{esc(next_note)},'  # why a job that fires no more is done
    running = "true" if alive and run_id is not None and finished is None else "false"
    return (
        f'{{"job":{esc(job)},"enabled":{"true" if enabled else "false"},'
        f'"schedule":{esc(schedule)},"last_run":{last},"last_success":{success},'
        f'"next_fire":{fire},{done}"running":{running},'
        f"{_NOT_PAUSED if pause is None else _pause_fields(pause, now)}}}"
    )
