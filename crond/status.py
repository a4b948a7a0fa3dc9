"""`crond status` and `crond history`: the state store read beside the schedules file,
and what is printed of it (the table, the JSON lines: crond/status_text.py).

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
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from crond import ownership
from crond.clock import iso_utc
from crond.status_text import (
    expired,
    format_history,
    format_history_json,
    format_status,
    format_status_json,
    pause_json,
    pause_text,
)
from crond.store import files, locate
from crond.store.base import (
    ClusterReader,
    PauseRow,
    PerReplica,
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
    "names_its_store",
    "pause_json",
    "pause_text",
    "quick",
]

# A due slot is handled, and its next fire written, within milliseconds of the slot.
_STALE_S = 5.0
_NO_PAUSES: Mapping[str, PauseRow] = MappingProxyType({})
# `daemon:` keys status reads without loading the file.
_HINT_KEYS = frozenset({"state_dir", "database", "cluster", "replica_timeout"})
_REPLICA_TIMEOUT = timedelta(seconds=30)  # the file's default (config.model.Daemon)
# A file with `replicas: all` jobs shows a row a replica for them: which they are is read
# from the loaded file (a file that says `replicas` anywhere is loaded: ~0.2 s more).
_ALL = b"replicas"


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
    attempt, and which replicas run (an open attempt of one that does not is lost); with
    `replicas: all` jobs, the replica of each row (`by_row`, the rows' order)."""

    ran_by: Mapping[str, str]
    live: frozenset[str]
    by_row: Sequence[str | None] | None = None


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
        if cluster is not None and _ALL in raw:  # which jobs are `replicas: all`: the file's
            return None
        alive = bool(cluster.live) if cluster is not None else alive_of(reader)
        if timeout is None or not alive or reader.view_is_behind(now.timestamp() - _STALE_S):
            return None
        rows, pauses = reader.status_rows(), reader.pauses()
        shown = _render(rows, pauses, now, alive=True, as_json=as_json, cluster=cluster)
        shown = _with_backfills(shown, rows, reader, as_json=as_json)
        locks = b"locks" in raw  # (a file without them: no read of the store's)
        return (
            _with_locks(shown, rows, reader, as_json=as_json, cluster=cluster) if locks else shown
        )
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
    runs = reader.run_counts() if reader is not None else {}
    rows = [status_row(view, summaries.get(view.job)) for view in _view_rows(jobs, now, runs)]
    every = [name for name, job in jobs.items() if job.settings.replicas == "all"]
    if cluster is not None and every and isinstance(reader, ClusterReader):
        rows, cluster = _per_replica(rows, reader.per_replica(every), cluster)
    shown = _render(rows, pauses, now, alive=alive, as_json=as_json, cluster=cluster)
    shown = _with_backfills(shown, rows, reader, as_json=as_json)
    if reader is None or not alive or not any(job.settings.locks for job in jobs.values()):
        return shown
    return _with_locks(shown, rows, reader, as_json=as_json, cluster=cluster)


def _with_locks(
    shown: str,
    rows: Sequence[StatusRow],
    reader: Reader,
    *,
    as_json: bool,
    cluster: _Cluster | None,
) -> str:
    """Who holds each lock and who waits, as the running daemon (each live replica) keeps
    them in the store (crond/status_locks.py)."""
    from crond.status_locks import KEY, with_locks  # noqa: PLC0415  (only with locks)

    kept = reader.metas(KEY)
    if cluster is not None:  # (a dead replica's are not shown)
        kept = {k: v for k, v in kept.items() if k.removeprefix(KEY) in cluster.live}
    return with_locks(shown, [row.job for row in rows], kept, as_json=as_json) if kept else shown


def _with_backfills(
    shown: str, rows: Sequence[StatusRow], reader: Reader | None, *, as_json: bool
) -> str:
    """The backfills going, read from the store (crond/status_backfill.py)."""
    going = getattr(reader, "backfills", None)  # (a store that keeps them)
    backfills = going(going=True) if going is not None else []
    if not backfills:
        return shown
    from crond.status_backfill import with_backfills  # noqa: PLC0415  (rarely needed)

    return with_backfills(shown, [row.job for row in rows], backfills, as_json=as_json)


def _per_replica(
    rows: list[StatusRow], found: Mapping[str, Mapping[str, PerReplica]], cluster: _Cluster
) -> tuple[list[StatusRow], _Cluster]:
    """A `replicas: all` job's row (those in `found`) becomes a row a replica: each that
    ran it (as kept), by name, with its own newest attempt and success there."""
    out: list[StatusRow] = []
    by_row: list[str | None] = []
    for row in rows:
        mine = found.get(row.job)
        if mine is None:
            out.append(row)
            by_row.append(cluster.ran_by.get(row.job))
            continue
        for name in sorted(mine):
            out.append(_on_replica(row, mine.get(name)))
            by_row.append(name)
    return out, cluster._replace(by_row=by_row)


def _on_replica(row: StatusRow, got: PerReplica | None) -> StatusRow:
    last = None if got is None else got.last
    ok = None if got is None else got.success
    return row._replace(
        run_id=None if last is None else last.run_id,
        slot=None if last is None else iso_utc(last.slot),
        attempt=None if last is None else last.attempt,
        started=None if last is None else iso_utc(last.started),
        finished=None if last is None or last.finished is None else iso_utc(last.finished),
        outcome=None if last is None else last.outcome,
        exit_code=None if last is None else last.exit_code,
        duration_s=None if last is None else last.duration_s,
        success_run_id=None if ok is None else ok.run_id,
        success_started=None if ok is None else iso_utc(ok.started),
        success_finished=None if ok is None or ok.finished is None else iso_utc(ok.finished),
        success_duration_s=None if ok is None else ok.duration_s,
    )


def _view_rows(
    jobs: Mapping[str, LoadedJob], now: datetime, runs: Mapping[str, int]
) -> Iterable[ViewRow]:
    from crond.config import schedparts  # noqa: PLC0415  (the file is loaded: it is cheap now)

    for name, job in jobs.items():
        count = runs.get(name, 0)
        fire = None
        if job.settings.enabled and schedparts.runs_left(job, count):
            fire = job.make_timing().next_after(now)
        if fire is not None:
            done = None
        elif job.settings.enabled:
            done = schedparts.done_text(job, now, count, no_fire_left=True)
        else:  # its schedule has not run out: a disabled job ends only at `end`
            done = schedparts.done_text(job, now, count)
        yield view_row(name, job.settings.enabled, job.schedule_text, fire, done)


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
        rows,
        alive=alive,
        pauses=pauses,
        now=now,
        replicas=cluster.ran_by,
        live=cluster.live,
        by_row=cluster.by_row,
    )


def names_its_store(path: Path) -> bool:
    """Whether a file that does not load still tells whose history to show: it reads, and
    is YAML with a mapping at the top (a broken edit: its `daemon:` block, or the lack of
    one, names its daemon's store). A file that is not there, or not YAML at all, tells
    nothing: the default place's store would show another daemon's history as its own."""
    try:
        text = ownership.read_schedules_file(path, enforce=False).decode("utf-8")
    except (ownership.FileRefused, UnicodeDecodeError):
        return False
    from crond.config import yamlsource  # noqa: PLC0415  (~20 ms: only for a broken file)

    source = yamlsource.parse(text, keep=frozenset())
    return not source.problems and isinstance(source.data, dict)


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
