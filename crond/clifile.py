"""Reading FILE for a command of the command line (crond/cli.py, crond/control/commands.py):
its configuration, or its problems printed as `crond validate` prints them and exit 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:
    from crond.config import problems
    from crond.config.loaded import LoadedConfig
    from crond.store.base import Reader


def load(path: Path, *, check_owner: bool, stdin: bool = False) -> LoadedConfig:
    from crond.config import loader  # noqa: PLC0415  (pydantic: only for commands that load FILE)

    return loader.load_file(path, enforce=check_owner, stdin=stdin)[0]


def load_or_exit(
    path: Path, *, as_json: bool = False, check_owner: bool = False, stdin: bool = False
) -> LoadedConfig:
    """FILE's configuration, or its problems printed (as `validate` does) and exit 1."""
    from crond.config import problems  # noqa: PLC0415  (pydantic: only for commands that load FILE)

    try:
        return load(path, check_owner=check_owner, stdin=stdin)
    except problems.ConfigError as exc:
        exit_with(Path("<stdin>") if stdin else path, exc, as_json=as_json)


def exit_with(path: Path, exc: problems.ConfigError, *, as_json: bool = False) -> NoReturn:
    """Print a file's problems (as `validate` does) and exit 1."""
    if as_json:
        click.echo(
            json.dumps({"ok": False, "jobs": 0, "errors": [p.as_dict() for p in exc.problems]})
        )
    else:
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        count, name = len(exc.problems), path
        from crond.config.problems import MAX_PROBLEMS  # noqa: PLC0415  (pydantic: only for commands that load FILE)

        said = f"more than {MAX_PROBLEMS:,}" if count > MAX_PROBLEMS else str(count)
        click.echo(f"{name}: {said} error{'s' if count != 1 else ''}", err=True)
    sys.exit(1)


def reader_for(cfg: LoadedConfig, flag: str | None) -> Reader:
    """The store the file's daemon writes: its cluster's database, or its state directory
    (`--state-dir` names one). Raises StateError."""
    from crond.store import locate  # noqa: PLC0415  (only for commands that read the store)

    daemon = cfg.daemon
    return locate.open_reader(
        flag, daemon.state_dir, database=daemon.database, cluster=daemon.cluster
    )


def liveness_file_of(path: Path | None, default: str) -> Path:
    """Where the daemon running FILE writes its liveness file: its `daemon.liveness_file`
    (read from that block alone when it is clear, as `crond status` finds the store),
    else `default` (where the shipped unit and image have `crond run` write it). A file
    that cannot be read is said, and exit 1."""
    if path is None:
        return Path(default)
    from crond import ownership  # noqa: PLC0415  (`crond health` stays lean)
    from crond.store import locate  # noqa: PLC0415

    try:
        raw = ownership.read_schedules_file(path, enforce=False)
    except ownership.FileRefused as exc:
        click.echo(f"crond: {exc}", err=True)
        sys.exit(1)
    found = locate.daemon_hint(raw, frozenset({"liveness_file"}))
    written = found["liveness_file"] if found is not None else None
    if found is None:
        written = load_or_exit(path).daemon.liveness_file
    return Path(written or default)
