"""The `crond` command line: parse, call, print, choose an exit code. No logic lives here."""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crond import __version__
from crond import cliparams as params
from crond.clifile import exit_with, liveness_file_of, load, load_or_exit, reader_for
from crond.clock import SystemClock

if TYPE_CHECKING:
    from crond import logs
    from crond.config.loaded import LoadedConfig
    from crond.store.base import Reader

# Modules are imported by the commands that use them: the daemon's (structlog, the
# runner, the loop) cost `crond validate` ~60 ms, and `config` (pydantic, ~0.2 s) is not
# needed by `crond status` when the running daemon has loaded the same file, nor by
# `crond health`. Nor are the store's rows (~10 ms) by `crond --version`.
_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")  # == logs.LEVELS (tested)
_LIVENESS_PATH = "/run/crond/liveness.json"  # == daemon.liveness.DEFAULT_PATH (tested)

# At exit the interpreter collects and frees everything the collector tracks, pydantic's
# and click's modules included. Frozen objects it leaves to the end of the process,
# which is what follows (files are closed by their `with`s): `crond validate` of the
# example file, 10 runs each, median 0.213 s with this, 0.235 s without.
atexit.register(gc.freeze)


# The commands kept in modules of their own, by name: a command named on the command line
# imports its module alone (`crond ps` has no use for `crond notify`'s asyncio, ~50 ms).
# tests/test_cli_commands.py checks this against each module's COMMANDS.
_ELSEWHERE = {
    **dict.fromkeys(("ps", "trigger", "kill", "pause", "resume", "reload"), "control.commands"),
    "backfill": "cli_backfill",
    "next": "cli_next",
    "notify": "cli_notify",
    **dict.fromkeys(("history", "output", "replicas"), "cli_state"),
    "web": "cli_web",
}


class _Group(click.Group):
    """Adds the commands kept in their own modules (`_ELSEWHERE`: those that steer the
    running daemon, crond/control/commands.py; `notify`; `history`, `output`, `replicas`;
    `backfill`; `next`; `web`) when one is asked for, or all when the list is (`--help`,
    completion) or the name is unknown: `crond --version` and the commands here import
    nothing of theirs. The list is click's, sorted by name."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            module = _ELSEWHERE.get(cmd_name)
            self._add(*([module] if module else sorted(set(_ELSEWHERE.values()))))
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add(*sorted(set(_ELSEWHERE.values())))
        return super().list_commands(ctx)

    def _add(self, *modules: str) -> None:
        for name in modules:
            # (An import statement's way, not importlib's: `-X importtime` lists it.)
            module = __import__(f"crond.{name}", fromlist=["COMMANDS"])
            for command in module.COMMANDS:
                self.add_command(command)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="crond")
def main() -> None:
    """crond: a declarative cron daemon. One YAML file lists the jobs."""


@main.command()
@click.argument("file", type=params.FILE_OR_STDIN)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def validate(file: str, as_json: bool) -> None:
    """Check FILE and print every problem, or `FILE: N jobs OK` (`-`: standard input)."""
    from crond.config import loaded, schedparts  # noqa: PLC0415  (see the imports above)

    path, stdin = params.stdin_or_path(file)
    cfg = load_or_exit(path, as_json=as_json, check_owner=True, stdin=stdin)
    warnings = [
        *cfg.env_warnings,
        *loaded.dst_warnings(cfg, SystemClock().now()),
        *loaded.reboot_warnings(cfg),
        *loaded.or_warnings(cfg),
        *schedparts.at_warnings(cfg, SystemClock().now(), cfg.at_marks),
    ]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "ok": True,
                    "jobs": len(cfg.jobs),
                    "errors": [],
                    "warnings": [w.as_dict() for w in warnings],
                }
            )
        )
        return
    for w in warnings:
        click.echo(f"{w.file}:{w.line}:{w.column}: warning: {w.path}: {w.message}", err=True)
    count = len(cfg.jobs)
    click.echo(f"{cfg.path}: {count} job{'s' if count != 1 else ''} OK")


@main.command()
def schema() -> None:
    """Print the JSON Schema of the schedules file (for editors)."""
    from crond.config import schema_json  # noqa: PLC0415  (see the imports above)

    click.echo(json.dumps(schema_json.json_schema(), indent=2))


@main.command()
@click.argument("file", type=params.FILE)
@click.option(
    "--liveness-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the liveness file here (overrides daemon.liveness_file).",
)
@click.option(
    "--heartbeat",
    type=params.HEARTBEAT,
    default=None,
    help="How often to rewrite the liveness file (overrides daemon.heartbeat; at least 100ms).",
)
@click.option(
    "--state-dir",
    default=None,
    metavar="DIR",
    help="Keep the state store here, or `none` for no store (overrides daemon.state_dir).",
)
@click.option(
    "--metrics",
    type=params.ADDRESS,
    default=None,
    metavar="HOST:PORT",
    help="Serve /metrics and /healthz here, e.g. 127.0.0.1:9464 (overrides daemon.metrics).",
)
@click.option(
    "--replica",
    default=None,
    metavar="NAME",
    help="This replica's name, with daemon.database (overrides CROND_REPLICA and "
    "daemon.replica; default: the host name).",
)
@click.option(
    "--log-format",
    type=click.Choice(["json", "console"]),
    default=None,
    help="Default: json unless stderr is a terminal.",
)
@click.option(
    "--log-level",
    type=click.Choice(_LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
)
def run(  # noqa: PLR0917  (one parameter a flag: click calls it by keyword)
    file: Path,
    liveness_file: Path | None,
    heartbeat: timedelta | None,
    state_dir: str | None,
    metrics: str | None,
    replica: str | None,
    log_format: logs.LogFormat | None,
    log_level: str,
) -> None:
    """Run the daemon in the foreground."""
    from crond import logs  # noqa: PLC0415  (see the imports above)
    from crond.config import database  # noqa: PLC0415  (see the imports above)
    from crond.daemon import lifecycle as daemon  # noqa: PLC0415  (see the imports above)

    log = logs.configure(log_format, log_level)
    if replica or os.environ.get(database.REPLICA_ENV):  # said once, as validate says it
        written = database.written_database(file)
        for said in database.replica_given_unused(written, replica, os.environ):
            log.warning("config.warning", warning=said)
    options = daemon.Options(
        liveness_file=liveness_file,
        heartbeat=heartbeat,
        state_dir=state_dir,
        metrics=metrics,
        replica=replica,
    )
    sys.exit(daemon.run(file, options, log))


@main.command(name="run-job")
@click.argument("file", type=params.FILE)
@click.argument("name")
@click.option("--log-format", type=click.Choice(["json", "console"]), default=None)
def run_job(file: Path, name: str, log_format: logs.LogFormat | None) -> None:
    """Run job NAME once now, exactly as the daemon would; exit with its status."""
    cfg = load_or_exit(file, check_owner=True)
    if name not in cfg.jobs:
        raise click.BadParameter(
            f"no job named {name} in {file} (jobs: {', '.join(cfg.jobs)})", param_hint="NAME"
        )
    from crond import logs  # noqa: PLC0415  (see the imports above)
    from crond.daemon import runjob  # noqa: PLC0415  (see the imports above)

    log = logs.configure(log_format, "info")
    sys.exit(runjob.run_once(cfg.jobs[name], log))


@main.command()
@click.argument("file", type=params.FILE, required=False)
@click.option(
    "--liveness-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"The liveness file (default: FILE's daemon.liveness_file, else {_LIVENESS_PATH}).",
)
@click.option(
    "--max-age",
    type=params.DURATION,
    default=None,
    help="Stale when older than this (default: 3 heartbeats + 1s).",
)
def health(file: Path | None, liveness_file: Path | None, max_age: timedelta | None) -> None:
    """Exit 0 when the liveness file of FILE's daemon is there and fresh, 1 otherwise."""
    from crond.daemon import liveness  # noqa: PLC0415  (see the imports above)

    path = liveness_file or liveness_file_of(file, liveness.DEFAULT_PATH)
    result = liveness.check(path, SystemClock().now(), max_age)
    click.echo(result.message, err=not result.ok)
    sys.exit(0 if result.ok else 1)


def _open_reader(cfg: LoadedConfig, flag: str | None) -> tuple[Reader | None, str | None]:
    """The store read-only, or None and why not (said on stderr by the caller)."""
    from crond.store.base import StateError  # noqa: PLC0415  (see the imports above)

    try:
        return reader_for(cfg, flag), None
    except StateError as exc:
        return None, str(exc)


@main.command()
@click.argument("file", type=params.FILE)
@params.STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
def status(file: Path, state_dir: str | None, as_json: bool) -> None:
    """Each job of FILE: schedule, last run, last success, next fire, running now."""
    from crond import status as view  # noqa: PLC0415  (see the imports above)
    from crond.store.base import StateError  # noqa: PLC0415

    now = SystemClock().now()
    quick = view.quick(file, state_dir, now, as_json=as_json)
    if quick is not None:
        _write(quick)
        return
    from crond.config import problems  # noqa: PLC0415  (not needed above: see the imports)

    try:
        cfg = load(file, check_owner=False)
    except problems.ConfigError as exc:
        # A broken edit is what the daemon refuses to reload: it runs the jobs it had, and
        # those are worth seeing. The errors first, then that, and exit 1 all the same.
        running = None
        if view.names_its_store(file):
            running = view.quick(file, state_dir, now, as_json=as_json, same_bytes=False)
        if running is None:
            exit_with(file, exc)
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        click.echo(
            f"crond: {file} has errors (above); the running daemon keeps the jobs it loaded "
            "before, shown here",
            err=True,
        )
        _write(running or "")
        sys.exit(1)
    reader, why = _open_reader(cfg, state_dir)
    try:
        timeout = cfg.daemon.replica_timeout
        alive = view.alive_of(reader, timeout) if reader is not None else False
        text = view.for_file(
            cfg.jobs, reader, now, alive=alive, as_json=as_json, replica_timeout=timeout
        )
    except StateError as exc:  # the store went bad under us: no history, then
        why = str(exc)
        text = view.for_file(cfg.jobs, None, now, alive=False, as_json=as_json)
    finally:
        if reader is not None:
            reader.close()
    if why:
        click.echo(f"crond: {why}", err=True)
    _write(text)
    if why:  # no history read: "never ran" and "could not look" must differ (as history)
        sys.exit(1)


def _write(text: str) -> None:
    """Print a large text (10,000 jobs' status is megabytes): click.echo would scan it all
    for terminal escapes to strip (~15 ms); status prints none."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `crond status | head`
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
