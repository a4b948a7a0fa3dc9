"""A webhook's answer is read for its status and headers only, and the headers to the
HTTP library's bound (h11: 16 KiB): a header line without end is a failed try soon, not
memory (crond/notify/webhook.py)."""

from __future__ import annotations

import time

from tests.notify.test_delivery import QUICK, delivering, go, item
from tests.notify_server import Events, HostileServer, notifier


def test_a_header_without_end_fails_the_try_soon() -> None:
    async def main() -> None:
        events = Events()
        with HostileServer("endless-header") as server:
            hook = notifier("hook", "webhook", f"http://127.0.0.1:{server.port}/hook")
            began = time.monotonic()
            async with delivering({"hook": hook}, events=events, **{**QUICK, "window": 0.1}) as d:
                d.put(item())
                (failed,) = await events.wait("notify.failed")
            took = time.monotonic() - began
        said = f"the server closed the connection without a whole answer (127.0.0.1:{server.port})"
        assert failed["error"] == said
        assert took < 5  # refused at the bound, not at the try's 10 s

    go(main)
