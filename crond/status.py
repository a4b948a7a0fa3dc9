"""`crond status` and `crond history`: the state store read beside the schedules file,
and what is printed of it (the table, the JSON lines).

Status is a view of the jobs (schedule, enabled, next fire) with the store's one summary
row a job. The view is the running daemon's own, read from the store, when it loaded
exactly the bytes of the file (`quick`: no pydantic, no file loaded); else it is made
from the file (`for_file`). Both print through the same code, so they print the same.
This module is on `crond status`'s fast path: it imports neither pydantic nor the daemon.

A cluster (replicas sharing a PostgreSQL database) is read the same way, with two
differences: its daemon is alive when some replica's heartbeat is fresher than
`replica_timeout` by the database's clock, and the replica that ran (or runs) each job's
newest attempt is shown (a REPLICA column; `replica` in --json's `last_run`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from json.encoder import encode_basestring
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from crond import ownership
from crond.clock import iso_utc
from crond.config.wording import escape
from crond.store import files, locate
from crond.store.base import (
    AttemptRow,
    ClusterReader,
    PauseRow,
    Reader,
    StateError,
    StatusRow,
    ViewRow,
    status_row,
    view_row,
)

if TYPE_CHECKING:
    from crond.config.loaded import LoadedJob  # not at run time: pydantic is slow to import

__all__ = [
    "alive_of",
    "cluster_alive",
    "daemon_alive",
    "expired",
    "for_file",
    "format_history",
    "format_history_json",
    "format_status",
    "format_status_json",
    "live_replicas",
    "pause_json",
    "pause_text",
    "quick",
]

# A due slot is handled, and its next fire written, within milliseconds of the slot.
_STALE_S = 5.0
# A pause's note as a line shows it: the daemon keeps no longer ones (docs/control.md); a
# store written some other way costs no more.
_NOTE_SHOWN = 500
# Who paused a job, as the store keeps it: `{"uid", "user", "pid"}` is far shorter.
_BY_MAX = 1024
_NO_PAUSES: Mapping[str, PauseRow] = MappingProxyType({})
# A replica's name as a cell shows it (the database keeps what a replica said).
_REPLICA_SHOWN = 64
# `daemon:` keys status reads without loading the file.
_HINT_KEYS = frozenset({"state_dir", "database", "cluster", "replica_timeout"})
_REPLICA_TIMEOUT = timedelta(seconds=30)  # the file's default (config.model.Daemon)


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


def live_replicas(reader: ClusterReader, replica_timeout: timedelta) -> frozenset[str]:
    """The replicas of the cluster that run: their last heartbeat is fresher than
    `replica_timeout` by the database's clock (as the replicas judge one another)."""
    now = reader.clock()
    return frozenset(r.name for r in reader.replicas() if r.last_beat > now - replica_timeout)


def cluster_alive(reader: ClusterReader, replica_timeout: timedelta) -> bool:
    """Whether some replica of the cluster runs."""
    return bool(live_replicas(reader, replica_timeout))


class _Cluster(NamedTuple):
    """What status shows of a cluster besides a lone daemon's: who ran each job's newest
    attempt, and which replicas run (an open attempt of one that does not is lost)."""

    ran_by: Mapping[str, str]
    live: frozenset[str]


def _cluster_of(reader: Reader, replica_timeout: timedelta) -> _Cluster | None:
    if not isinstance(reader, ClusterReader):
        return None
    return _Cluster(reader.newest_replicas(), live_replicas(reader, replica_timeout))


def alive_of(reader: Reader, replica_timeout: timedelta = _REPLICA_TIMEOUT) -> bool:
    """Whether the daemon that writes `reader`'s store runs now (of a cluster: some
    replica of it)."""
    if isinstance(reader, ClusterReader):
        return cluster_alive(reader, replica_timeout)
    info = reader.get_meta("daemon")
    try:
        return daemon_alive(json.loads(info) if info else None, files.boot_id())
    except ValueError:
        return False


def quick(
    path: Path, flag: str | None, now: datetime, *, as_json: bool, same_bytes: bool = True
) -> str | None:
    """Status without loading the file, when that gives the same answer: the daemon that
    is running on the store has loaded exactly these bytes (their sha256 is its view's),
    so its view of the jobs is the file's. None otherwise: load the file (`for_file`).
    `same_bytes=False`: the running daemon's view whatever bytes it loaded (for a file
    that does not load: the daemon keeps running what it had).

    Where the store is: `--state-dir`, else the file's `daemon.state_dir` as read from
    that one block of the file, else the default. A misreading can only find no store, or
    one whose daemon loaded other bytes: then the file is loaded after all."""
    try:
        raw = ownership.read_schedules_file(path, enforce=False)
        reader, timeout = _reader_of(raw, flag)
    except (ownership.FileRefused, StateError):
        return None
    try:
        published = reader.get_meta("view_sha256")
        if not published or (same_bytes and published != hashlib.sha256(raw).hexdigest()):
            return None
        # Not when how long a replica may be silent is unclear (the file says what is
        # wrong), nor when the daemon is gone, or behind (stopped, stalled).
        cluster = None if timeout is None else _cluster_of(reader, timeout)
        alive = bool(cluster.live) if cluster is not None else alive_of(reader)
        if timeout is None or not alive or reader.view_is_behind(now.timestamp() - _STALE_S):
            return None
        rows, pauses = reader.status_rows(), reader.pauses()
        return _render(rows, pauses, now, alive=True, as_json=as_json, cluster=cluster)
    except StateError:
        return None
    finally:
        reader.close()


def for_file(
    jobs: Mapping[str, LoadedJob],
    reader: Reader | None,
    now: datetime,
    *,
    alive: bool,
    as_json: bool,
    replica_timeout: timedelta = _REPLICA_TIMEOUT,
) -> str:
    """Status of the file's jobs, next fires computed from `now`, history from `reader`
    (or none; a cluster's replicas judged alive by `replica_timeout`). Raises
    StateError."""
    summaries = reader.summaries() if reader is not None else {}
    pauses = reader.pauses() if reader is not None else _NO_PAUSES
    cluster = _cluster_of(reader, replica_timeout) if reader is not None else None
    rows = [status_row(view, summaries.get(view.job)) for view in _view_rows(jobs, now)]
    return _render(rows, pauses, now, alive=alive, as_json=as_json, cluster=cluster)


def _view_rows(jobs: Mapping[str, LoadedJob], now: datetime) -> Iterable[ViewRow]:
    for name, job in jobs.items():
        fire = job.make_timing().next_after(now) if job.settings.enabled else None
        yield view_row(name, job.settings.enabled, job.schedule_text, fire)


def _render(
    rows: Sequence[StatusRow],
    pauses: Mapping[str, PauseRow],
    now: datetime,
    *,
    alive: bool,
    as_json: bool,
    cluster: _Cluster | None,
) -> str:
    format_ = format_status_json if as_json else format_status
    if cluster is None:
        return format_(rows, alive=alive, pauses=pauses, now=now)
    return format_(
        rows, alive=alive, pauses=pauses, now=now, replicas=cluster.ran_by, live=cluster.live
    )


def open_reader_for(path: Path, flag: str | None) -> Reader:
    """The store of the daemon that runs `path`, found without loading the file (for a
    file with errors: its history is still worth reading). Raises StateError."""
    try:
        raw = ownership.read_schedules_file(path, enforce=False)
    except ownership.FileRefused:
        raw = b""
    return _reader_of(raw, flag)[0]


def _reader_of(raw: bytes, flag: str | None) -> tuple[Reader, timedelta | None]:
    """The store `--state-dir` names, else the one the file's `daemon:` block names (its
    `database` and `cluster`, or its `state_dir`), read from that block alone; with the
    block's `replica_timeout` (None: unclear, so whether a cluster runs is too).

    A block that does not read (None) is the default place's store, or for a database
    named by the environment, no store: the cluster would be a guess."""
    if flag:
        return locate.open_reader(flag, None), _REPLICA_TIMEOUT
    found = locate.daemon_hint(raw, _HINT_KEYS)
    if found is None:
        if locate.database_url(None) is not None:
            raise StateError("the file's daemon block does not say which cluster")
        return locate.open_reader(None, None), _REPLICA_TIMEOUT
    reader = locate.open_reader(
        None, found["state_dir"], database=found["database"], cluster=found["cluster"] or "default"
    )
    return reader, _timeout_of(found["replica_timeout"])


def _state_dir_hint(raw: bytes) -> str | None:
    """`daemon.state_dir` from the file's `daemon:` block alone (as `_reader_of` reads
    it); None if absent or unclear."""
    found = locate.daemon_hint(raw, _HINT_KEYS)
    return None if found is None else found["state_dir"]


def _timeout_of(text: str | None) -> timedelta | None:
    """`replica_timeout` as the block writes it (the default when absent); None when it
    does not parse (the file is loaded, and says what is wrong)."""
    if text is None:
        return _REPLICA_TIMEOUT
    from crond.config.durations import DurationError, parse_duration  # noqa: PLC0415

    try:
        return parse_duration(text)
    except DurationError:
        return None


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
    for row in rows:
        # An open attempt is running, or was left open by a daemon that is gone.
        runs = alive if live is None or replicas is None else replicas.get(row.job) in live
        outcome = ("running" if runs else "lost?") if row.open else row.outcome or "-"
        if not row.enabled:
            nxt = "disabled"
        elif row.next_text is None:
            nxt = "at next boot" if row.schedule == "@reboot" else "never"
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
                *(() if replicas is None else (_replica_cell(replicas.get(row.job)),)),
            )
        )
    if any(paused):
        lines = [
            (*line, "-" if pause is None else pause_text(pause, when))
            for line, pause in zip(lines, paused, strict=True)
        ]
    return _table(header, lines)


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
    """Oldest first: one line an attempt (ending `replica NAME` for a cluster's), then its
    output tail indented."""
    out = []
    for a in attempts:
        exit_code = "-" if a.exit_code is None else str(a.exit_code)
        ran_by = "" if a.replica is None else f"  replica {_replica_cell(a.replica)}"
        out.append(
            f"{_when(a.started)}  {a.job}  {a.run_id}  attempt {a.attempt}  "
            f"slot {iso_utc(a.slot)}  {a.outcome or 'running'}  exit {exit_code}  "
            f"{_seconds(a.duration_s)}{ran_by}"
        )
        out.extend(f"    | {line}" for line in a.output)
    return "\n".join(out)


def format_history_json(attempts: Sequence[AttemptRow]) -> str:
    return "\n".join(json.dumps(_attempt_dict(a)) for a in attempts)


def _attempt_dict(a: AttemptRow) -> dict[str, Any]:
    """`replica` only for a cluster's attempt (a lone daemon's have none)."""
    return {
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
    } | ({} if a.replica is None else {"replica": a.replica})


def format_status_json(
    rows: Sequence[StatusRow],
    *,
    alive: bool,
    pauses: Mapping[str, PauseRow] = _NO_PAUSES,
    now: datetime | None = None,
    replicas: Mapping[str, str] | None = None,
    live: Collection[str] | None = None,
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
            for row in rows
            for by in (replicas.get(row.job),)
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
    if next_text is not None:
        local = null if next_local is None else esc(next_local)
        note = null if next_note is None else esc(next_note)
        fire = f'{{"at":{esc(next_text)},"local":{local},"note":{note}}}'
    running = "true" if alive and run_id is not None and finished is None else "false"
    return (
        f'{{"job":{esc(job)},"enabled":{"true" if enabled else "false"},'
        f'"schedule":{esc(schedule)},"last_run":{last},"last_success":{success},'
        f'"next_fire":{fire},"running":{running},'
        f"{_NOT_PAUSED if pause is None else _pause_fields(pause, now)}}}"
    )
