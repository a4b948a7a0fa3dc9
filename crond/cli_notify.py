"""`crond notify FILE NOTIFIER`: send a sample notification through one of the file's
notifiers, once, and say whether it went (docs/alerting.md, Testing a notifier). The
sending is crond/notify/sample.py's; this module parses, prints and chooses the exit
status. No daemon is needed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crond import cliparams as params
from crond.clifile import load_or_exit

if TYPE_CHECKING:
    from crond.config.loaded import LoadedConfig

_EVENTS = (
    "started",
    "succeeded",
    "failed",
    "recovered",
    "missed",
    "skipped",
    "lost",
    "long_running",
)  # == model.NotifyEvent's values (tested); written out so that --help needs no pydantic


@click.command()
@click.argument("file", type=params.FILE)
@click.argument("notifier")
@click.option(
    "--event",
    default="failed",
    show_default=True,
    metavar="EVENT",
    help=f"The event the sample tells of: {', '.join(_EVENTS)}.",
)
def notify(file: Path, notifier: str, event: str) -> None:
    """Send a sample notification through NOTIFIER of FILE, once; exit 0 when it went."""
    if event not in _EVENTS:
        raise click.BadParameter(_unknown(event, "an event", list(_EVENTS)), param_hint="--event")
    cfg = load_or_exit(file, check_owner=True)
    spec = cfg.notifiers.get(notifier)
    if spec is None:
        click.echo(_no_notifier(cfg, notifier), err=True)
        sys.exit(1)
    unset = [w for w in cfg.env_warnings if w.path.startswith(f"notifiers.{notifier}.")]
    for warning in unset:
        click.echo(f"{warning}", err=True)
    if unset:
        click.echo(f"crond: not sent: {notifier} needs the variables above set", err=True)
        sys.exit(1)
    from crond.clock import SystemClock  # noqa: PLC0415  (after the checks: see the docstring)
    from crond.config.model import NotifyEvent  # noqa: PLC0415
    from crond.notify import sample  # noqa: PLC0415

    kind = NotifyEvent(event)
    error = asyncio.run(sample.send_once(spec, kind, sample.sample_body(kind, SystemClock().now())))
    if error is not None:
        click.echo(f"crond: {notifier} ({spec.shown}): not sent: {error}", err=True)
        sys.exit(1)
    click.echo(f"{notifier} ({spec.shown}): sent a sample {event} notification")


def _no_notifier(cfg: LoadedConfig, name: str) -> str:
    """`FILE:LINE:COL: notifiers: "slak" names no notifier (did you mean "slack"?)`, at
    the file's `notifiers:` key (or the file's name when it has none)."""
    from crond.config import yamlsource  # noqa: PLC0415  (only for this message)

    names = list(cfg.notifiers)
    if not names:
        return (
            f'{cfg.path}: notifiers: "{name}" is not a notifier of the file (the file has none: '
            "define it under the top-level notifiers:)"
        )
    text = Path(cfg.path).read_text(encoding="utf-8")
    mark = yamlsource.parse(text).locate(("notifiers",), key=True)
    said = _unknown(name, "a notifier of the file", names)
    return f"{cfg.path}:{mark.line}:{mark.column}: notifiers: {said}"


def _unknown(word: str, what: str, choices: list[str]) -> str:
    """`"faild" is not an event (did you mean "failed"?)`, or the choices when none is close."""
    import difflib  # noqa: PLC0415  (only for this message)

    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f'"{word}" is not {what} (did you mean "{close[0]}"?)'
    listed = ", ".join(choices[:20]) + (", ..." if len(choices) > 20 else "")
    return f'"{word}" is not {what} (one of: {listed})'


COMMANDS = (notify,)
