"""`crond history`, `crond output` and `crond replicas`: what the state store keeps of
past attempts and of a cluster's replicas (docs/state.md). They parse, read, print and
choose an exit code; the printing is crond/status_text.py's and crond/replicas_text.py's.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crond import cliparams as params
from crond.clifile import exit_with, load, load_or_exit, reader_for
from crond.store.base import StateError

if TYPE_CHECKING:
    from crond.config.loaded import LoadedJob
    from crond.store.base import AttemptRow, Only, Reader


def _open(file: Path, state_dir: str | None) -> tuple[Reader, dict[str, LoadedJob], bool]:
    """The store of the daemon that runs FILE, the file's jobs, and whether the file has
    errors (then printed, and the store found from its `daemon:` block alone: a broken
    edit does not make the past unreadable). Exits 1 when there is no store to read."""
    from crond import status as view  # noqa: PLC0415  (pydantic: only when reading)
    from crond.config import problems  # noqa: PLC0415

    broken: problems.ConfigError | None = None
    try:
        cfg = load(file, check_owner=False)
    except problems.ConfigError as exc:
        # A file that is not there, or not YAML, is nobody's: no store is read for it.
        if not view.names_its_store(file):
            exit_with(file, exc)
        cfg, broken = None, exc
    try:
        reader = (
            view.open_reader_for(file, state_dir) if cfg is None else reader_for(cfg, state_dir)
        )
    except StateError as exc:
        if broken is not None:
            exit_with(file, broken)
        click.echo(f"crond: {exc}", err=True)
        sys.exit(1)
    if broken is not None:
        for problem in broken.problems:
            click.echo(str(problem), err=True)
        click.echo(f"crond: {file} has errors (above); its history follows", err=True)
    return reader, (cfg.jobs if cfg is not None else {}), broken is not None


def _read(reader: Reader, job: str | None, count: int, only: Only) -> list[AttemptRow]:
    try:
        return reader.recent(job, count, only)
    except StateError as exc:
        click.echo(f"crond: {exc}", err=True)
        sys.exit(1)
    finally:
        reader.close()


def _known(file: Path, reader: Reader, job: str, jobs: dict[str, LoadedJob]) -> None:
    try:
        if job in jobs or reader.last(job) is not None:
            return
    except StateError as exc:
        reader.close()
        click.echo(f"crond: {exc}", err=True)
        sys.exit(1)
    reader.close()
    raise click.BadParameter(
        f"no job named {job} in {file} and no history of it (jobs: {', '.join(jobs)})",
        param_hint="JOB",
    )


@click.command()
@click.argument("file", type=params.FILE)
@click.argument("job", required=False)
@params.STATE_DIR
@click.option(
    "-n",
    "count",
    type=click.IntRange(1, 100_000),
    default=20,
    show_default=True,
    help="Attempts to show (the newest).",
)
@click.option(
    "--failed", is_flag=True, help="Only attempts that failed, timed out, were killed or lost."
)
@click.option(
    "--since",
    type=params.SINCE,
    default=None,
    help="Only attempts started since then (2h, 7d, or an ISO-8601 instant).",
)
@click.option(
    "--run", "run_id", default=None, metavar="RUN_ID", help="Only the attempts of this run."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
def history(  # noqa: PLR0917  (one parameter an option: click calls it by keyword)
    file: Path,
    job: str | None,
    state_dir: str | None,
    count: int,
    failed: bool,
    since: datetime | None,
    run_id: str | None,
    as_json: bool,
) -> None:
    """Past attempts (of JOB, or of every job), oldest first, with their output tail."""
    from crond import status_text as text  # noqa: PLC0415  (see _open)
    from crond.store.base import Only  # noqa: PLC0415

    reader, jobs, broken = _open(file, state_dir)
    if job is not None:
        _known(file, reader, job, jobs)
    attempts = _read(reader, job, count, Only(failed, since, run_id))
    if not attempts:
        filtered = failed or since is not None or run_id is not None
        click.echo("no attempts match" if filtered else "no attempts recorded yet", err=True)
    else:
        click.echo((text.format_history_json if as_json else text.format_history)(attempts))
    if broken:
        sys.exit(1)


_MAX_ATTEMPTS = 1000  # of one run (a job's retry.attempts is at most 100: docs/configuration.md)


@click.command()
@click.argument("file", type=params.FILE)
@click.argument("run_id", metavar="RUN_ID")
@params.STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="One JSON object an attempt.")
def output(file: Path, run_id: str, state_dir: str | None, as_json: bool) -> None:
    """The output the store keeps of RUN_ID's attempts (the last lines of each)."""
    from crond import status_text as text  # noqa: PLC0415  (see _open)
    from crond.run.output import TAIL_LINES  # noqa: PLC0415
    from crond.store.base import Only  # noqa: PLC0415

    reader, _jobs, broken = _open(file, state_dir)
    attempts = _read(reader, None, _MAX_ATTEMPTS, Only(run_id=run_id))
    if not attempts:
        click.echo(f"crond: no run {run_id} in the history kept", err=True)
        sys.exit(1)
    if as_json:
        click.echo(text.format_history_json(attempts))
    for attempt in [] if as_json else attempts:
        click.echo(text.output_heading(attempt), err=True)
        for line in attempt.output:
            click.echo(line)
        note = text.output_note(attempt, TAIL_LINES)
        if note:
            click.echo(note, err=True)
    if broken:  # as history: the file's errors were said above
        sys.exit(1)


@click.command()
@click.argument("file", type=params.FILE)
@click.option("--json", "as_json", is_flag=True, help="One JSON object a replica.")
def replicas(file: Path, as_json: bool) -> None:
    """The replicas of FILE's cluster, from its database: heartbeat, version, file."""
    from crond import ownership  # noqa: PLC0415  (see _open)
    from crond import replicas_text as text  # noqa: PLC0415
    from crond.store import locate  # noqa: PLC0415

    cfg = load_or_exit(file)
    url = locate.database_url(cfg.daemon.database)
    if url is None:
        click.echo(
            f"crond: {file} has no daemon.database (and CROND_DATABASE_URL is not set): "
            "replicas share a PostgreSQL database (docs/replicas.md)",
            err=True,
        )
        sys.exit(1)
    try:
        reader = locate.open_cluster_reader(url, cfg.daemon.cluster)
        try:
            rows, now = text.read(reader)
        finally:
            reader.close()
    except StateError as exc:
        click.echo(f"crond: {exc}", err=True)
        sys.exit(1)
    raw = ownership.read_schedules_file(file, enforce=False)
    shown = text.Shown(now, cfg.daemon.replica_timeout, text.digest(raw))
    click.echo((text.format_json if as_json else text.format_table)(rows, shown))


COMMANDS = (history, output, replicas)
