"""`crond next`: the next fires of each job, as the daemon would fire them."""

from __future__ import annotations

import json
from datetime import datetime

import click

from crond import cliparams as params
from crond.clifile import load_or_exit
from crond.clock import SystemClock

_REMOVED = 100  # fires `next --all` lists as removed, at most, a job


@click.command(name="next")
@click.argument("file", type=params.FILE_OR_STDIN)
@click.option("--job", "jobs", multiple=True, metavar="NAME", help="Only this job (repeatable).")
@click.option(
    "-n",
    "count",
    type=click.IntRange(1, 10_000),
    default=5,
    show_default=True,
    help="Fires per job.",
)
@click.option(
    "--from",
    "start",
    type=params.INSTANT,
    default=None,
    help="Start after this instant (ISO-8601 with offset; default now).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Also list the fires calendars removed, with the calendar and the holiday.",
)
def next_(
    file: str,
    jobs: tuple[str, ...],
    count: int,
    *,
    start: datetime | None,
    as_json: bool,
    show_all: bool,
) -> None:
    """Preview the next fires of each job, in order (`-`: FILE on standard input)."""
    from crond.config import loader  # noqa: PLC0415  (keeps `validate` start-up lean)
    from crond.when import preview  # noqa: PLC0415

    path, stdin = params.stdin_or_path(file)
    cfg = load_or_exit(path, stdin=stdin)
    unknown = [name for name in jobs if name not in cfg.jobs]
    if unknown:
        raise click.BadParameter(
            f"no job named {', '.join(unknown)} in {file} (jobs: {', '.join(cfg.jobs)})",
            param_hint="--job",
        )
    selected = {
        name: job.make_timing()
        for name, job in cfg.jobs.items()
        if job.settings.enabled and (not jobs or name in jobs)
    }
    # The rows are built with the collector paused, as a load is (loader.gc_paused): 10,000
    # jobs give 50,000 rows that live until printed, and no cycles.
    after = start or SystemClock().now()
    with loader.gc_paused():
        rows = preview.next_fires(selected, after, count)
        removed = preview.removed_lines(selected, rows, after, _REMOVED) if show_all else []
        hashed = {
            name: (expr.source, expr.resolved)
            for name in selected
            if (expr := cfg.jobs[name].cron_expr) is not None and expr.resolved
        }
        if as_json:
            click.echo(preview.format_json_lines(rows))
            for name, (written, resolved) in hashed.items():
                click.echo(json.dumps({"job": name, "cron": written, "runs_as": resolved}))
            for line in removed:
                click.echo(json.dumps({"removed": line}))
            return
        limits = {name: cfg.jobs[name].settings.max_running for name in selected}
        notes = [*preview.hash_notes(hashed), *preview.limit_notes(limits, cfg.daemon.max_running)]
        chosen = [job for name, job in cfg.jobs.items() if not jobs or name in jobs]
        chained = {job.name: job.after_text for job in chosen if job.settings.after}
        held = {job.name: job.settings.locks for job in chosen if job.settings.locks}
        skipping = {job.name for job in chosen if job.settings.on_lock.value == "skip"}
        notes += preview.wait_notes(chained, held, cfg.config.locks, skipping)
        if show_all:
            notes.append("removed by calendars:" if removed else "removed by calendars: none")
            notes += removed
        click.echo(preview.format_table(rows, notes))


COMMANDS = (next_,)
