"""A replica's database calls off the loop (crond/daemon/worker.py, offloop.py), on a
real PostgreSQL frozen for real (SIGSTOP: connections open, nothing answered) and on a
listener that accepts and never answers: every call comes back by its deadline, the
loop's `ask` says FAILED and the database unavailable within its own, and the store
works again, on a new connection, once the server goes on."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
import structlog

from crond.clock import SystemClock
from crond.daemon.offloop import QUICK
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED
from crond.daemon.telling import _StoreMemory, _StoreOutbox
from crond.daemon.worker import Worker
from crond.notify.outbox import OutboxItem
from crond.store.base import StateError
from crond.store.pg_conn import Connection
from crond.store.postgres import PostgresStore
from tests.e2e.replicas import frozen
from tests.pg import server as pg


@pytest.fixture
def own_pg(pg_server: pg.Server) -> Iterator[pg.Server]:
    """A PostgreSQL of the test's own, to freeze (pg_server first: only where one starts)."""
    with pg.start() as server:
        yield server


def test_a_call_to_a_frozen_server_is_cut_at_its_deadline(own_pg: pg.Server) -> None:
    store = PostgresStore.open(own_pg.url(), cluster="c", replica="r1")
    worker = Worker("test-db")
    worker.cutter = store.cut
    try:
        worker.submit(store.check_in_place, 0.5).result(timeout=5)
        with frozen(own_pg):
            sent = time.monotonic()
            hung = worker.submit(store.check_in_place, 0.5)
            with pytest.raises(StateError):
                hung.result(timeout=5)
            took = time.monotonic() - sent
        assert 0.4 <= took < 1.5, took
        assert worker.cuts == 1
        worker.submit(store.check_in_place, 5).result(timeout=10)  # a new connection
    finally:
        worker.submit(store.close, 1).result(timeout=5)
        worker.close()


def test_a_connect_to_a_server_that_never_answers_ends_at_libpqs_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        conn = Connection(
            f"postgresql://crond@127.0.0.1:{port}/crond", cluster="c", replica="r1", timeout=2
        )
        worker = Worker("test-connect")
        worker.cutter = conn.cut
        try:
            sent = time.monotonic()
            with pytest.raises(StateError, match="cannot connect"):
                worker.submit(lambda: conn._all("SELECT 1"), 1).result(timeout=10)
            took = time.monotonic() - sent
        finally:
            worker.close()
    assert 1.5 <= took < 4, took  # connect_timeout: 2 s; the cut has no socket to cut yet


async def test_the_loop_asks_a_frozen_database_at_most_a_deadline(own_pg: pg.Server) -> None:
    log = structlog.get_logger()
    url = own_pg.url()
    recorder = StoreRecorder(
        lambda _aside: PostgresStore.open(url, cluster="c", replica="r1"),
        log, SystemClock(), replica="r1",
    )  # fmt: skip
    recorder.open()
    assert recorder.opening is not None
    assert await recorder.opening
    try:
        assert await recorder.ask(lambda store: store.cursors()) == {}
        with frozen(own_pg):
            sent = time.monotonic()
            answer = await recorder.ask(lambda store: store.cursors(), force=True)
            took = time.monotonic() - sent
            assert answer is FAILED
            assert recorder.database() == "unavailable"
            sent = time.monotonic()
            assert await recorder.ask(lambda store: store.cursors()) is FAILED  # not tried
            assert time.monotonic() - sent < 0.1
        assert QUICK <= took < QUICK + 0.5, took
        deadline = time.monotonic() + 10
        while await recorder.ask(lambda store: store.cursors(), force=True) is FAILED:
            assert time.monotonic() < deadline, "the database did not come back"
            await asyncio.sleep(0.1)
        assert recorder.database() == "ok"
    finally:
        recorder.close()


async def test_telling_and_the_start_never_hold_the_loop_on_a_frozen_database(
    own_pg: pg.Server,
) -> None:
    """The notifiers' outbox, the failure streaks and the start's reads are awaited off
    the loop: while the database is frozen the loop keeps turning (a ticker's longest gap
    stays far below the 1 s a call may wait), the outbox's write fails by its deadline,
    and a streak recalled at the start is answered from memory."""
    log = structlog.get_logger()
    url = own_pg.url()
    other = PostgresStore.open(url, cluster="c", replica="r0")
    other.set_meta("streak:hook:backup", '{"failed": 2, "sent": null}')
    other.close()
    recorder = StoreRecorder(
        lambda _aside: PostgresStore.open(url, cluster="c", replica="r1"),
        log, SystemClock(), replica="r1",
    )  # fmt: skip
    recorder.open()
    assert recorder.opening is not None
    assert await recorder.opening
    memory, outbox = _StoreMemory(recorder), _StoreOutbox(recorder)
    await memory.recall()
    item = OutboxItem("notify", "hook", "backup", "job.failed", "{}", time.time())
    assert await outbox.add([item]) is not None  # the database answering: kept
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    try:
        with frozen(own_pg):
            ticking = asyncio.create_task(ticker())
            sent = time.monotonic()
            assert await outbox.add([item]) is None  # not kept: delivery goes on from memory
            assert time.monotonic() - sent < QUICK + 0.5
            assert memory.get("streak:hook:backup") == '{"failed": 2, "sent": null}'
            assert await outbox.pending(10) == []  # the database away: not tried
            assert await recorder.kept() == ({}, {})
            ticking.cancel()
        assert gaps, "the loop never turned"
        assert max(gaps) < 0.5, max(gaps)  # a call waited on the loop: >= QUICK
    finally:
        recorder.close()
