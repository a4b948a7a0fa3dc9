"""`python -m tests.pg.server`: a private PostgreSQL by hand (tests/pg/server.py).

With COMMAND, it starts a server, runs COMMAND with DATABASE_URL and the PG* variables
pointing at it, then stops the server and removes its directory; without, it prints the
server's URL and waits for Ctrl-C or SIGTERM. While it serves, `--halt DIR` and
`--restart DIR` (DIR: the server's directory, the host in its URL) ask it to halt its
server and start it again on the same data and socket, for trying what clients do in an
outage (docs/replicas.md "Try replicas on one machine"). The script that started the
server does both (SIGUSR1, SIGUSR2), so the server stays its child: stopped with it,
and never left running. `--which` prints the binaries' directory.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from tests.pg import server as pg

PROG = "python -m tests.pg.server"
ASKS = {"halt": signal.SIGUSR1, "restart": signal.SIGUSR2}
ASK_TIMEOUT = 30.0  # seconds for a halt or a restart to be seen done


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.which:
        return _which()
    for what in ASKS:
        if getattr(args, what) is not None:
            return _ask(Path(getattr(args, what)), what)
    return _serve(args.command[1:] if args.command[:1] == ["--"] else args.command)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Start a private PostgreSQL, run COMMAND against it (DATABASE_URL, "
        "PGHOST, ...), then stop it and remove its files. Without COMMAND: print the URL "
        "and wait for Ctrl-C or SIGTERM.",
    )
    one = parser.add_mutually_exclusive_group()
    one.add_argument("--which", action="store_true", help="only print the binaries' directory")
    one.add_argument("--halt", metavar="DIR", help="halt the server serving in DIR (it waits)")
    one.add_argument("--restart", metavar="DIR", help="start the halted server of DIR again")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run")
    return parser


def _which() -> int:
    try:
        print(pg.find_bindir())
    except pg.UnavailableError as exc:
        print(f"tests.pg.server: {exc}", file=sys.stderr)
        return 2
    return 0


def _serve(command: list[str]) -> int:
    serving: list[pg.Server] = []  # the server, once started: what the asks act on
    signal.signal(signal.SIGTERM, _raise_interrupt)
    for signum in ASKS.values():
        signal.signal(signum, lambda signum, _frame: _on_ask(serving, signum))
    began = time.monotonic()
    try:
        serving.append(pg.start())
    except pg.UnavailableError as exc:
        print(f"tests.pg.server: {exc}", file=sys.stderr)
        return 2
    server = serving[0]
    try:
        print(server.url(), flush=True)
        print(
            f"started in {time.monotonic() - began:.2f}s; for an outage: {PROG} --halt "
            f"{server.directory}, then --restart {server.directory}",
            file=sys.stderr,
            flush=True,
        )
        if not command:
            while True:
                signal.pause()
        # Ctrl-C is the command's (a crond in the foreground of a shell, say): the server
        # lasts as long as the command does. A handler, not SIG_IGN, which it would inherit.
        signal.signal(signal.SIGINT, lambda _signum, _frame: None)
        return subprocess.run(command, env=_environment(server), check=False).returncode
    except KeyboardInterrupt:
        return 130
    finally:
        for signum in ASKS.values():
            signal.signal(signum, signal.SIG_IGN)
        server.stop()


def _environment(server: pg.Server) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": server.url(),
        "PGHOST": str(server.directory),
        "PGPORT": str(server.port),
        "PGUSER": pg.SUPERUSER,
        "PGDATABASE": "postgres",
    }


def _on_ask(serving: list[pg.Server], signum: int) -> None:
    """A halt or restart asked by `--halt`/`--restart` (on the main thread, between two
    steps of whatever it was doing: waiting, or running COMMAND)."""
    if not serving:
        return
    server = serving[0]
    try:
        if signum == ASKS["halt"]:
            server.halt()
        elif server.process.poll() is not None:  # a restart of a running server: no-op
            server.restart()
    except pg.UnavailableError as exc:
        print(f"tests.pg.server: {exc}", file=sys.stderr, flush=True)


def _ask(directory: Path, what: str) -> int:
    """Ask the script serving `directory` to halt or restart its server; 0 once done."""
    owner = pg._read_pid(directory / pg.OWNER_FILE)
    if owner is None or not pg._alive(owner):
        print(f"tests.pg.server: no {PROG} serves {directory}", file=sys.stderr)
        return 2
    try:
        isready = pg._pg_isready(pg.find_bindir())
    except pg.UnavailableError as exc:
        print(f"tests.pg.server: {exc}", file=sys.stderr)
        return 2
    os.kill(owner, ASKS[what])
    deadline = time.monotonic() + ASK_TIMEOUT
    while not _done(what, isready, directory):
        if time.monotonic() > deadline:
            print(f"tests.pg.server: no {what} within {ASK_TIMEOUT:.0f}s", file=sys.stderr)
            return 1
        time.sleep(0.05)
    print("halted" if what == "halt" else "restarted: it accepts connections", file=sys.stderr)
    return 0


def _done(what: str, isready: str, directory: Path) -> bool:
    """Halted: the server gone (its pid file removed, as a clean shutdown's last step);
    restarted: it accepts connections."""
    if what == "halt":
        return not (directory / "data" / "postmaster.pid").exists()
    probe = [isready, "-q", "-h", str(directory), "-p", str(pg.PORT), "-t", "1"]
    return subprocess.run(probe, stdin=subprocess.DEVNULL, check=False).returncode == 0


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
