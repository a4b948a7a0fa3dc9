"""crond.notify.http: a real server on 127.0.0.1 (port 0), real sockets, in the test's
own asyncio loop. Each test checks, at its end, that nothing was raised into the loop
(its exception handler was never called) and that every connection's task is gone."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import socket
import struct
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from crond.notify import http
from crond.notify.http import Route

METRICS = b"# a page\nup 1\n"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    raw: bytes


@dataclass
class Served:
    port: int
    calls: list[str] = field(default_factory=list)


def parse(raw: bytes) -> Answer:
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep, raw[:200]
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, status, _ = status_line.split(" ", 2)
    assert version == "HTTP/1.1"
    headers = {}
    for line in lines:
        name, _, value = line.partition(": ")
        headers[name.lower()] = value
    return Answer(int(status), headers, body, raw)


@asynccontextmanager
async def serving(
    routes: Mapping[str, Route] | None = None, **options: Any
) -> AsyncIterator[Served]:
    """A server on a free port; at the end: no exception reached the loop, and every
    connection task has ended (polled, with a deadline)."""
    loop = asyncio.get_running_loop()
    raised: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: raised.append(context))
    served = Served(0)

    def metrics() -> tuple[int, str, bytes]:
        served.calls.append("metrics")
        return 200, "text/plain; version=0.0.4; charset=utf-8", METRICS

    def healthz() -> tuple[int, str, bytes]:
        served.calls.append("healthz")
        return 503, "application/json", b'{"fresh":false}'

    baseline = len(asyncio.all_tasks())
    server = await http.serve(
        "127.0.0.1", 0, routes or {"/metrics": metrics, "/healthz": healthz}, **options
    )
    served.port = server.sockets[0].getsockname()[1]
    try:
        yield served
    finally:
        await until(lambda: len(asyncio.all_tasks()) == baseline, "connection tasks end")
        server.close()
        await server.wait_closed()
        loop.set_exception_handler(None)
    assert raised == []


async def until(ready: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.01)


async def exchange(port: int, data: bytes, *, eof: bool = False, timeout: float = 5.0) -> bytes:
    """Send `data` (then half-close, with `eof`) and read until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        if eof:
            writer.write_eof()
        async with asyncio.timeout(timeout):
            return await read_all(reader)
    finally:
        writer.close()


async def read_all(reader: asyncio.StreamReader) -> bytes:
    """Everything until EOF; a reset after some bytes ends it too."""
    chunks = []
    try:
        while chunk := await reader.read(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


async def get(port: int, target: str, method: str = "GET", extra: str = "") -> Answer:
    request = f"{method} {target} HTTP/1.1\r\nHost: x\r\n{extra}\r\n"
    return parse(await exchange(port, request.encode()))


async def test_get_answers_the_route_with_its_headers() -> None:
    async with serving() as served:
        answer = await get(served.port, "/metrics")
        assert answer.status == 200
        assert answer.body == METRICS
        assert answer.headers == {
            "content-type": "text/plain; version=0.0.4; charset=utf-8",
            "content-length": str(len(METRICS)),
            "cache-control": "no-store",
            "connection": "close",
        }
        healthz = await get(served.port, "/healthz?verbose=1")  # the query is ignored
        assert (healthz.status, healthz.body) == (503, b'{"fresh":false}')
        assert healthz.headers["content-type"] == "application/json"
        absolute = await get(served.port, "http://127.0.0.1/metrics")
        assert absolute.body == METRICS
        # HTTP/1.0, and bare LF line ends (as a hand-typed request sends them).
        old = parse(await exchange(served.port, b"GET /metrics HTTP/1.0\n\n"))
        assert old.body == METRICS
        assert served.calls == ["metrics", "healthz", "metrics", "metrics"]


async def test_a_big_page_arrives_whole() -> None:
    page = bytes(range(256)) * 12_345  # 3 MB, not a whole number of write pieces

    def big() -> tuple[int, str, bytes]:
        return 200, "application/octet-stream", page

    async with serving({"/big": big}) as served:
        answer = await get(served.port, "/big")
        assert answer.headers["content-length"] == str(len(page))
        assert answer.body == page


async def test_head_sends_the_headers_only() -> None:
    async with serving() as served:
        answer = await get(served.port, "/metrics", "HEAD")
        assert answer.status == 200
        assert answer.headers["content-length"] == str(len(METRICS))
        assert answer.body == b""


async def test_unknown_paths_and_methods() -> None:
    async with serving() as served:
        for target in ("/", "/metrics/", "/nope", "*", "/METRICS"):
            answer = await get(served.port, target)
            assert answer.status == 404, target
            assert answer.headers["connection"] == "close"
        for method in ("POST", "PUT", "DELETE", "OPTIONS", "TRACE", "BREW"):
            answer = await get(served.port, "/metrics", method, "Content-Length: 0\r\n")
            assert answer.status == 405, method
            assert answer.headers["allow"] == "GET, HEAD"
        assert served.calls == []


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"GET /metrics\r\n\r\n",
        b"GET /metrics HTTP/2.0\r\n\r\n",
        b"GET  /metrics HTTP/1.1\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\n: no name\r\n\r\n",
        b"GET /m\xc3\xa9trics HTTP/1.1\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nX: \xff\r\n\r\n",
        b"G\x00T /metrics HTTP/1.1\r\n\r\n",
    ],
)
async def test_a_malformed_head_is_400(request_bytes: bytes) -> None:
    async with serving() as served:
        answer = parse(await exchange(served.port, request_bytes))
        assert answer.status == 400
        assert served.calls == []


async def test_an_oversized_head_is_431() -> None:
    async with serving() as served:
        lines = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"a" * 100) for i in range(90))
        many = b"GET /metrics HTTP/1.1\r\n" + lines + b"\r\n"  # 90 lines of ~115 bytes
        assert parse(await exchange(served.port, many)).status == 431
        one_line = b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n"
        assert parse(await exchange(served.port, one_line)).status == 431
        no_end = b"GET /metrics HTTP/1.1\r\nX: " + b"b" * 100_000  # never a line end
        assert parse(await exchange(served.port, no_end)).status == 431
        # Just under the bound is still served.
        fits = b"GET /metrics HTTP/1.1\r\nX: " + b"c" * (http.MAX_HEAD - 100) + b"\r\n\r\n"
        assert parse(await exchange(served.port, fits)).status == 200
        assert served.calls == ["metrics"]


async def test_a_client_that_sends_nothing_is_closed_at_the_deadline() -> None:
    async with serving(head_timeout=0.3) as served:
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        began = time.monotonic()
        async with asyncio.timeout(5):
            assert await read_all(reader) == b""
        waited = time.monotonic() - began
        writer.close()
        assert 0.25 <= waited < 3, waited


async def test_slowloris_is_closed_at_the_deadline_however_active() -> None:
    async with serving(head_timeout=0.4) as served:
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        began = time.monotonic()
        writer.write(b"GET /metrics HTTP/1.1\r\n")
        with contextlib.suppress(ConnectionError):
            for byte in itertools.cycle(b"X-Slow: 1\r\n"):  # a byte every 20 ms, forever
                if reader.at_eof():
                    break
                assert time.monotonic() - began < 5, "still open after 5 s"
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.02)
        waited = time.monotonic() - began
        writer.close()
        assert 0.35 <= waited < 3, waited
        assert served.calls == []


async def test_half_closed_clients() -> None:
    async with serving(head_timeout=30) as served:
        # The whole request, then our side shut: the answer still comes.
        whole = await exchange(served.port, b"GET /metrics HTTP/1.1\r\n\r\n", eof=True)
        assert parse(whole).body == METRICS
        # Half a request, then shut: answered at once (400), not at the 30 s deadline.
        began = time.monotonic()
        half = await exchange(served.port, b"GET /metrics HTTP/1.1\r\nHost:", eof=True)
        assert parse(half).status == 400
        # Nothing, then shut: closed without a word.
        assert await exchange(served.port, b"", eof=True) == b""
        assert time.monotonic() - began < 5


async def test_a_route_that_raises_is_a_500_and_the_server_goes_on() -> None:
    def broken() -> tuple[int, str, bytes]:
        raise RuntimeError("boom")

    def not_bytes() -> tuple[int, str, bytes]:
        return 200, "text/plain", "a str"  # type: ignore[return-value]

    def bad_status() -> tuple[int, str, bytes]:
        return 999, "text/plain", b""

    def injects() -> tuple[int, str, bytes]:
        return 200, "text/plain\r\nSet-Cookie: x=1", b""

    def fine() -> tuple[int, str, bytes]:
        return 200, "text/plain", b"ok"

    routes = {"/b": broken, "/s": not_bytes, "/st": bad_status, "/i": injects, "/ok": fine}
    async with serving(routes) as served:
        for path in ("/b", "/s", "/st", "/i"):
            answer = await get(served.port, path)
            assert answer.status == 500, path
            assert "set-cookie" not in answer.headers
            assert b"boom" not in answer.raw
        assert (await get(served.port, "/ok")).body == b"ok"


async def test_a_client_that_does_not_read_is_cut_off() -> None:
    big = b"x" * (16 << 20)

    def huge() -> tuple[int, str, bytes]:
        return 200, "text/plain", big

    async with serving({"/big": huge}, write_timeout=0.3) as served:
        loop = asyncio.get_running_loop()
        before = len(asyncio.all_tasks())
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", served.port))
        await loop.sock_sendall(sock, b"GET /big HTTP/1.1\r\n\r\n")
        await until(lambda: len(asyncio.all_tasks()) == before + 1, "the connection's task")
        began = time.monotonic()
        await until(lambda: len(asyncio.all_tasks()) == before, "the writer gives up")
        assert time.monotonic() - began < 3
        received = 0
        try:
            while chunk := await loop.sock_recv(sock, 1 << 20):
                received += len(chunk)
        except ConnectionResetError:
            pass
        sock.close()
        assert received < len(big)


async def test_fuzz_random_bytes_never_hurt_the_server() -> None:
    rng = random.Random(20261201)
    valid = b"GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n"

    def case() -> bytes:
        kind = rng.randrange(4)
        if kind == 0:
            return rng.randbytes(rng.randrange(0, 3000))
        if kind == 1:  # a valid request with a few bytes changed
            data = bytearray(valid)
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            return bytes(data)
        if kind == 2:  # cut short
            return valid[: rng.randrange(len(valid))]
        return b"".join(rng.choice([b"GET ", b"/", b"metrics", b" HTTP/1.1", b"\r\n", b"\n",
                                    b":", b" ", b"\x00", b"\xff", b"?"])
                        for _ in range(rng.randrange(1, 40)))  # fmt: skip

    async def one(data: bytes) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        try:
            writer.write(data)
            if rng.random() < 0.2:  # vanish without a word: a reset
                sock: socket.socket = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            writer.write_eof()
            async with asyncio.timeout(5):
                raw = await read_all(reader)
            if raw:
                answer = parse(raw)
                assert answer.status in (200, 400, 404, 405, 431), raw[:100]
        finally:
            writer.close()

    async with serving(head_timeout=2) as served:
        for _ in range(10):
            await asyncio.gather(*(one(case()) for _ in range(40)))
        assert (await get(served.port, "/metrics")).body == METRICS
