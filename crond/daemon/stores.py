"""How the daemon's recorder opens its state store: the SQLite store of a state
directory, or a cluster's PostgreSQL database (crond/store/; docs/state.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from crond.config.loaded import LoadedConfig
from crond.store import locate
from crond.store.base import Store


def opener(directory: Path) -> Callable[[bool], Store]:
    """How the recorder opens the store in `directory` (again, and `aside` when damaged)."""
    return lambda aside: locate.open_store(directory, aside=aside)


def cluster_opener(url: str, cfg: LoadedConfig, replica: str) -> Callable[[bool], Store]:
    """How the recorder opens the cluster's database (psycopg: imported only here)."""
    from crond.store import postgres  # noqa: PLC0415  (the `postgres` extra: only when used)

    daemon = cfg.daemon
    return lambda _aside: postgres.PostgresStore.open(
        url, cluster=daemon.cluster, replica=replica, replica_timeout=daemon.replica_timeout
    )
