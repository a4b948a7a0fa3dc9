"""Sending over HTTP: a webhook's POST and a healthchecks.io ping, through httpx.

Redirects are not followed: a notifier's headers may hold a token, and a redirect could
hand it to another host. A 2xx is delivered; 408, 429 and 5xx (the server is busy or
broken) and connection errors are worth another try (after the `Retry-After` the endpoint
asks for, when it says one, within Delivery's bounds); any other status means the request
itself is wrong, and is given up at once.

An error says what went wrong, in words, and where: `connection refused
(127.0.0.1:18099)`, `name not resolved (hooks.example)`, `timed out after 10s
(hooks.example:443)`, `TLS: certificate verify failed: … (hooks.example)`, `HTTP 500`. The
host and port are not secret (docs/alerting.md); the path and query may hold a token, and
httpx puts the whole URL in its messages, so `str(exc)` is never used: the words come from
the exception's kind and from the system's error below it.
"""

from __future__ import annotations

import os
import socket
import ssl
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit, urlunsplit

from crond.notify.errors import SendError

if TYPE_CHECKING:
    import httpx

_RETRIED_STATUSES: Final = frozenset({408, 429})
PING_SIGNALS: Final = {"start": "/start", "success": "", "fail": "/fail"}


def ping_url(base: str, signal: str, rid: str) -> str:
    """healthchecks.io's URL for `signal` ("start", "success", "fail") of run `rid`:
    `BASE/start?rid=RID`, with the base's own query kept."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/") + PING_SIGNALS[signal]
    query = f"{parts.query}&rid={rid}" if parts.query else f"rid={rid}"
    return urlunsplit((parts.scheme, parts.netloc, path, query, parts.fragment))


async def post(
    client: httpx.AsyncClient,
    url: str,
    content: bytes,
    headers: tuple[tuple[str, str], ...] = (),
    content_type: str = "application/json",
) -> None:
    """POST `content` to `url`; returns once a 2xx came back, else raises SendError."""
    import httpx  # noqa: PLC0415  (only a daemon whose file has webhooks or pings needs it)

    sent = [("content-type", content_type), *headers]
    try:
        # The answer's status and headers only: its body is never read (an endpoint that
        # answers without end must cost nothing; docs/operations.md, "Security"), and the
        # connection is closed, not drained.
        async with client.stream("POST", url, content=content, headers=sent) as response:
            status, answered = response.status_code, response.headers
    except (httpx.InvalidURL, httpx.UnsupportedProtocol):
        raise SendError("not a URL an HTTP request can go to", retry=False) from None
    except httpx.TimeoutException:
        seconds = client.timeout.read or client.timeout.connect or 0.0
        raise SendError(f"timed out after {seconds:g}s ({_endpoint(url)})") from None
    except httpx.HTTPError as exc:
        raise SendError(_failure(exc, url)) from None
    if 200 <= status < 300:
        return
    retry = status >= 500 or status in _RETRIED_STATUSES
    raise SendError(f"HTTP {status}", retry=retry, after=retry_after(answered))


def retry_after(headers: httpx.Headers) -> float | None:
    """`Retry-After` in seconds (its delta-seconds form; an HTTP date is not read), or None."""
    value = headers.get("retry-after", "").strip()
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        return None
    return float(value)


def _failure(exc: BaseException, url: str) -> str:
    """Why a request that did not time out got no answer, with where it went."""
    import httpx  # noqa: PLC0415  (loaded already: the caller caught its error)

    where = _endpoint(url)
    said = _system_reason(_system_error(exc), where)
    if said is not None:
        return said
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"the server closed the connection without a whole answer ({where})"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({where})"
    return f"{type(exc).__name__} ({where})"


def _system_reason(cause: OSError | None, where: str) -> str | None:  # noqa: PLR0911
    # (one return per kind of system error: a table would read no better)
    """The words for the system's error under a failed request; None for none."""
    host = where.rpartition(":")[0]
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"TLS: certificate verify failed: {cause.verify_message} ({host})"
    if isinstance(cause, ssl.SSLError):
        return f"TLS: {(cause.reason or 'handshake failed').lower().replace('_', ' ')} ({where})"
    if isinstance(cause, socket.gaierror):
        if cause.errno in _NOT_FOUND:
            return f"name not resolved ({host})"
        return f"name lookup failed: {_words(cause)} ({host})"
    if isinstance(cause, ConnectionRefusedError):
        return f"connection refused ({where})"
    if isinstance(cause, ConnectionResetError):
        return f"connection reset by the server ({where})"
    if cause is not None and cause.errno:
        return f"{_words(cause)} ({where})"
    return None


# getaddrinfo's "no such name" (EAI_NODATA is not defined on every system).
_NOT_FOUND = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code
)


def _system_error(exc: BaseException) -> OSError | None:
    """The most telling OSError under `exc` (its causes, and the members of an exception
    group: a name with several addresses is tried at each): a TLS or name error, else
    the first with an errno, else the first."""
    found: list[OSError] = []
    stack, seen = [exc], set[int]()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError):
            found.append(current)
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    telling: list[OSError] = [e for e in found if isinstance(e, (ssl.SSLError, socket.gaierror))]
    telling += [e for e in found if e.errno]
    return next(iter(telling or found), None)


def _words(error: OSError) -> str:
    """The system's words for `error` ("No route to host" → "no route to host")."""
    text = error.strerror or (os.strerror(error.errno) if error.errno else "")
    return (text[:1].lower() + text[1:]) if text else type(error).__name__


def _endpoint(url: str) -> str:
    """`host:port` of `url`, the port the scheme's own when none is written."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return "?"
    if port is None:
        port = 443 if parts.scheme.lower() == "https" else 80
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
