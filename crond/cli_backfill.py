"""`crond backfill FILE JOB --from T --to T [--dry-run] [--wait]`: run a job for each of its
slots in a past range, through the running daemon (docs/schedules.md, "Backfill"); with
`--dry-run`, list those slots, oldest first, with their DST and calendar notes, as
`crond next` shows fires, and run nothing.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import NoReturn

import click

from crond import cliparams as params
from crond.clifile import load_or_exit


@click.command()
@click.argument("file", type=params.FILE)
@click.argument("job")
@click.option(
    "--from", "start", type=params.INSTANT, required=True, help="The first instant (included)."
)
@click.option(
    "--to", "end", type=params.INSTANT, required=True, help="The last instant (excluded)."
)
@click.option("--dry-run", is_flag=True, help="List the slots; run nothing.")
@click.option(
    "--wait", is_flag=True, help="Follow the backfill to its end; exit 1 if a slot failed."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
@params.STATE_DIR
@click.option(
    "--socket",
    "socket_flag",
    type=click.Path(path_type=Path),
    default=None,
    metavar="P",
    help="The daemon's control socket (as for `crond trigger`).",
)
def backfill(
    file: Path,
    job: str,
    *,
    start: datetime,
    end: datetime,
    dry_run: bool,
    wait: bool,
    as_json: bool,
    state_dir: str | None,
    socket_flag: Path | None,
) -> None:
    """Run JOB once for each of its slots in [--from, --to), oldest first, one at a time,
    in the daemon running FILE; print the backfill's id (`--wait`: follow it to its end).
    `--dry-run` lists the slots instead. `crond kill FILE JOB` stops it."""
    if dry_run:
        _dry_run(file, job, start, end, as_json=as_json)
        return
    from crond.control import commands, views  # noqa: PLC0415  (keeps the others lean)

    args = {"job": job, "from": _iso(start), "to": _iso(end), "wait": wait}
    result = commands.steer(file, state_dir, socket_flag, "backfill", args, wait=wait)
    if as_json:
        click.echo(views.json_line(result))
    elif not wait:
        click.echo(str(result.get("id", "")))
    else:
        click.echo(views.format_backfill(result), err=True)
    if wait:
        finished = result.get("state") == "finished" and result.get("failed") == 0
        sys.exit(0 if finished else 1)


def _iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _dry_run(file: Path, job: str, start: datetime, end: datetime, *, as_json: bool) -> None:
    from crond.when import preview  # noqa: PLC0415  (keeps the other commands' start lean)
    from crond.when.backfill import backfill_slots  # noqa: PLC0415

    cfg = load_or_exit(file)
    loaded = cfg.jobs.get(job)
    if loaded is None:
        from crond.control.names import no_job  # noqa: PLC0415

        _refused(no_job(job, cfg.jobs))
    try:
        fires = backfill_slots(loaded.make_timing(), start, end)
    except ValueError as exc:
        _refused(str(exc))
    rows = [preview.PreviewRow(job, fire) for fire in fires]
    if as_json:
        if rows:
            click.echo(preview.format_json_lines(rows))
        return
    span = f"[{start:%Y-%m-%dT%H:%M:%SZ}, {end:%Y-%m-%dT%H:%M:%SZ})"
    click.echo(preview.format_table(rows, [f"{len(rows)} slots of {job} in {span}"]))


def _refused(reason: str) -> NoReturn:
    """A mistake the daemon would refuse too (an unknown job, a backwards or too wide
    range): said as `crond backfill` without `--dry-run` says the daemon's refusal, exit 1."""
    click.echo(f"crond: {reason}", err=True)
    sys.exit(1)


COMMANDS = (backfill,)
