"""The commands that steer the running daemon through its control socket: `crond ps`,
`trigger`, `kill`, `pause`, `resume`, `reload` (docs/control.md). crond/cli.py adds them to the
`crond` group when one is named or listed, so that no other command imports this module.
They parse, send, print and choose an exit code; the talking is client.py's, the printing
views.py's."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from crond import cliparams as params
from crond.clifile import load_or_exit
from crond.clock import SystemClock, iso_utc

# What a command needs beyond this (the client, the views, the file's loader) it imports
# when it runs: `--help` lists these commands, and need not pay for them.

_SOCKET = click.option(
    "--socket",
    "socket_flag",
    type=click.Path(path_type=Path),
    default=None,
    metavar="P",
    help="The daemon's control socket (default: daemon.control_socket, else crond.sock in "
    "the state directory).",
)
# Codes of the daemon's refusals that are about what was asked (exit 1); the others say
# the command could not steer it at all (exit 2, as no daemon).
_ASKED_WRONG = ("refused", "not_found")


def _socket_of(file: Path, state_dir: str | None, flag: Path | None) -> tuple[Path, str]:
    """Where the daemon running FILE listens: `--socket`, else as the daemon finds it
    (crond/control/where.py), from the file's `daemon:` block alone when that is clear;
    and what to say if no daemon is there."""
    if flag is not None:
        return flag, f"no socket at {flag}"
    from crond import ownership  # noqa: PLC0415  (see the imports above)
    from crond.control import where  # noqa: PLC0415

    try:
        raw = ownership.read_schedules_file(file, enforce=False)
    except ownership.FileRefused as exc:
        click.echo(f"crond: {exc}", err=True)
        sys.exit(1)
    hint = where.hint(raw)
    if hint is None:
        cfg = load_or_exit(file)
        hint = getattr(cfg.daemon, "control_socket", None), cfg.daemon.state_dir
    configured, configured_dir = hint
    path = where.resolve(configured, state_dir, configured_dir)
    if path is None:
        click.echo(f"crond: {file} turns the control socket off (control_socket: none)", err=True)
        sys.exit(2)
    path = where.fallback(path, configured, state_dir, configured_dir)
    return path, where.not_there(path, configured, state_dir, configured_dir)


def _steer(
    file: Path,
    state_dir: str | None,
    flag: Path | None,
    cmd: str,
    args: dict[str, object],
    *,
    wait: bool = False,
) -> dict[str, object]:
    """Send `cmd` to the daemon running FILE; its result. Stream lines are printed as
    they come (stdout's to stdout, stderr's to stderr). A refusal is printed as the daemon
    said it, and exits 1 (about what was asked) or 2 (could not steer it at all)."""
    from crond.control import client  # noqa: PLC0415  (see the imports above)

    path, not_there = _socket_of(file, state_dir, flag)
    final: dict[str, object] = {}
    try:
        # A trigger of an `overlap: replace` job answers once the runs it replaces have
        # stopped (up to their kill_after): no deadline, as for --wait.
        # A reload answers once the file is read and checked (seconds for 10,000 jobs).
        patient = wait or cmd in {"trigger", "reload", "backfill"}
        for message in client.request(path, cmd, args, timeout=None if patient else client.TIMEOUT):
            if "ok" in message:
                final = message
            else:
                _echo_stream(message)
    except client.NoDaemon:
        click.echo(f"crond: no crond is running for {file} ({not_there})", err=True)
        sys.exit(2)
    except client.ClientError as exc:
        click.echo(f"crond: {exc}", err=True)
        sys.exit(2)
    if final.get("ok") is not True:
        click.echo(f"crond: {final.get('error') or 'the daemon refused'}", err=True)
        sys.exit(1 if final.get("code") in _ASKED_WRONG else 2)
    result = final.get("result")
    return result if isinstance(result, dict) else {}


steer = _steer  # (crond/cli_backfill.py's `crond backfill`, a command of its own module)


def _echo_stream(message: dict[str, object]) -> None:
    line = message.get("line")
    if isinstance(line, str):
        click.echo(line, err=message.get("stream") == "stderr")


def _selection(jobs: tuple[str, ...], every: bool) -> dict[str, object]:
    if bool(jobs) == every:
        raise click.UsageError("name the jobs, or give --all (not both)")
    return {"all": True} if every else {"jobs": list(jobs)}


def _dicts(value: object) -> list[dict[str, Any]]:
    """The objects of a list in an answer (anything else in it ignored)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


@click.command()
@click.argument("file", type=params.FILE)
@params.STATE_DIR
@_SOCKET
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
def ps(file: Path, state_dir: str | None, socket_flag: Path | None, as_json: bool) -> None:
    """The pid of the daemon running FILE, and the runs going now in it."""
    from crond.control import views  # noqa: PLC0415  (see the imports above)

    answer = _steer(file, state_dir, socket_flag, "ps", {})
    runs, waiting = _dicts(answer.get("runs")), _dicts(answer.get("waiting"))
    if as_json:
        mine = {} if answer.get("pid") is None else {"daemon_pid": answer["pid"]}
        for run in [*runs, *({**w, "waiting": True} for w in waiting)]:
            click.echo(json.dumps({**run, **mine}))
        return
    header = views.format_daemon(answer)
    if header is not None:
        click.echo(header)
    if runs:
        click.echo(views.format_ps(runs))
    else:
        click.echo("nothing running", err=True)
    if waiting:
        click.echo(views.format_waiting(waiting))


@click.command()
@click.argument("file", type=params.FILE)
@click.argument("job")
@params.STATE_DIR
@_SOCKET
@click.option(
    "--wait",
    is_flag=True,
    help="Print the run's output as it comes and exit with its exit status.",
)
@click.option(
    "--no-chain",
    is_flag=True,
    help="Start no chained run (after:) when this run ends.",
)
def trigger(  # noqa: PLR0917  (one parameter a flag: click calls it by keyword)
    file: Path,
    job: str,
    state_dir: str | None,
    socket_flag: Path | None,
    wait: bool,
    no_chain: bool,
) -> None:
    """Start a run of JOB now, in the daemon running FILE; print its run id. Its end
    starts the jobs chained after it (after:), as a scheduled run's does."""
    from crond.control import views  # noqa: PLC0415  (see the imports above)

    args = {"job": job, "wait": wait, **({"chain": False} if no_chain else {})}
    result = _steer(file, state_dir, socket_flag, "trigger", args, wait=wait)
    if not wait:
        click.echo(str(result.get("run_id", "")))
        return
    click.echo(views.format_ended(job, result), err=True)
    sys.exit(views.exit_status(result))


@click.command()
@click.argument("file", type=params.FILE)
@click.argument("target", metavar="JOB|RUN_ID|BACKFILL_ID")
@params.STATE_DIR
@_SOCKET
def kill(file: Path, target: str, state_dir: str | None, socket_flag: Path | None) -> None:
    """Stop the running run(s) of a job, or one run, as a timeout does; and the job's
    backfill (or the backfill with that id)."""
    from crond.control import views  # noqa: PLC0415  (see the imports above)

    answer = _steer(file, state_dir, socket_flag, "kill", {"target": target})
    stopped, asked, backfills = (_dicts(answer.get(k)) for k in ("stopped", "asked", "backfills"))
    if not stopped and not asked and not backfills:
        click.echo(f"crond: nothing running for {target}", err=True)
        sys.exit(1)
    click.echo(views.format_stopped(stopped, asked, backfills))


@click.command()
@click.argument("file", type=params.FILE)
@click.argument("jobs", nargs=-1, metavar="[JOB]...")
@click.option("--all", "every", is_flag=True, help="Every job of the file.")
@click.option("--for", "for_", type=params.DURATION, default=None, help="For this long (1h).")
@click.option(
    "--until", type=params.INSTANT, default=None, help="Until this instant (ISO-8601 with offset)."
)
@click.option("--note", default=None, metavar="TEXT", help="Why (shown by `crond status`).")
@params.STATE_DIR
@_SOCKET
def pause(  # noqa: PLR0917  (one parameter a flag: click calls it by keyword)
    file: Path,
    jobs: tuple[str, ...],
    every: bool,
    for_: timedelta | None,
    until: datetime | None,
    note: str | None,
    state_dir: str | None,
    socket_flag: Path | None,
) -> None:
    """Pause jobs: their slots are skipped until resumed (or --for, --until)."""
    from crond.control import protocol, views  # noqa: PLC0415  (see the imports above)

    args = _selection(jobs, every)
    if for_ is not None and until is not None:
        raise click.UsageError("give --for or --until, not both")
    now = SystemClock().now()
    if for_ is not None:
        until = now + for_
    if until is not None and until <= now:
        raise click.UsageError(
            f"--until {iso_utc(until)} has passed (now {iso_utc(now.replace(microsecond=0))}): "
            "give a later instant or --for"
        )
    if note is not None and len(note) > protocol.MAX_NOTE:
        raise click.BadParameter(f"at most {protocol.MAX_NOTE} characters", param_hint="--note")
    args |= {"until": until.isoformat().replace("+00:00", "Z") if until else None, "note": note}
    click.echo(views.format_paused(_steer(file, state_dir, socket_flag, "pause", args)))


@click.command()
@click.argument("file", type=params.FILE)
@click.argument("jobs", nargs=-1, metavar="[JOB]...")
@click.option("--all", "every", is_flag=True, help="Every paused job.")
@params.STATE_DIR
@_SOCKET
def resume(
    file: Path, jobs: tuple[str, ...], every: bool, state_dir: str | None, socket_flag: Path | None
) -> None:
    """Resume paused jobs; say how many slots each skipped."""
    from crond.control import views  # noqa: PLC0415  (see the imports above)

    resumed = _steer(file, state_dir, socket_flag, "resume", _selection(jobs, every)).get("resumed")
    resumed = [r for r in resumed if isinstance(r, dict)] if isinstance(resumed, list) else []
    click.echo(views.format_resumed(resumed))


@click.command()
@click.argument("file", type=params.FILE)
@params.STATE_DIR
@_SOCKET
def reload(file: Path, state_dir: str | None, socket_flag: Path | None) -> None:
    """Have the daemon running FILE read it again, as SIGHUP does; say what changed."""
    from crond.control import views  # noqa: PLC0415  (see the imports above)

    result = _steer(file, state_dir, socket_flag, "reload", {})
    if result.get("reloaded") is True:
        click.echo(views.format_reloaded(result))
        return
    errors = result.get("errors")
    for error in errors if isinstance(errors, list) else []:
        click.echo(str(error), err=True)
    click.echo(views.format_reload_refused(file, result), err=True)
    sys.exit(1)


COMMANDS = (ps, trigger, kill, pause, resume, reload)
