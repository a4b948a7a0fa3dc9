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
from typing import Any, NoReturn

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
    """Fresh databases on a server, each given back by `drop_all` (even with clients still
    connected: a failed test may leave some).

    A database given back is emptied and kept for the next test of the session rather than
    dropped: `CREATE DATABASE` copies all of `template1` (tens of milliseconds of the
    server's CPU a test, over hundreds of tests). Giving one back ends its sessions, renames
    it (a client a failed test left behind cannot reconnect to it under the next test) and
    drops every schema a test could have made its tables in; one that cannot be emptied so
    is dropped instead."""

    def __init__(self, server: Server, spare: list[str] | None = None) -> None:
        self.server = server
        self.names: list[str] = []
        self._spare = spare if spare is not None else []

    def new(self) -> str:
        """A fresh, empty database's libpq URL."""
        if self._spare:
            name = self._spare.pop()
        else:
            name = _fresh_name()
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
                if not (len(self._spare) < SPARE and self._emptied(admin, name)):
                    _drop(admin, name)

    def _emptied(self, admin: psycopg.Connection[Any], name: str) -> bool:
        """Empty `name` under a new name and keep it as a spare; False if it could not be."""
        renamed = _fresh_name()
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )
            admin.execute(
                sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                    sql.Identifier(name), sql.Identifier(renamed)
                )
            )
        except psycopg.Error:
            return False
        try:
            with psycopg.connect(self.server.url(renamed), autocommit=True) as conn:
                schemas = [
                    row[0]
                    for row in conn.execute(
                        "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%%' "
                        "AND nspname <> 'information_schema'"
                    )
                ]
                for schema in schemas:
                    conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
                conn.execute(EMPTY_PUBLIC)
        except psycopg.Error:
            _drop(admin, renamed)
            return False
        self._spare.append(renamed)
        return True


def _fresh_name() -> str:
    return f"test_{secrets.token_hex(6)}"


def _drop(admin: psycopg.Connection[Any], name: str) -> None:
    """Drop `name`, even with clients still connected."""
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


# How many emptied databases the session keeps for its next tests.
SPARE = 4
# `public` as template1 has it (PostgreSQL 15: owned by pg_database_owner, usable by all).
EMPTY_PUBLIC = (
    "CREATE SCHEMA public AUTHORIZATION pg_database_owner; "
    "GRANT USAGE ON SCHEMA public TO PUBLIC; "
    "COMMENT ON SCHEMA public IS 'standard public schema'"
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


@pytest.fixture(scope="session")
def pg_spares() -> list[str]:
    """The emptied databases of the session's server, for its next tests (Databases)."""
    return []


@pytest.fixture
def pg_databases(pg_server: Server, pg_spares: list[str]) -> Iterator[Databases]:
    """Make fresh databases with `.new()`; all are given back after the test."""
    databases = Databases(pg_server, pg_spares)
    try:
        yield databases
    finally:
        databases.drop_all()


@pytest.fixture
def pg_url(pg_databases: Databases) -> str:
    """A libpq URL of a fresh, empty database of the test's own."""
    return pg_databases.new()
