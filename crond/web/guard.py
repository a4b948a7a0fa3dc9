"""The door of every request, before any page (docs/web.md, "Safe by default"):

- the Host header must name this dashboard (the listen address, the loopback names when
  it listens on loopback, the address the connection came in on, or one of `web.hosts`):
  a page of another site whose name was made to point here (DNS rebinding) gets 421;
- only GET, HEAD and POST; a body of at most `MAX_BODY` bytes (413), whatever it claims;
- the user is known (HTTP Basic against `web.users`; 401 otherwise);
- a POST from a page of another origin (its Origin or Referer) is refused (403) before
  its CSRF token is even looked at;
- every answer carries a Content-Security-Policy without inline script, and is neither
  framed, sniffed, cached nor given a referrer.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from structlog.typing import FilteringBoundLogger

from crond.web.auth import Gate

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = 16 * 1024
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def host_name(value: str) -> str | None:
    """The host of a Host header's value (`name`, `name:port`, `[v6]:port`), lowercased;
    None when it is not one."""
    value = value.strip().lower()
    if value.startswith("["):
        inside, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest[1:].isdigit()) or (rest and rest[0] != ":"):
            return None
        return inside
    name, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    return name or None


class Guard:
    """ASGI middleware: the checks above, then `app` with `scope["user"]` set."""

    def __init__(
        self,
        app: App,
        *,
        gate: Gate,
        names: frozenset[str],
        loopback: bool,
        log: FilteringBoundLogger,
    ) -> None:
        self.app = app
        self.gate = gate
        self.names = names | (_LOOPBACK_NAMES if loopback else frozenset())
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        host = host_name(headers.get("host", ""))
        if host is None or not self._ours(host, scope):
            self.log.warning("web.refused", reason="host", host=headers.get("host", "")[:100])
            await _plain(secured, 421, "this dashboard is not served under that name\n")
            return
        if scope["method"] not in ("GET", "HEAD", "POST"):
            await _plain(secured, 405, "method not allowed\n", [(b"allow", b"GET, HEAD, POST")])
            return
        length = headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MAX_BODY:
            await _plain(secured, 413, f"a request body is at most {MAX_BODY} bytes\n")
            return
        user = await self.gate.user_of(headers.get("authorization"))
        if user is None:
            challenge = [(b"www-authenticate", b'Basic realm="crond", charset="UTF-8"')]
            await _plain(secured, 401, "log in with your crond web user\n", challenge)
            return
        if scope["method"] == "POST" and not _same_origin(headers, host):
            self.log.warning(
                "web.refused", reason="origin", by=f"web:{user.name}", path=scope["path"]
            )
            await _plain(secured, 403, "a change must come from this dashboard's own pages\n")
            return
        scope["user"] = user
        await self.app(scope, _bounded(receive), secured)

    def _ours(self, host: str, scope: Scope) -> bool:
        if host in self.names:
            return True
        server = scope.get("server")
        if not server:
            return False
        try:
            return ipaddress.ip_address(host) == ipaddress.ip_address(server[0])
        except ValueError:
            return False


def _same_origin(headers: dict[str, str], host: str) -> bool:
    """A POST's Origin (else Referer), when the browser sent one, names this host."""
    origin = headers.get("origin") or headers.get("referer")
    if not origin:
        return True  # not a browser's cross-site form: the CSRF token decides
    if origin == "null":
        return False
    found = urlsplit(origin).hostname
    return found is not None and found.lower() == host


def _bounded(receive: Receive) -> Receive:
    """`receive`, refusing a body longer than MAX_BODY (a chunked one has no length)."""
    taken = 0

    async def inner() -> Message:
        nonlocal taken
        message = await receive()
        if message["type"] == "http.request":
            taken += len(message.get("body", b""))
            if taken > MAX_BODY:
                raise BodyTooLarge
        return message

    return inner


class BodyTooLarge(Exception):  # noqa: N818  (a fact about the request, said as such)
    """A request body beyond MAX_BODY: the request is cut off."""


async def _plain(
    send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
