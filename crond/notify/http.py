"""A minimal HTTP/1.1 server for `daemon.metrics`: GET /metrics and GET /healthz.

It runs on the daemon's own asyncio loop, not in a thread: a stuck loop answers no
scrape and no probe, which is what Prometheus's `up` and a Kubernetes probe should see.
A route is a function called on the loop; it answers (status, content type, body), or
an awaitable of that (a long answer made in slices that let the loop run between them).
A body may be a sequence of byte strings, written one after the other.

One request per connection: the head (request line and headers) is read, the answer is
written with `Connection: close`, and the connection is closed. No request body is read.
Everything a client can make it do is bounded, since crond runs as root and the port may
be reachable by anyone on the network:

- the head is at most 8 KiB (larger: 431) and must arrive within `head_timeout` seconds
  of the connection (5 s; otherwise it is closed without an answer: a slowloris client
  holds a connection that long at most);
- the answer must be taken within `write_timeout` seconds (a client that stops reading
  is cut off);
- at most `max_connections` (64) are served at once. A connection that comes when all
  are taken drops the oldest one still sending its head, so idle or dripping clients,
  however many, cannot keep a probe out; failing that, the oldest whose client is not
  taking its answer as fast as it is written (bytes wait in the transport); failing
  that (every one is being answered at the client's pace), the newcomer is closed at
  once.

GET and HEAD of a route's path answer the route (the query string is ignored); other
paths 404; other methods on a route's path 405; a head that is not HTTP/1.x, 400. A
route that raises answers 500 and is logged by its exception's type; the server goes on.
Nothing a client sends raises into the loop: each connection's task catches what it
can hit, and ends with the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus
from urllib.parse import urlsplit

from structlog.typing import FilteringBoundLogger

Body = bytes | Sequence[bytes]
Answer = tuple[int, str, Body]
Route = Callable[[], Answer | Awaitable[Answer]]

MAX_HEAD = 8192  # bytes of request line and headers
HEAD_TIMEOUT = 5.0  # seconds from the connection to the end of the head
WRITE_TIMEOUT = 10.0  # seconds to take the whole answer
MAX_CONNECTIONS = 64
CHUNK = 65536  # bytes written at a time

_REQUEST_LINE = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP/1\.[0-9]")
_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+:")
_ALLOWED = "GET, HEAD"


class _BadRequestError(Exception):
    """The head is not an HTTP/1.x request (400), or too large (431)."""

    def __init__(self, status: HTTPStatus) -> None:
        super().__init__(status.phrase)
        self.status = status


async def serve(
    host: str,
    port: int,
    routes: Mapping[str, Route],
    *,
    head_timeout: float = HEAD_TIMEOUT,
    write_timeout: float = WRITE_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
    log: FilteringBoundLogger | None = None,
) -> asyncio.Server:
    """Listen on host:port (port 0: any free one; `server.sockets` says which) and serve
    `routes` (path -> route) until the server is closed. Raises OSError when the address
    cannot be bound."""
    handler = _Handler(dict(routes), head_timeout, write_timeout, max_connections, log)
    return await asyncio.start_server(handler.connected, host, port, limit=MAX_HEAD)


class _Handler:
    def __init__(
        self,
        routes: dict[str, Route],
        head_timeout: float,
        write_timeout: float,
        max_connections: int,
        log: FilteringBoundLogger | None,
    ) -> None:
        self.routes = routes
        self.head_timeout = head_timeout
        self.write_timeout = write_timeout
        self.max_connections = max_connections
        self.log = log
        # Every connection served now, oldest first.
        self.served: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        # Those still reading their head, oldest first: the ones a newcomer may drop.
        self.heads: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    async def connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection, from accept to close. Never raises."""
        if len(self.served) >= self.max_connections and not self._make_room():
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None  # a connection is served in a task of its own
        self.served[task] = writer
        self.heads[task] = writer
        try:
            answer = await self._answer(reader, task)
            if answer is not None:
                await self._send(writer, answer)
        except asyncio.CancelledError:
            # Dropped for a newcomer, or the loop is ending. Ending normally rather than
            # cancelled keeps asyncio's own callback on this task (streams.py) from raising.
            pass
        except Exception as exc:  # noqa: BLE001  # a connection's trouble stays with it
            if self.log is not None:
                self.log.warning("http.connection_failed", error=type(exc).__name__)
        finally:
            self.served.pop(task, None)
            self.heads.pop(task, None)
            writer.close()  # a no-op once closed

    def _make_room(self) -> bool:
        """Cut off the oldest connection still reading its head (it would be at its
        deadline anyway), else the oldest whose client lags behind its answer. False
        when there is none of either."""
        if self.heads:
            task = next(iter(self.heads))
        else:
            lagging = (t for t, w in self.served.items() if w.transport.get_write_buffer_size())
            found = next(lagging, None)
            if found is None:
                return False
            task = found
        writer = self.served.pop(task)
        self.heads.pop(task, None)
        writer.transport.abort()
        task.cancel()
        return True

    async def _answer(self, reader: asyncio.StreamReader, task: asyncio.Task[None]) -> Body | None:
        """What to send back, or None to close without a word."""
        try:
            async with asyncio.timeout(self.head_timeout):
                head = await _read_head(reader)
            self.heads.pop(task, None)  # its head is in: no longer the one to drop
            if head is None:
                return None  # closed before a request line: nothing to answer
            method, target = _parse(head)
        except TimeoutError:
            return None
        except _BadRequestError as exc:
            return _response(exc.status, b"", head_only=False)
        path = _path(target)
        route = self.routes.get(path)
        if route is None:
            return _response(HTTPStatus.NOT_FOUND, b"", head_only=method == "HEAD")
        if method not in ("GET", "HEAD"):
            return _response(HTTPStatus.METHOD_NOT_ALLOWED, b"", False, [("Allow", _ALLOWED)])
        return await self._call(path, route, head_only=method == "HEAD")

    async def _call(self, path: str, route: Route, head_only: bool) -> Body:
        try:
            answer = route()
            if inspect.isawaitable(answer):
                answer = await answer
            status, content_type, body = answer
            return _response(HTTPStatus(status), body, head_only, content_type=content_type)
        except Exception as exc:  # noqa: BLE001  # a broken route is a 500, not a dead server
            if self.log is not None:
                self.log.error("http.route_failed", path=path, error=type(exc).__name__)
            return _response(HTTPStatus.INTERNAL_SERVER_ERROR, b"", head_only)

    async def _send(self, writer: asyncio.StreamWriter, data: Body) -> None:
        """Write `data` and close; a client that does not take it in time (or is gone)
        is cut off."""
        try:
            async with asyncio.timeout(self.write_timeout):
                # In pieces: the transport copies what the socket does not take at once,
                # so a slow reader holds one piece of its own, not a copy of the page.
                for part in [data] if isinstance(data, bytes) else data:
                    view = memoryview(part)
                    for start in range(0, len(view), CHUNK):
                        writer.write(view[start : start + CHUNK])
                        await writer.drain()
                    # drain() returns without a turn of the loop while the client keeps
                    # up: a turn between two parts, or a 22 MB page goes out in one go.
                    await asyncio.sleep(0)
                writer.close()
                await writer.wait_closed()
        except (TimeoutError, OSError):
            writer.transport.abort()


async def _read_head(reader: asyncio.StreamReader) -> list[str] | None:
    """The head's lines, without the blank line that ends it; None when the client sent
    nothing at all. Raises _BadRequestError."""
    lines: list[str] = []
    size = 0
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if not lines and not exc.partial.strip():
                return None
            raise _BadRequestError(HTTPStatus.BAD_REQUEST) from None
        except asyncio.LimitOverrunError:
            raise _BadRequestError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE) from None
        size += len(line)
        if size > MAX_HEAD:
            raise _BadRequestError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
        text = line.rstrip(b"\r\n")
        if not text:
            if lines:
                return lines
            continue  # blank lines before the request line are allowed (RFC 9112 2.2)
        if not text.isascii():
            raise _BadRequestError(HTTPStatus.BAD_REQUEST)
        lines.append(text.decode("ascii"))


def _parse(head: list[str]) -> tuple[str, str]:
    """(method, target) of a head; raises _BadRequestError."""
    request = _REQUEST_LINE.fullmatch(head[0])
    if request is None or not all(_HEADER.match(line) for line in head[1:]):
        raise _BadRequestError(HTTPStatus.BAD_REQUEST)
    return request[1], request[2]


def _path(target: str) -> str:
    if target.startswith("/"):
        return target.partition("?")[0]
    if target.startswith(("http://", "https://")):  # absolute form (RFC 9112 3.2.2)
        with contextlib.suppress(ValueError):
            return urlsplit(target).path or "/"
    return ""  # "*" and the rest: no route has that path


def _response(
    status: HTTPStatus,
    body: Body,
    head_only: bool,
    extra: list[tuple[str, str]] | None = None,
    content_type: str = "text/plain; charset=utf-8",
) -> Body:
    """The head and the body: one byte string, or the head and then the body's parts."""
    parts = [body] if isinstance(body, bytes) else list(body)
    if not any(parts) and status >= 400:
        parts = [f"{status.value} {status.phrase}\n".encode()]
    if (
        not all(isinstance(part, bytes) for part in parts)
        or "\n" in content_type
        or ("\r" in content_type)
    ):
        raise TypeError("a route answers (status, content type, bytes or a list of them)")
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(sum(len(part) for part in parts))),
        ("Cache-Control", "no-store"),
        ("Connection", "close"),
        *(extra or []),
    ]
    lines = [f"HTTP/1.1 {status.value} {status.phrase}", *(f"{k}: {v}" for k, v in headers)]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if head_only:
        return head
    if len(parts) == 1:
        return head + parts[0]
    return [head, *parts]
