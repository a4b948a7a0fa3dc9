"""`crond web FILE`: the dashboard (docs/web.md), in its own process. It parses, starts
crond/web/serve.py and chooses an exit code; the dashboard's parts (Starlette, uvicorn,
Jinja2, bcrypt: the extra `crond[web]`) are imported only here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crond import cliparams as params
from crond.clifile import load_or_exit

if TYPE_CHECKING:
    from crond import logs


@click.command()
@click.argument("file", type=params.FILE)
@click.option(
    "--listen",
    type=params.ADDRESS,
    default=None,
    metavar="HOST:PORT",
    help="Serve here (overrides web.listen; default 127.0.0.1:8080).",
)
@params.STATE_DIR
@click.option("--log-format", type=click.Choice(["json", "console"]), default=None)
def web(
    file: Path, listen: str | None, state_dir: str | None, log_format: logs.LogFormat | None
) -> None:
    """Serve the dashboard of FILE's daemon: its jobs, runs and actions, in a browser."""
    try:
        from crond.web import serve  # noqa: PLC0415  (the extra's parts: only here)
    except ImportError as exc:
        if (exc.name or "").startswith("crond."):
            raise
        click.echo(
            f"crond: the dashboard needs {exc.name}, which is not installed: "
            "pip install 'crond[web]'",
            err=True,
        )
        sys.exit(1)
    from crond import logs  # noqa: PLC0415  (structlog: only for commands that log)

    cfg = load_or_exit(file, check_owner=True)
    log = logs.configure(log_format, "info")
    try:
        found = serve.prepare(file, cfg, listen, state_dir, log)
    except serve.WebError as exc:
        click.echo(f"crond: {exc}", err=True)
        sys.exit(1)
    serve.serve(*found)


COMMANDS = (web,)
