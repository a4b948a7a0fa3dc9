"""The `crond` group: the commands that steer the daemon (crond/control/commands.py) are
added when one is named or the list is wanted, so that the others start as lean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from crond.cli import main

ROOT = Path(__file__).resolve().parent.parent
CONTROL = {"ps", "trigger", "kill", "pause", "resume", "reload"}


def _imported(*args: str) -> set[str]:
    """The modules a real `crond ARGS` imports (`-X importtime` lists each once)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "crond", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_version_and_validate_import_nothing_of_the_control_commands() -> None:
    for args in (["--version"], ["validate", "schedules.example.yaml"]):
        loaded = _imported(*args)
        assert "crond.cli" in loaded, args  # the listing is read right
        assert not {m for m in loaded if m.startswith("crond.control")}, args


def test_naming_a_control_command_imports_its_module() -> None:
    assert "crond.control.commands" in _imported("ps", "--help")


# What the daemon needs and a command that only talks to it, or only looks, does not:
# each costs every start of `crond ps` (the tests start it hundreds of times).
HEAVY = ("asyncio", "pydantic", "structlog", "crond.schedule", "crond.daemon.loop")


def test_version_and_the_control_commands_import_none_of_the_daemons_machinery() -> None:
    for args in (["--version"], *([name, "--help"] for name in sorted(CONTROL))):
        loaded = _imported(*args)
        assert "crond.cli" in loaded, args
        assert not {m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY}, args
        others = {"crond.cli_notify", "crond.cli_state", "crond.cli_web", "crond.cli_next"}
        assert not loaded & others, args  # only the module of the command named


def test_each_module_of_commands_is_named_for_its_commands() -> None:
    # cli.py names, without importing them, the modules that hold the other commands.
    import importlib  # noqa: PLC0415

    from crond import cli  # noqa: PLC0415

    for module in set(cli._ELSEWHERE.values()):
        for command in importlib.import_module(f"crond.{module}").COMMANDS:
            assert cli._ELSEWHERE[command.name] == module, command.name


def test_health_names_the_daemons_default_liveness_file() -> None:
    # cli.py names it itself, so that `crond --version` does not import the daemon's side.
    from crond import cli  # noqa: PLC0415
    from crond.daemon import liveness  # noqa: PLC0415

    assert cli._LIVENESS_PATH == liveness.DEFAULT_PATH


def test_help_lists_every_command_by_name() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    lines = result.stdout.split("Commands:\n", 1)[1].splitlines()
    names = [line.split()[0] for line in lines if line.strip()]
    assert names == sorted(names)
    assert set(names) == CONTROL | {
        "backfill", "health", "history", "next", "notify", "output", "replicas", "run", "run-job",
        "schema", "status", "validate", "web",
    }  # fmt: skip


def test_each_control_command_is_found_by_name() -> None:
    for name in sorted(CONTROL):
        result = CliRunner().invoke(main, [name, "--help"])
        assert result.exit_code == 0, name
        assert "--socket P" in result.stdout, name


def test_an_unknown_command_is_still_refused() -> None:
    result = CliRunner().invoke(main, ["pz"])
    assert result.exit_code == 2
    assert "No such command 'pz'." in result.stderr
