"""pytest fixtures for tests that need a real PostgreSQL (loaded by tests/conftest.py).

`pg_server` starts one private server (tests.pg.server) for the whole session, on first
use only: a run that asks for no database pays nothing. `pg_url` gives each test a fresh
database, created from `template1` and dropped after the test, as a libpq URL;
`pg_databases` makes more than one.

Where there is no server to start (or psycopg is not installed), the tests that ask for
one are skipped with one line saying what is missing; under CI (`CI=true`) they fail
instead, naming the cause, so that CI never passes by skipping them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import NoReturn

import pytest

try:
    import psycopg
    from psycopg import sql
except ImportError:  # pg_server says so, and every fixture here goes through it first
    PSYCOPG = False
else:
    PSYCOPG = True

from tests.pg.server import Server, UnavailableError, start

# Whatever every test database should start with would be put here once per session.
TEMPLATE = "template1"


def refuse(reason: str) -> NoReturn:
    """Skip the test for want of PostgreSQL; under CI, fail it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL is required under CI=true: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL: {reason}")


class Databases:
    """Fresh databases on a server, each dropped by `drop_all` (even with clients still
    connected: a failed test may leave some)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.names: list[str] = []

    def new(self) -> str:
        """Create a database and return its libpq URL."""
        name = f"test_{secrets.token_hex(6)}"
        create = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(TEMPLATE)
        )
        with psycopg.connect(self.server.url(), autocommit=True) as admin:
            admin.execute(create)
        self.names.append(name)
        return self.server.url(name)

    def drop_all(self) -> None:
        with psycopg.connect(self.server.url(), autocommit=True) as admin:
            while self.names:
                name = self.names.pop()
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    """A private PostgreSQL for the session (started on first use, stopped at its end)."""
    if not PSYCOPG:
        refuse("psycopg is not installed (pip install -e '.[dev]')")
    try:
        server = start()
    except UnavailableError as exc:
        refuse(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_databases(pg_server: Server) -> Iterator[Databases]:
    """Make fresh databases with `.new()`; all are dropped after the test."""
    databases = Databases(pg_server)
    try:
        yield databases
    finally:
        databases.drop_all()


@pytest.fixture
def pg_url(pg_databases: Databases) -> str:
    """A libpq URL of a fresh, empty database of the test's own."""
    return pg_databases.new()
