"""Live updates as server-sent events (text/event-stream; /static/app.js listens):

- `/events`: `version` first, then `changed` once a second at most, when what the
  jobs' rows say changed (the page then fetches itself again and swaps its main
  part): a change is seen within 2 s;
- `/follow/KEY/events`: a triggered run's output lines as they come, then `end`.

At most `MAX_STREAMS` streams at once (a newcomer beyond gets 503, and the browser tries
again later); each ends after `LIFETIME_S` (the browser reconnects at once), so no
connection is held for ever. They read what the pages read: no stream asks the daemon
or the store anything of its own.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from crond.web.steer import WATCH_READ_S

if TYPE_CHECKING:
    from crond.web.context import Web

MAX_STREAMS = 32
LIFETIME_S = 300.0
TICK_S = 1.0
_FOLLOW_TICK_S = 0.2
_WATCH_S = WATCH_READ_S
_slots: dict[int, int] = {}  # streams open, by dashboard


def _event(name: str, data: str) -> bytes:
    return f"event: {name}\ndata: {data}\n\n".encode()


async def _bounded(web: Web, body: AsyncIterator[bytes]) -> Response:
    key = id(web)
    if _slots.get(key, 0) >= MAX_STREAMS:
        return PlainTextResponse("too many live pages open; retry later\n", status_code=503)
    _slots[key] = _slots.get(key, 0) + 1

    async def counted() -> AsyncIterator[bytes]:
        try:
            async for chunk in body:
                yield chunk
        finally:
            _slots[key] -= 1

    return StreamingResponse(
        counted(),
        media_type="text/event-stream",
        headers={"x-accel-buffering": "no"},  # nginx: pass each event on at once
    )


async def changes(web: Web, request: Request) -> Response:
    # The version the page was drawn from: a change between its drawing and this
    # stream's first read is told at once.
    since = request.query_params.get("since", "")[:16] or None

    async def body() -> AsyncIterator[bytes]:
        ends = time.monotonic() + LIFETIME_S
        last, first = since, True
        yield b"retry: 1000\n\n"
        while time.monotonic() < ends and not await request.is_disconnected():
            rows = await asyncio.to_thread(web.source.rows, web.clock.now())
            now = rows.version
            if first:  # the stream has read what later changes are compared with
                yield _event("version", now)
            if last is not None and now != last:
                yield _event("changed", now)
            elif not first:
                yield b": tick\n\n"
            first = False
            last = now
            await asyncio.sleep(TICK_S)

    return await _bounded(web, body())


async def lines(web: Web, request: Request) -> Response:
    follow = web.follows.get(request.path_params["key"])
    if follow is None:
        return PlainTextResponse("no such triggered run\n", status_code=404)
    last_id = request.headers.get("last-event-id", "")
    seen = int(last_id) if last_id.isdigit() and len(last_id) < 10 else 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal seen
        ends = time.monotonic() + LIFETIME_S
        yield b"retry: 1000\n\n"
        while time.monotonic() < ends and not await request.is_disconnected():
            follow.wanted_until = time.monotonic() + 2 * _WATCH_S  # a page still looks
            done = follow.done  # read before the lines: none is missed at the end
            for number, stream, line in follow.after(seen):
                data = json.dumps({"stream": stream, "line": line})
                yield f"id: {number + 1}\n".encode() + _event("line", data)
                seen = number + 1
            if done:
                end = {"result": follow.result, "error": follow.error}
                yield _event("end", json.dumps(end))
                return
            await asyncio.sleep(_FOLLOW_TICK_S)

    return await _bounded(web, body())
