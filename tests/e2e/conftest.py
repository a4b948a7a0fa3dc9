from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import Crond


@pytest.fixture
def crond(tmp_path: Path) -> Iterator[list[Crond]]:
    """Daemons started by a test; each is killed at the end if the test did not stop it."""
    started: list[Crond] = []
    yield started
    for daemon in started:
        daemon.kill()
