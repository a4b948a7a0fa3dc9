from __future__ import annotations

from pathlib import Path

import pytest

# A real PostgreSQL for the tests that ask for it (`pg_url`; tests/pg/plugin.py).
pytest_plugins = ["tests.pg.plugin"]


@pytest.fixture(autouse=True)
def _own_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test's daemons keep their state store in a directory of their own (systemd's
    variable is the first place crond looks): no test sees another's cursors, runs or
    boot marks, and none writes to /var/lib/crond or the user's home."""
    directory = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("STATE_DIRECTORY", str(directory))
    return directory
