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
