"""Where the state store is, and opening the one there: for the daemon (to write) and for
`crond status`/`history` (to read): SQLite (crond/store/sqlite.py) in a state directory;
for reading, a cluster's PostgreSQL
database (crond/store/postgres.py) when the file has `daemon.database` or
CROND_DATABASE_URL is set. psycopg is imported only then, and its absence is said in a
line (`pip install 'crond[postgres]'`), never a traceback.

A replica opens its cluster's database itself (crond/daemon/lifecycle.py, with
`daemon.database`). docs/state.md has where the store lives.
"""

from __future__ import annotations

import os
from pathlib import Path

from crond.store import sqlite
from crond.store.base import Reader, StateError, Store

SYSTEM_DIR = Path("/var/lib/crond")
# The database's URL, over the file's `daemon.database` (a secret kept out of the file).
DATABASE_ENV = "CROND_DATABASE_URL"


def default_dir(environ: dict[str, str] | None = None) -> Path:
    """`$STATE_DIRECTORY` (systemd's StateDirectory=), else /var/lib/crond as root, else
    ~/.local/state/crond."""
    env = os.environ if environ is None else environ
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0])
    if os.geteuid() == 0:
        return SYSTEM_DIR
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "crond"


def resolve_dir(flag: str | None, configured: str | None) -> Path | None:
    """Where the store lives: `--state-dir`, else the file's `daemon.state_dir`, else the
    default place; None (no store) when the one that decides says `none`."""
    chosen = flag or configured
    if chosen is None:
        return default_dir()
    return None if chosen.strip().lower() == "none" else Path(chosen).expanduser()


def open_store(directory: Path, *, aside: bool = False) -> Store:
    """The daemon's store in `directory` (made if needed), locked for this process.
    `aside`: it is known to be damaged: keep it under another name, start afresh.
    Raises StateError."""
    return sqlite.SqliteStore(directory, aside=aside)


def database_url(configured: str | None, environ: dict[str, str] | None = None) -> str | None:
    """The cluster's database: $CROND_DATABASE_URL, else the file's `daemon.database`."""
    env = os.environ if environ is None else environ
    return env.get(DATABASE_ENV) or configured


def open_reader(
    flag: str | None,
    configured: str | None,
    *,
    database: str | None = None,
    cluster: str = "default",
) -> Reader:
    """The store `crond status`/`history` should read: with no `--state-dir` and a
    database (`database_url`), the cluster's in it; else where `resolve_dir` says; and,
    when `looks_at_system` and nothing is there, the system daemon's (/var/lib/crond: a
    monitoring user in the `crond` group need not say so). Raises StateError."""
    url = database_url(database)
    if flag is None and url is not None:
        return open_cluster_reader(url, cluster)
    directory = resolve_dir(flag, configured)
    if directory is None:
        raise StateError("no state store (state_dir: none): no run history is kept")
    try:
        return sqlite.Reader(directory)
    except StateError as exc:
        if url is not None:  # `--state-dir` of a replica: its directory holds no history
            raise StateError(f"no history in {directory}: {IN_DATABASE}") from None
        if not looks_at_system(flag, configured) or directory == SYSTEM_DIR:
            raise
        there = present(SYSTEM_DIR / sqlite.DB_NAME)
        if there is None:
            raise StateError(f"{exc}; {system_closed()}") from None
        if not there:
            raise
    return sqlite.Reader(SYSTEM_DIR)


IN_DATABASE = (
    "this file's daemon keeps its history in its database (daemon.database); "
    "run without --state-dir"
)


def system_closed() -> str:
    """What to say when the system daemon's directory may not be looked in."""
    return (
        f"the system daemon's directory {SYSTEM_DIR} is not readable by you (to let a group "
        "in, see docs/control.md 'Letting operators use it')"
    )


def looks_at_system(flag: str | None, configured: str | None) -> bool:
    """Whether a command that finds nothing at the default place looks in the system
    daemon's directory as well: for a user other than root who chose no place (no
    `--state-dir`, no `daemon.state_dir`, no `$STATE_DIRECTORY`; root's default place is
    the system daemon's already)."""
    chosen = flag is not None or configured is not None or bool(os.environ.get("STATE_DIRECTORY"))
    return not chosen and os.geteuid() != 0


def present(path: Path) -> bool | None:
    """Whether `path` exists; None when a directory on the way may not be searched by
    this user (Path.exists raises then)."""
    try:
        return path.exists()
    except PermissionError:
        return None


def open_cluster_reader(url: str, cluster: str) -> Reader:
    """The cluster's store in the database at `url`, read-only. Raises StateError (psycopg
    not installed among the causes)."""
    try:
        from crond.store.postgres import PostgresStore  # noqa: PLC0415  (psycopg: only here)
    except ImportError as exc:
        if (exc.name or "").startswith("crond."):
            raise
        from crond.config.secrets import show_url  # noqa: PLC0415  (crond.config: not here)

        raise StateError(
            f"{show_url(url)} (cluster {cluster}): reading a cluster's database needs "
            "psycopg, which is not installed: pip install 'crond[postgres]'"
        ) from None
    return PostgresStore.reader(url, cluster=cluster)


def daemon_hint(raw: bytes, keys: frozenset[str]) -> dict[str, str | None] | None:
    """The values of `keys` in a schedules file's top-level `daemon:` block, read alone
    (its lines up to the next top-level key) without loading the whole file: `crond
    status` and the control commands find the store and the socket this way. A key not
    there is None (so is every key when there is no block). None altogether when the
    block has a problem or a value is not text: then the caller loads the file. Read by
    the project's bounded YAML reader (an alias bomb is refused without being expanded)."""
    lines = raw.decode("utf-8", errors="replace").splitlines()
    for i, line in enumerate(lines):
        if not line.startswith(("daemon:", "daemon :")):
            continue
        block = [line]
        for more in lines[i + 1 :]:
            if more and not more[0].isspace() and not more.startswith("#"):
                break
            block.append(more)
        from crond.config import yamlsource  # noqa: PLC0415  (~20 ms: only when there is one)

        source = yamlsource.parse("\n".join(block), keep=keys)
        daemon = source.data.get("daemon") if isinstance(source.data, dict) else None
        if source.problems or not isinstance(daemon, dict | None):
            return None
        values = {key: (daemon or {}).get(key) for key in keys}
        if not all(v is None or isinstance(v, str) for v in values.values()):
            return None
        return values
    return dict.fromkeys(keys)
