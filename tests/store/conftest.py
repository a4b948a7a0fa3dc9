"""The PostgreSQL store tests' replicas (tests/pg/ starts the server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from crond.store.postgres import PostgresStore


@pytest.fixture
def stores(pg_url: str) -> Iterator[list[PostgresStore]]:
    """Three replicas of cluster c: r1, r2, r3."""
    opened = [PostgresStore.open(pg_url, cluster="c", replica=f"r{i}") for i in (1, 2, 3)]
    yield opened
    for store in opened:
        store.close()
