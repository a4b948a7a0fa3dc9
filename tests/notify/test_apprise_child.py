"""Apprise sends run in a bounded child (crond/notify/via_apprise.py, apprise_child.py):
endpoints that answer without end, drip, or send a header without end cost the child,
within its memory and time limits, never the daemon's memory."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from crond.notify import command, via_apprise
from crond.notify.apprise_child import MEMORY_LIMIT
from crond.notify.errors import SendError
from tests.notify.test_delivery import QUICK, SECRET, delivering, go, item
from tests.notify_server import Events, HostileServer, NotifyServer, notifier

pytest.importorskip("apprise")

BODY = '{"text": "backup failed"}'


def rss() -> int:
    """This process's resident memory, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


async def warm_up() -> None:
    """One good send first: what the parent imports and keeps is not counted after."""
    with NotifyServer() as server:
        await via_apprise.send(f"json://127.0.0.1:{server.port}/", "t", BODY, 20)


def test_an_endless_body_fails_on_the_childs_memory_limit_not_the_daemons() -> None:
    async def main() -> None:
        await warm_up()
        before = rss()
        with HostileServer("endless-body") as server:
            began = time.monotonic()
            with pytest.raises(SendError) as caught:
                await via_apprise.send(f"json://127.0.0.1:{server.port}/", "t", BODY, 20)
            took = time.monotonic() - began
        grew = rss() - before
        print(f"endless body: {took:.1f} s, parent RSS {before >> 20} MiB, grew {grew} bytes")
        mib = MEMORY_LIMIT >> 20
        assert caught.value.error == (
            f"apprise: the send passed its {mib} MiB memory limit (the answer is too large)"
        )
        assert not caught.value.retry
        assert took < 20
        assert grew < 4 << 20
        assert command.owned_pids() == set()

    go(main)


def test_a_dripping_answer_is_killed_at_the_deadline_and_argv_holds_no_url() -> None:
    async def main() -> None:
        with HostileServer("drip") as server:
            url = f"json://127.0.0.1:{server.port}/{SECRET}"
            began = time.monotonic()
            sending = asyncio.create_task(via_apprise.send(url, "t", BODY, 6))
            await asyncio.to_thread(server.asked.wait, 6)
            assert server.asked.is_set()  # the request was made: the drip is what lasts
            (pid,) = command.owned_pids()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            with pytest.raises(SendError) as caught:
                await sending
            took = time.monotonic() - began
        assert b"crond.notify.apprise_child" in argv
        assert SECRET.encode() not in argv + environ  # the URL went on stdin
        assert caught.value.error == "apprise: timed out after 6s"
        assert caught.value.retry
        assert 6 <= took < 8
        assert command.owned_pids() == set()

    go(main)


def test_a_header_without_end_is_a_failure_soon() -> None:
    async def main() -> None:
        await warm_up()
        before = rss()
        with HostileServer("endless-header") as server:
            began = time.monotonic()
            with pytest.raises(SendError) as caught:
                await via_apprise.send(f"json://127.0.0.1:{server.port}/", "t", BODY, 20)
            took = time.monotonic() - began
            assert server.requests >= 1
        assert caught.value.error == "apprise reported a failure"  # http.client: 64 KiB
        assert took < 20
        assert rss() - before < 4 << 20

    go(main)


def test_delivery_gives_up_an_endless_body_at_once() -> None:
    async def main() -> None:
        events = Events()
        with HostileServer("endless-body") as server:
            spec = notifier("mail", "apprise", f"json://127.0.0.1:{server.port}/")
            async with delivering({"mail": spec}, events=events, try_timeout=20, **QUICK) as d:
                d.put(item("mail"))
                (failed,) = await events.wait("notify.failed", timeout=25)
            assert server.requests == 1  # not tried again: the endpoint's doing
        assert "memory limit" in failed["error"]

    go(main)


def test_a_deadline_before_apprise_is_even_loaded_kills_the_child() -> None:
    async def main() -> None:
        with NotifyServer() as server:
            url = f"json://127.0.0.1:{server.port}/"
            with pytest.raises(SendError) as caught:
                await via_apprise.send(url, "t", BODY, 0.001)
        assert caught.value.error == "apprise: timed out after 0.001s"
        assert server.requests() == []

    go(main)
