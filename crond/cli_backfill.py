"""`crond backfill FILE JOB --from T --to T --dry-run`: the slots of a job in a range,
oldest first, with their DST and calendar notes, as `crond next` shows fires.

Only the listing (`--dry-run`) is built: running the slots through the daemon's control
socket is not (docs/schedules.md, "Backfill"), and the command says so.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

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
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
def backfill(
    file: Path, job: str, *, start: datetime, end: datetime, dry_run: bool, as_json: bool
) -> None:
    """List JOB's slots in [--from, --to), oldest first (`--dry-run`)."""
    from crond.when import preview  # noqa: PLC0415  (keeps the other commands' start lean)
    from crond.when.backfill import backfill_slots  # noqa: PLC0415

    cfg = load_or_exit(file)
    loaded = cfg.jobs.get(job)
    if loaded is None:
        raise click.BadParameter(
            f"no job named {job} in {file} (jobs: {', '.join(cfg.jobs)})", param_hint="JOB"
        )
    if not dry_run:
        raise click.UsageError(
            "only --dry-run is available: running a backfill through the daemon is not "
            "built in this version (see docs/schedules.md, Backfill)"
        )
    try:
        fires = backfill_slots(loaded.make_timing(), start, end)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--from/--to") from None
    rows = [preview.PreviewRow(job, fire) for fire in fires]
    if as_json:
        if rows:
            click.echo(preview.format_json_lines(rows))
        return
    span = f"[{start:%Y-%m-%dT%H:%M:%SZ}, {end:%Y-%m-%dT%H:%M:%SZ})"
    click.echo(preview.format_table(rows, [f"{len(rows)} slots of {job} in {span}"]))


COMMANDS = (backfill,)
