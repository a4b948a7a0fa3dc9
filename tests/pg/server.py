"""A throwaway PostgreSQL server for the tests: found, initialised, started, stopped and
removed by the test run itself, so no machine needs a database set up by hand.

`start()` finds the server binaries (`postgres` on PATH, else the newest of
/usr/lib/postgresql/*/bin and /usr/pgsql-*/bin), runs `initdb` in a new temporary
directory and starts `postgres` on a Unix socket in that directory only (no TCP port:
nothing else on the machine can reach it, and parallel runs never clash). Authentication
is `trust` (the directory is private to the server's owner) and durability is switched
off (fsync, full-page writes, synchronous commit): a test database is never worth a
flush. PostgreSQL refuses to run as root, so when the tests run as root the directory
and the server belong to the `postgres` user.

`Server.stop()` shuts it down and removes the directory. `Server.halt()` and
`Server.restart()` stop it and start it again on the same data and socket, for a test of
clients that must outlive their database going away (the session's server is shared:
halt only a server of the test's own, `start()`ed by it). Should the test process die
without stopping it, the server is told by the kernel (its parent-death signal) and
quits, and the next `start()` removes directories whose owner is gone.

As a script, `python -m tests.pg.server [COMMAND...]` starts a server, runs COMMAND with
DATABASE_URL and the PG* variables pointing at it, and stops it; with no command it
prints the URL and waits for Ctrl-C. `--halt DIR` and `--restart DIR` ask the script
serving DIR to halt and restart its server (an outage, by hand); `--which` prints the
binaries' directory (status 2 and the reason when there are none: .ci/run then
installs them). tests/pg/command.py is the command line.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

BIN_PATTERNS = ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin")
PREFIX = "crond-pg-"
PORT = 5432  # only names the socket file: the server listens on no TCP port
SUPERUSER = "postgres"
OWNER_FILE = "owner.pid"  # the test process that made the directory, for the stale sweep

# For speed, at the cost of durability nobody needs here.
SETTINGS = {
    "listen_addresses": "",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "autovacuum": "off",
    "shared_buffers": "32MB",
    "log_min_messages": "warning",
}

# sockaddr_un.sun_path is 108 bytes on Linux, with its terminating NUL.
MAX_SOCKET_PATH = 107


class UnavailableError(Exception):
    """No PostgreSQL server could be started here; the message says what is missing."""


def _version_key(directory: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", str(directory)))


def find_bindir(search_path: str | None = None, patterns: Sequence[str] = BIN_PATTERNS) -> Path:
    """The directory holding `initdb` and `postgres`: PATH's first, else the newest
    version among `patterns`. `search_path` stands for $PATH (None: the real one)."""
    on_path = shutil.which("postgres", path=search_path)
    if on_path is not None:
        directory = Path(on_path).resolve().parent
        if (directory / "initdb").is_file():
            return directory
    found = [
        candidate
        for pattern in patterns
        for candidate in Path("/").glob(pattern.lstrip("/"))
        if (candidate / "postgres").is_file() and (candidate / "initdb").is_file()
    ]
    if not found:
        where = " nor in ".join(["PATH", *patterns])
        raise UnavailableError(
            f"no PostgreSQL server binaries (initdb, postgres) on {where}; "
            "install Debian's postgresql package"
        )
    return max(found, key=_version_key)


def _owner() -> dict[str, Any]:
    """Popen's arguments that run the server as `postgres` when we are root (PostgreSQL
    refuses root); none otherwise: it then runs as we do."""
    if os.geteuid() != 0:
        return {}
    try:
        account = pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise UnavailableError(
            f"running as root, and there is no {SUPERUSER!r} user to run the server as "
            "(Debian's postgresql package creates it)"
        ) from None
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec function asking Linux to send SIGQUIT (immediate shutdown) to the server
    when the process that started it dies, so a killed test run leaves no server behind.
    It runs after the switch to the server's user, which would clear it."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def preexec() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGQUIT, 0, 0, 0)

    return preexec


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def sweep_stale(parent: Path) -> None:
    """Remove the directories of earlier runs whose test process and server are both
    gone (a run killed with SIGKILL cannot clean up after itself)."""
    for directory in parent.glob(f"{PREFIX}*"):
        owner = _read_pid(directory / OWNER_FILE)
        server = _read_pid(directory / "data" / "postmaster.pid")
        if owner is None or _alive(owner) or (server is not None and _alive(server)):
            continue
        shutil.rmtree(directory, ignore_errors=True)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return " | ".join(text.strip().splitlines()[-lines:])[-2000:]


class Server:
    """A running private PostgreSQL. `directory` holds the data (`data/`), the socket
    and the log (`server.log`); `stop()` removes it."""

    def __init__(
        self,
        directory: Path,
        bindir: Path,
        process: subprocess.Popen[bytes],
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.directory = directory
        self.bindir = bindir
        self.process = process
        self.port = PORT
        self.settings = dict(SETTINGS if settings is None else settings)

    @property
    def socket(self) -> Path:
        return self.directory / f".s.PGSQL.{self.port}"

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL for `dbname`, as the superuser, over the Unix socket."""
        host = quote(str(self.directory), safe="")
        return f"postgresql://{SUPERUSER}@/{dbname}?host={host}&port={self.port}"

    def ready(self) -> bool:
        """Whether the server accepts connections now (pg_isready)."""
        pg_isready = _pg_isready(self.bindir)
        probe = [pg_isready, "-q", "-h", str(self.directory), "-p", str(self.port), "-t", "1"]
        return subprocess.run(probe, stdin=subprocess.DEVNULL, check=False).returncode == 0

    def halt(self, timeout: float = 10.0) -> int:
        """Shut the server down as `stop` does, but keep its directory, so that `restart`
        brings the same databases back at the same URL; its exit status."""
        if self.process.poll() is None:
            self._shut_down(timeout)
        return self.process.returncode

    def restart(self, timeout: float = 30.0) -> None:
        """Start the server again after `halt` and return once it accepts connections
        (UnavailableError if it does not within `timeout`)."""
        if self.process.poll() is None:
            raise RuntimeError("the server is running: halt() it first")
        log = self.directory / "server.log"
        self.process = _launch(self.bindir, self.directory, log, _owner(), self.settings)
        _wait_ready(self, log, timeout)

    def stop(self, timeout: float = 10.0) -> int:
        """Shut the server down (fast shutdown: clients are disconnected, then it quits;
        harder signals if it does not), remove its directory and return its exit status
        (0: a clean shutdown). Calling it again only returns the status."""
        if self.process.poll() is None:
            self._shut_down(timeout)
        shutil.rmtree(self.directory, ignore_errors=True)
        return self.process.returncode

    def _shut_down(self, timeout: float) -> None:
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGQUIT, 5.0)):
            self.process.send_signal(sig)
            try:
                self.process.wait(wait)
            except subprocess.TimeoutExpired:
                continue
            return
        self.process.kill()
        self.process.wait()

    def __enter__(self) -> Server:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _pg_isready(bindir: Path) -> str:
    found = shutil.which("pg_isready", path=str(bindir)) or shutil.which("pg_isready")
    if found is None:
        raise UnavailableError(f"pg_isready is neither in {bindir} nor on PATH")
    return found


def _initdb(bindir: Path, data: Path, log: Path, owner: dict[str, Any]) -> None:
    command = [
        str(bindir / "initdb"),
        *("-D", str(data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--locale=C"),
        "--no-sync",
    ]
    with log.open("ab") as out:
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, check=False, **owner
        )
    if done.returncode != 0:
        raise UnavailableError(f"initdb failed with status {done.returncode}: {_tail(log)}")


def _make_directory(owner: dict[str, Any]) -> Path:
    directory = Path(tempfile.mkdtemp(prefix=PREFIX))
    (directory / OWNER_FILE).write_text(f"{os.getpid()}\n")
    if owner:
        os.chown(directory, owner["user"], owner["group"])
    if len(str(directory / f".s.PGSQL.{PORT}")) > MAX_SOCKET_PATH:
        shutil.rmtree(directory)
        raise UnavailableError(
            f"the temporary directory's path is too long for a socket: {directory}"
        )
    return directory


def _launch(
    bindir: Path, directory: Path, log: Path, owner: dict[str, Any], settings: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    """Start `postgres` on the data in `directory` (made by initdb), its socket there."""
    command = [str(bindir / "postgres"), "-D", str(directory / "data")]
    command += ["-k", str(directory), "-p", str(PORT)]
    for name, value in settings.items():
        command += ["-c", f"{name}={value}"]
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # Ctrl-C reaches the tests, which stop it in order
            preexec_fn=_die_with_parent(),  # noqa: PLW1509 (no threads touch locks in it)
            **owner,
        )


def start(
    *, bindir: Path | None = None, timeout: float = 30.0, settings: Mapping[str, str] | None = None
) -> Server:
    """Initialise and start a private server; return once it accepts connections.
    `settings` are laid over SETTINGS (a bench turns durability back on with them).
    Raises UnavailableError (saying why) if there is none to start or it did not come up
    within `timeout` seconds; nothing is left behind then."""
    bindir = bindir or find_bindir()
    owner = _owner()
    _pg_isready(bindir)  # missing: say so before spending a second on initdb
    sweep_stale(Path(tempfile.gettempdir()))
    directory = _make_directory(owner)
    log = directory / "server.log"
    merged = {**SETTINGS, **(settings or {})}
    try:
        _initdb(bindir, directory / "data", log, owner)
        process = _launch(bindir, directory, log, owner, merged)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    server = Server(directory, bindir, process, merged)
    try:
        _wait_ready(server, log, timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: Server, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not server.ready():
        status = server.process.poll()
        if status is not None:
            raise UnavailableError(f"postgres exited with status {status} at start: {_tail(log)}")
        if time.monotonic() > deadline:
            raise UnavailableError(f"postgres did not accept connections within {timeout}s")
        time.sleep(0.02)


if __name__ == "__main__":
    from tests.pg.command import main  # the command line, a module of its own

    sys.exit(main())
