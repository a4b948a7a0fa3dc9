from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import Crond
from tests.e2e.replicas import Replica, reap
from tests.pg import server as pg


@pytest.fixture
def crond(tmp_path: Path) -> Iterator[list[Crond]]:
    """Daemons started by a test; each is killed at the end if the test did not stop it."""
    started: list[Crond] = []
    yield started
    for daemon in started:
        daemon.kill()


@pytest.fixture
def group() -> Iterator[list[Replica]]:
    """The replicas a test starts (tests/e2e/replicas.py); at its end each is killed, and
    every run it started."""
    started: list[Replica] = []
    yield started
    reap(started)


@pytest.fixture
def own_pg(pg_server: pg.Server) -> Iterator[pg.Server]:
    """A private PostgreSQL of the test's own, which it may halt and restart (pg_server
    first: this runs only where the session's server could start)."""
    with pg.start() as server:
        yield server
