"""Where the commands and the daemon look for the state store and the control socket, as
the tests see it: tests/conftest.py gives every test a directory of its own, and no test
can reach the system daemon's directory (/var/lib/crond) or the user's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crond.control import where
from crond.store import locate

CROND = str(Path(sys.executable).parent / "crond")


def test_no_test_reaches_the_system_or_the_users_directory(
    own_state_dir: Path, tmp_path: Path
) -> None:
    assert locate.default_dir() == own_state_dir
    assert where.resolve(None, None, None) == own_state_dir / where.SOCKET_NAME
    # Nothing there: still no look at the system daemon's, whoever runs the tests.
    assert not locate.looks_at_system(None, None)
    assert not {"CROND_DATABASE_URL", "CROND_REPLICA"} & os.environ.keys()
    assert Path(os.environ["XDG_STATE_HOME"]).is_relative_to(own_state_dir)
    # And so for the real command, in a process of its own.
    schedules = tmp_path / "s.yaml"
    schedules.write_text("jobs:\n  a: {every: 1h, command: 'true'}\n")
    done = subprocess.run(
        [CROND, "history", str(schedules)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"crond: {own_state_dir / 'crond.sqlite3'}: no such file (has the daemon run with "
        "this state_dir?)\n"
    )


def test_only_a_user_other_than_root_who_chose_no_place_looks_at_the_system_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert locate.looks_at_system(None, None)
    assert not locate.looks_at_system("st", None)
    assert not locate.looks_at_system(None, "st")
    monkeypatch.setenv("STATE_DIRECTORY", "/srv/crond")
    assert not locate.looks_at_system(None, None)
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert not locate.looks_at_system(None, None)
