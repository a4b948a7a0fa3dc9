from __future__ import annotations

from pathlib import Path

import pytest

# A real PostgreSQL for the tests that ask for it (`pg_url`; tests/pg/plugin.py).
pytest_plugins = ["tests.pg.plugin"]


@pytest.fixture(autouse=True)
def own_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test's daemons and commands keep and read their state store in a directory
    of their own: no test sees another's cursors, runs or boot marks, and none reads or
    writes /var/lib/crond, the user's home or a database of the environment's.

    Every place crond looks (crond/store/locate.py, crond/control/where.py) is covered:
    `$STATE_DIRECTORY` is the first place, and a chosen one (so the system daemon's
    directory is never looked in as a fallback); `$XDG_STATE_HOME` is the next, before
    the home directory; and CROND_DATABASE_URL and CROND_REPLICA are unset, so that a
    test names its database itself (tests/store/test_locate.py checks all this)."""
    directory = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("STATE_DIRECTORY", str(directory))
    monkeypatch.setenv("XDG_STATE_HOME", str(directory / "xdg"))
    monkeypatch.delenv("CROND_DATABASE_URL", raising=False)
    monkeypatch.delenv("CROND_REPLICA", raising=False)
    return directory
