"""A real HTTP server on loopback that records every request: the other end of webhooks,
pings and Apprise's json:// in the notifier tests (and the daemon's end-to-end tests).

`NotifyServer(up=False)` holds its port without listening (a connection is refused, as
with a server that is down) until `up()`. `answer(path, ...)` chooses the status and a
delay for a path (or "*": any); `requests()` and `wait_for()` read what came.

Beside it, what the notifier tests share: jobs and notifiers built as the loader builds
them, a structlog logger that keeps every event (`Events`), and an in-memory Outbox and
Memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import structlog
from structlog.typing import FilteringBoundLogger

from crond.config.loaded import LoadedJob, NotifierKind, NotifierSpec
from crond.config.model import Job
from crond.notify.outbox import OutboxItem, StoredItem

_BODY_LIMIT = 1 << 20


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: bytes
    at: float = field(default=0.0, compare=False)  # time.monotonic() when it came

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class _Answer:
    status: int = 200
    delay: float = 0.0
    count: int | None = None  # this many requests, then the answer before it
    headers: tuple[tuple[str, str], ...] = ()


class NotifyServer:
    def __init__(self, *, up: bool = True) -> None:
        self._lock = threading.Condition()
        self._requests: list[Request] = []
        self._answers: dict[str, list[_Answer]] = {}
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self), False)
        self._server.daemon_threads = True
        self._server.server_bind()  # the port is ours from now on; listening comes at up()
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        if up:
            self.up()

    def up(self) -> None:
        """Start listening (on the port held since the start)."""
        if self._thread is None:
            self._server.server_activate()
            # A short poll: close() waits up to one for the serving thread to notice.
            serve = lambda: self._server.serve_forever(poll_interval=0.02)  # noqa: E731
            self._thread = threading.Thread(target=serve, daemon=True)
            self._thread.start()

    def answer(
        self,
        path: str = "*",
        *,
        status: int = 200,
        delay: float = 0.0,
        count: int | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """Answer requests to `path` ("*": any without an answer of its own) with
        `status` (and `headers`), after `delay` seconds; with `count`, only the next
        `count` of them."""
        with self._lock:
            self._answers.setdefault(path, []).append(_Answer(status, delay, count, headers))

    def requests(self, path: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self._requests if path is None or r.path == path]

    def wait_for(self, count: int, path: str | None = None, timeout: float = 10.0) -> list[Request]:
        """The first `count` requests (to `path`) once they came; AssertionError after
        `timeout` seconds without them."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                found = [r for r in self._requests if path is None or r.path == path]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(found)} of {count} requests came to {path}")
                self._lock.wait(left)

    async def arrived(
        self, count: int, path: str | None = None, timeout: float = 10.0
    ) -> list[Request]:
        """`wait_for` from a coroutine, without blocking its event loop."""
        return await asyncio.to_thread(self.wait_for, count, path, timeout)

    def close(self) -> None:
        self._closing.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()

    def __enter__(self) -> NotifyServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the handler's side ----------------------------------------------------------

    def _record(self, request: Request) -> _Answer:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()
            return self._choose(request.path)

    def _choose(self, path: str) -> _Answer:
        for key in (path, "*"):
            answers = self._answers.get(key)
            while answers:
                answer = answers[-1]
                if answer.count is None:
                    return answer
                if answer.count > 0:
                    answer.count -= 1
                    return answer
                answers.pop()
        return _Answer()


def _handler(server: NotifyServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            parts = urlsplit(self.path)
            length = min(int(self.headers.get("content-length") or 0), _BODY_LIMIT)
            data = self.rfile.read(length) if length else b""
            request = Request(
                self.command,
                parts.path,
                parse_qs(parts.query, keep_blank_values=True),
                {name.lower(): value for name, value in self.headers.items()},
                data,
                time.monotonic(),
            )
            answer = server._record(request)
            if answer.delay and server._closing.wait(answer.delay):
                return
            self.send_response(answer.status)
            for name, value in answer.headers:
                self.send_header(name, value)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        do_GET = do_POST = do_PUT = do_HEAD = _any  # noqa: N815  (http.server's names)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the test reads requests()

    return Handler


# -- shared by the notifier tests --------------------------------------------------


def job(name: str = "backup", ping: str | None = None, **fields: Any) -> LoadedJob:
    settings = Job.model_validate({"every": "1h", "command": "true", **fields})
    return LoadedJob(name, settings, ping=ping)


def notifier(
    name: str,
    kind: NotifierKind,
    target: str | tuple[str, ...],
    *,
    headers: tuple[tuple[str, str], ...] = (),
    repeat: timedelta = timedelta(hours=1),
) -> NotifierSpec:
    return NotifierSpec(name, kind, target, headers, repeat, f"{kind} {name}")


class Events:
    """A structlog logger keeping every event with its level (debug too)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        wrapper = structlog.make_filtering_bound_logger(logging.NOTSET)
        self.log = cast(
            FilteringBoundLogger,
            structlog.wrap_logger(self, processors=[], wrapper_class=wrapper),
        )

    def _record(self, level: str, event: dict[str, Any]) -> None:
        with self._changed:
            self.events.append({"level": level, **event})
            self._changed.notify_all()

    def debug(self, **event: Any) -> None:
        self._record("debug", event)

    def info(self, **event: Any) -> None:
        self._record("info", event)

    def warning(self, **event: Any) -> None:
        self._record("warning", event)

    def error(self, **event: Any) -> None:
        self._record("error", event)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == name]

    async def wait(self, name: str, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The `name` events once there are `count` of them (polled: the event loop runs)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.named(name)) < count:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{len(self.named(name))} of {count} {name} events")
            await asyncio.sleep(0.005)
        return self.named(name)

    def text(self) -> str:
        return "\n".join(repr(e) for e in self.events)


class ListOutbox:
    """An Outbox in a dict, recording each call."""

    def __init__(self) -> None:
        self.items: dict[int, OutboxItem] = {}
        self.next_id = 1
        self.adds: list[int] = []  # the size of each add (one write each)
        self.done_ids: list[int] = []

    def add(self, items: Sequence[OutboxItem]) -> Awaitable[list[int] | None]:
        """Written when called, as the SQLite store's are."""
        ids = []
        for item in items:
            self.items[self.next_id] = item
            ids.append(self.next_id)
            self.next_id += 1
        self.adds.append(len(items))
        return _answer(ids)

    async def pending(self, limit: int) -> list[StoredItem]:
        return [StoredItem(i, item) for i, item in sorted(self.items.items())][:limit]

    def done(self, ids: Sequence[int]) -> None:
        for i in ids:
            self.items.pop(i, None)
            self.done_ids.append(i)


async def _answer(ids: list[int]) -> list[int] | None:
    return ids


class DictMemory:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class HostileServer:
    """A real HTTP server on loopback that answers every request badly, on purpose:
    `endless-body` (a 200 whose body never ends), `drip` (a 200 whose body comes a byte
    every 0.2 s, forever), `endless-header` (a header line that never ends). `requests`
    counts the requests read (the first 64 KiB of each)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests = 0
        self.asked = threading.Event()  # set at the first request
        self._closing = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed
            while True:
                conn, _ = self._listener.accept()
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # the client gave up: that is the point
            conn.recv(65536)
            self.requests += 1
            self.asked.set()
            if self.mode == "endless-header":
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Big: ")
                filler = b"y" * 65536
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
                filler = b"x" * (1 if self.mode == "drip" else 65536)
            while not self._closing.is_set():
                conn.sendall(filler)
                if self.mode == "drip":
                    self._closing.wait(0.2)

    def close(self) -> None:
        self._closing.set()
        self._listener.close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
