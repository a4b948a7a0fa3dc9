"""The kinds of value the `crond` command line takes (durations, a heartbeat, an
instant), each refused with a message that says what would be right; and what the
commands of crond/cli.py and crond/control/commands.py share (FILE, `--state-dir`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from crond.config import durations
from crond.config.address import AddressError, split_address


class _DurationType(click.ParamType[timedelta]):
    name = "duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        try:
            return durations.parse_duration(value)
        except durations.DurationError as exc:
            self.fail(str(exc), param, ctx)


class _InstantType(click.ParamType[datetime]):
    name = "instant"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(
                str(value).replace("Z", "+00:00").replace("z", "+00:00")
            )
        except ValueError:
            self.fail(
                f'"{value}" is not an ISO-8601 instant (e.g. 2026-03-08T00:00:00Z)', param, ctx
            )
        if parsed.tzinfo is None:
            example = parsed.isoformat(timespec="seconds")
            self.fail(f'"{value}" has no offset; add Z or +01:00 (e.g. {example}Z)', param, ctx)
        return parsed.astimezone(UTC)


class _HeartbeatType(_DurationType):
    """A duration the file's `daemon.heartbeat` would take: 100 ms or more."""

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        beat = super().convert(value, param, ctx)
        if beat < timedelta(milliseconds=100):
            self.fail(f'"{value}" is too short: a heartbeat is at least 100ms', param, ctx)
        return beat


class _AddressType(click.ParamType[str]):
    """HOST:PORT to listen at, as the file's `daemon.metrics` takes it."""

    name = "address"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        try:
            split_address(str(value))  # the file's check: the same words for a mistake
        except AddressError as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


class _SinceType(click.ParamType[datetime]):
    """`--since`: a duration back from now (`2h`, `7d`) or an ISO-8601 instant with offset."""

    name = "since"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            back = durations.parse_duration(value)
        except durations.DurationError:
            pass
        else:
            from crond.clock import SystemClock  # noqa: PLC0415  (the one reader of time)

            return SystemClock().now() - back
        if "-" not in str(value):  # not an attempt at a date: the duration's own message
            self.fail(f'"{value}" is neither a duration (2h, 30m, 7d) nor an instant', param, ctx)
        return INSTANT.convert(value, param, ctx)


ADDRESS = _AddressType()
DURATION = _DurationType()
HEARTBEAT = _HeartbeatType()
INSTANT = _InstantType()
SINCE = _SinceType()

# Not checked by click: a directory, a missing or an unreadable file is crond's own
# located error (and JSON with --json), from the one reader of the file.
FILE = click.Path(path_type=Path)

# Where the commands that read or steer the daemon find its store (and its socket).
STATE_DIR = click.option(
    "--state-dir",
    default=None,
    metavar="DIR",
    help="The daemon's state store (default: daemon.state_dir, else the default place).",
)


# `-` (exactly that) is standard input, for `validate` and `next` only: a preview or a
# check, never a file the daemon runs (nor `./-`, a file of that name).
FILE_OR_STDIN = click.Path(allow_dash=True)


def stdin_or_path(file: str) -> tuple[Path, bool]:
    return Path(file), file == "-"
