"""crond.notify.http when all its connections are taken: a newcomer drops the oldest
connection still sending its head, else the oldest whose client does not take its
answer, never one answered at its client's pace. Real server, real sockets, clients
that hold connections on purpose."""

from __future__ import annotations

import asyncio

from tests.notify.test_http import exchange, get, parse, read_all, serving, until


async def closed_soon(reader: asyncio.StreamReader, within: float = 0.5) -> bool:
    """Whether the server closes this connection (without a word) within `within` s."""
    try:
        async with asyncio.timeout(within):
            return await read_all(reader) == b""
    except TimeoutError:
        return False


async def test_a_newcomer_drops_the_oldest_connection_still_sending_its_head() -> None:
    async with serving(head_timeout=30) as served:
        idle = [await asyncio.open_connection("127.0.0.1", served.port) for _ in range(64)]
        for _, writer in idle[32:]:  # half of them sent half a request line
            writer.write(b"GET /heal")
        # A probe while all 64 are taken: answered; the oldest idle one made room.
        assert (await get(served.port, "/healthz")).status == 503
        closed = await asyncio.gather(*(closed_soon(reader) for reader, _ in idle))
        assert closed == [True] + [False] * 63
        # 200 more, half a request line each: each drops the oldest; probes still answered.
        more = []
        for _ in range(200):
            reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
            writer.write(b"GET /metr")
            more.append((reader, writer))
        answers = await asyncio.gather(*(get(served.port, "/metrics") for _ in range(40)))
        assert [a.status for a in answers] == [200] * 40
        held = [not await closed_soon(reader, 0.2) for reader, _ in idle + more]
        assert sum(held) <= 64  # never more than the cap, whoever comes
        assert held[-24:] == [True] * 24  # the newest stay: the oldest went first
        for _, writer in idle + more:
            writer.close()


async def test_connections_that_sent_their_head_are_never_dropped() -> None:
    """64 requests whose answers are being made: the 65th is closed at once, and each of
    the 64 still gets its answer."""
    release = asyncio.Event()
    called: list[int] = []

    async def slow() -> tuple[int, str, bytes]:
        called.append(1)
        await release.wait()
        return 200, "text/plain", b"made\n"

    async with serving({"/metrics": slow}, head_timeout=30) as served:
        waiting = [
            asyncio.create_task(exchange(served.port, b"GET /metrics HTTP/1.1\r\n\r\n"))
            for _ in range(64)
        ]
        await until(lambda: len(called) == 64, "the 64 heads read")
        assert await exchange(served.port, b"GET /metrics HTTP/1.1\r\n\r\n") == b""
        release.set()
        answers = await asyncio.gather(*waiting)
        assert [parse(raw).body for raw in answers] == [b"made\n"] * 64


async def test_clients_that_do_not_read_their_answer_make_room_too() -> None:
    """64 clients ask for a 16 MB page and never read it: a probe still gets in, in
    place of the oldest of them, well before their write timeout."""
    page = b"x" * (16 << 20)

    def big() -> tuple[int, str, bytes]:
        return 200, "text/plain", page

    def probe() -> tuple[int, str, bytes]:
        return 200, "application/json", b"{}"

    async with serving({"/metrics": big, "/healthz": probe}, write_timeout=30) as served:
        stuck = []
        for _ in range(64):
            reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
            writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")
            stuck.append((reader, writer))
        for _ in range(3):
            async with asyncio.timeout(5):
                assert (await get(served.port, "/healthz")).status == 200
        for _, writer in stuck:
            writer.transport.abort()
