"""Start `crond web`: read the file and the users, bind the address, serve with uvicorn
until SIGTERM or SIGINT. Bounded: at most `MAX_CONNECTIONS` connections and requests at
once (uvicorn answers 503 beyond), headers of at most 16 KiB, idle keep-alive 5 s."""

from __future__ import annotations

import socket
from pathlib import Path

import uvicorn
from structlog.typing import FilteringBoundLogger

from crond.clock import SystemClock
from crond.config.address import split_address
from crond.config.loaded import LoadedConfig
from crond.config.web import is_loopback
from crond.web import steer
from crond.web.app import build
from crond.web.auth import Gate, UsersError, read_users
from crond.web.context import Web
from crond.web.state import Source

MAX_CONNECTIONS = 64
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})  # noqa: S104  (names, compared only)


class WebError(Exception):
    """`crond web` cannot start; the message says why and what to do."""


def prepare(
    path: Path,
    cfg: LoadedConfig,
    listen: str | None,
    state_dir: str | None,
    log: FilteringBoundLogger,
) -> tuple[Web, socket.socket, frozenset[str], bool]:
    """The dashboard of `cfg`, its bound socket, the Host names it answers, whether it
    listens on loopback only. Raises WebError."""
    settings = cfg.config.web
    address = listen or settings.listen
    host, port = split_address(address)
    loopback = is_loopback(host)
    if settings.users is None and not loopback:
        raise WebError(
            f"{address} is reachable from other hosts: set web.users (an htpasswd file with "
            "bcrypt hashes) in the file first, or listen on 127.0.0.1"
        )
    users = None
    if settings.users is not None:
        try:
            users = read_users(Path(settings.users))
        except UsersError as exc:
            raise WebError(str(exc)) from None
    names = {h.strip("[]").lower() for h in settings.hosts}
    if host not in _WILDCARDS:
        names.add(host.lower())
    if not loopback:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    sock = _bind(host, port)
    daemon = cfg.daemon
    web = Web(
        source=Source(path, cfg, state_dir),
        gate=Gate(users, frozenset(settings.operators)),
        socket=steer.socket_of(
            getattr(daemon, "control_socket", None), state_dir, daemon.state_dir
        ),
        log=log,
        clock=SystemClock(),
    )
    return web, sock, frozenset(names), loopback


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(MAX_CONNECTIONS)  # from `web.serving` on, a browser waits, not refused
    except OSError as exc:
        sock.close()
        raise WebError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def serve(web: Web, sock: socket.socket, names: frozenset[str], loopback: bool) -> None:
    app = build(web, names=names, loopback=loopback)
    config = uvicorn.Config(
        app,
        limit_concurrency=MAX_CONNECTIONS,
        backlog=MAX_CONNECTIONS,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=2,  # live streams would hold a stop for minutes
        h11_max_incomplete_event_size=16 * 1024,
        server_header=False,
        access_log=False,
        log_config=None,
        log_level="warning",
        lifespan="off",
        proxy_headers=False,
        ws="none",
    )
    # The jobs' next fires are computed once here, as the daemon does at load (10,000
    # jobs: ~0.2 s), not by the first page asked for.
    web.source.rows(web.clock.now())
    bound = sock.getsockname()
    shown = f"[{bound[0]}]:{bound[1]}" if ":" in bound[0] else f"{bound[0]}:{bound[1]}"
    web.log.info(
        "web.serving",
        address=shown,
        users=web.gate.users is not None,
        socket=str(web.socket) if web.socket else None,
    )
    uvicorn.Server(config).run(sockets=[sock])
    web.log.info("web.stopped")
