"""Delivery against real endpoints: a loopback HTTP server (tests/notify_server.py), real
notifier commands, Apprise's json:// (crond/notify/delivery.py and its senders)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from crond.clock import FakeClock, SystemClock
from crond.config.loaded import NotifierSpec
from crond.notify import command
from crond.notify.delivery import Delivery
from crond.notify.outbox import OutboxItem
from crond.notify.teller import Teller
from crond.run.attempt import Outcome, RunResult
from tests.notify_server import Events, ListOutbox, NotifyServer, job, notifier

SECRET = "s3cr3t-t0ken"
QUICK: dict[str, Any] = {"first_retry": 0.05, "max_retry": 0.2, "window": 5.0}


def item(notifier_name: str = "hook", n: int = 0, *, created: float | None = None) -> OutboxItem:
    body = json.dumps({"event": "failed", "job": "backup", "run_id": f"r{n}", "outcome": "failed",
                       "exit_code": 1, "text": f"backup failed #{n}"})  # fmt: skip
    at = time.time() if created is None else created
    return OutboxItem("notify", notifier_name, "backup", "failed", body, at)


def go(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 30))


@asynccontextmanager
async def delivering(
    notifiers: dict[str, NotifierSpec],
    pings: dict[str, str] | None = None,
    *,
    events: Events | None = None,
    outbox: ListOutbox | None = None,
    grace: float = 0.0,
    results: list[tuple[str, str]] | None = None,
    **tunables: Any,
) -> AsyncIterator[Delivery]:
    log = (events or Events()).log
    on_result = None if results is None else (lambda n, r: results.append((n, r)))
    delivery = Delivery(log, outbox=outbox, on_result=on_result, **tunables)
    delivery.configure(notifiers, pings or {})
    task = asyncio.create_task(delivery.run())
    try:
        yield delivery
    finally:
        await delivery.aclose(grace)
        await asyncio.wait_for(task, 10)


def no_secret_logged(events: Events) -> None:
    # (The host and port are not secret, and errors name them: the path and query may be.)
    text = events.text()
    assert SECRET not in text
    assert "/hook" not in text
    assert "u:" not in text


def test_a_webhook_gets_the_body_and_headers_once() -> None:
    async def main() -> None:
        events, results = Events(), list[tuple[str, str]]()
        with NotifyServer() as server:
            hook = notifier("hook", "webhook", f"{server.url}/hook?token={SECRET}",
                            headers=(("Authorization", f"Bearer {SECRET}"),))  # fmt: skip
            async with delivering({"hook": hook}, events=events, results=results) as delivery:
                delivery.put(item())
                sent = await events.wait("notify.sent")
            (request,) = server.requests()
        assert request.method == "POST"
        assert request.path == "/hook"
        assert request.query == {"token": [SECRET]}
        assert request.headers["authorization"] == f"Bearer {SECRET}"
        assert request.headers["content-type"] == "application/json"
        assert request.json()["text"] == "backup failed #0"
        assert sent == [{"level": "info", "event": "notify.sent", "notifier": "hook",
                         "job": "backup", "job_event": "failed", "tries": 1}]  # fmt: skip
        assert results == [("hook", "sent")]
        no_secret_logged(events)

    go(main)


def test_retried_until_the_server_comes_up() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer(up=False) as server:
            hook = notifier("hook", "webhook", f"{server.url}/hook")
            async with delivering({"hook": hook}, events=events, **QUICK) as delivery:
                delivery.put(item())
                await asyncio.sleep(0.3)  # refused meanwhile: some tries are spent
                assert events.named("notify.sent") == []
                server.up()
                (sent,) = await events.wait("notify.sent")
            assert len(server.requests()) == 1
        assert sent["tries"] >= 2
        assert events.named("notify.failed") == []

    go(main)


def test_a_later_notification_waits_behind_one_that_waits_for_its_retry() -> None:
    # A receiver that was down hears `failed` before the `recovered` that ends it.
    async def main() -> None:
        events = Events()
        with NotifyServer() as server:
            server.answer("/hook", status=503, count=1)  # the first try: "down"
            hook = notifier("hook", "webhook", f"{server.url}/hook")
            slow = {**QUICK, "first_retry": 0.5}
            async with delivering({"hook": hook}, events=events, **slow) as delivery:
                delivery.put(item(n=1))
                await events.wait("notify.retry")  # r1 waits for its retry
                delivery.put(item(n=2))  # could go now, but r1 is older
                await events.wait("notify.sent", count=2)
            assert [r.json()["run_id"] for r in server.requests("/hook")] == ["r1", "r1", "r2"]

    go(main)


def test_a_429_with_retry_after_is_tried_again_no_sooner_than_asked() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer() as server:
            server.answer("/hook", status=429, count=1, headers=(("Retry-After", "1"),))
            hook = notifier("hook", "webhook", f"{server.url}/hook")
            async with delivering({"hook": hook}, events=events, **QUICK) as delivery:
                delivery.put(item())
                (retry,) = await events.wait("notify.retry")
                await events.wait("notify.sent")
            first, second = server.requests("/hook")
        assert retry["delay_s"] == 0.2  # QUICK's max_retry bounds what the endpoint asks
        assert second.at - first.at >= 0.2

    go(main)


def test_5xx_408_429_are_retried_a_4xx_or_redirect_is_not() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer() as server:
            server.answer("/busy", status=503, count=1)
            server.answer("/busy", status=429, count=1)
            server.answer("/busy", status=408, count=1)
            server.answer("/wrong", status=404)
            server.answer("/moved", status=302)
            specs = {
                name: notifier(name, "webhook", f"{server.url}/{name}")
                for name in ("busy", "wrong", "moved")
            }
            async with delivering(specs, events=events, **QUICK) as delivery:
                for name in specs:
                    delivery.put(item(name))
                (sent,) = await events.wait("notify.sent")
                failed = await events.wait("notify.failed", 2)
                await asyncio.sleep(0.3)  # a retry would come by now
            assert len(server.requests("/busy")) == 4
            assert len(server.requests("/wrong")) == 1
            assert len(server.requests("/moved")) == 1
        assert sent["tries"] == 4
        assert {(f["notifier"], f["error"]) for f in failed} == {
            ("wrong", "HTTP 404"), ("moved", "HTTP 302")}  # fmt: skip
        assert len(events.named("notify.failed")) == 2

    go(main)


def test_given_up_after_the_window_with_one_error_and_no_secret() -> None:
    async def main() -> None:
        events, results = Events(), list[tuple[str, str]]()
        with NotifyServer() as server, NotifyServer(up=False) as down:
            server.answer(status=500)
            specs = {
                "hook": notifier("hook", "webhook", f"{server.url}/hook/{SECRET}",
                                 headers=(("X-Token", SECRET),)),
                "gone": notifier("gone", "webhook", f"http://u:{SECRET}@127.0.0.1:{down.port}/hook"),
            }  # fmt: skip
            # A window of 1 s: room for a second try after a first one that a busy machine
            # (the suite's own workers) makes slow.
            tunables = {**QUICK, "window": 1.0}
            async with delivering(specs, events=events, results=results, **tunables) as d:
                d.put(item("hook"))
                d.put(item("gone"))
                failed = await events.wait("notify.failed", 2)
                await asyncio.sleep(0.3)
            assert 2 <= len(server.requests()) <= 8  # backoff: 50, 100, 200, 200... ms
        assert len(events.named("notify.failed")) == 2
        by_name = {f["notifier"]: f for f in failed}
        assert by_name["hook"] == {
            "level": "error", "event": "notify.failed", "notifier": "hook", "job": "backup",
            "job_event": "failed", "error": "HTTP 500",
        }  # fmt: skip
        assert by_name["gone"]["error"] == f"connection refused (127.0.0.1:{down.port})"
        assert sorted(results) == [("gone", "failed"), ("hook", "failed")]
        no_secret_logged(events)

    go(main)


def _self_signed(directory: Path) -> ssl.SSLContext:
    """A server's TLS context with a certificate no client trusts (made by openssl)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to make a certificate with")
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


@contextmanager
def tls_server(context: ssl.SSLContext) -> Iterator[int]:
    """A loopback port that answers every connection with a TLS handshake (and nothing
    more): the other end of a webhook whose certificate does not verify."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    closing = threading.Event()

    def serve() -> None:
        while not closing.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn, contextlib.suppress(OSError):
                conn.settimeout(5)
                context.wrap_socket(conn, server_side=True).close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        closing.set()
        thread.join(5)
        listener.close()


def test_a_failed_delivery_says_why_and_where_without_the_url(tmp_path: Path) -> None:
    context = _self_signed(tmp_path)

    async def main() -> None:
        events = Events()
        with (
            NotifyServer(up=False) as down,
            NotifyServer() as slow,
            tls_server(context) as tls_port,
        ):
            slow.answer(delay=3)
            specs = {
                "refused": f"http://127.0.0.1:{down.port}/hook/{SECRET}?k={SECRET}",
                "unknown": f"https://u:{SECRET}@crond-hooks.invalid/hook/{SECRET}",
                "slow": f"{slow.url}/hook/{SECRET}",
                "tls": f"https://localhost:{tls_port}/hook?token={SECRET}",
            }
            notifiers = {name: notifier(name, "webhook", url) for name, url in specs.items()}
            tunables = {**QUICK, "window": 1.2, "try_timeout": 0.5}
            async with delivering(notifiers, events=events, **tunables) as delivery:
                for name in specs:
                    delivery.put(item(name))
                failed = await events.wait("notify.failed", len(specs))
        expected = {
            "refused": f"connection refused (127.0.0.1:{down.port})",
            "unknown": "name not resolved (crond-hooks.invalid)",
            "slow": f"timed out after 0.5s (127.0.0.1:{slow.port})",
            "tls": "TLS: certificate verify failed: self-signed certificate (localhost)",
        }
        assert {f["notifier"]: f["error"] for f in failed} == expected
        # Said at once, at warning level, in the same words (the slow one may have used
        # up its window in its first try, on a loaded machine).
        first = {e["notifier"]: e["error"] for e in events.named("notify.retry")}
        assert first.items() <= expected.items()
        assert {"refused", "unknown", "tls"} <= first.keys()
        no_secret_logged(events)

    go(main)


def test_a_full_lane_gives_up_its_oldest() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer() as server:
            server.answer(delay=0.1)
            hook = notifier("hook", "webhook", f"{server.url}/hook")
            tunables: dict[str, Any] = {"lane_limit": 5, "lane_flying": 1}
            async with delivering({"hook": hook}, events=events, **tunables) as delivery:
                delivery.put(item(n=0))
                await server.arrived(1)  # the first is in flight
                for n in range(1, 20):
                    delivery.put(item(n=n))
                await events.wait("notify.sent", 6)
            texts = [r.json()["text"] for r in server.requests()]
        # 14 given up: the first said at once, the other 13 in one line (a busy notifier
        # overflowing is one error every 10 s, not one a notification).
        full = events.named("notify.failed")
        assert [(f["error"], f["count"]) for f in full] == [("queue full", 1), ("queue full", 13)]
        assert full[-1]["job_event"] == "failed"
        assert texts == [f"backup failed #{n}" for n in (0, 15, 16, 17, 18, 19)]

    go(main)


def test_a_lane_starts_in_order_and_lanes_do_not_wait_for_each_other() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer() as server:
            server.answer("/slow", delay=5)
            specs = {
                "fast": notifier("fast", "webhook", f"{server.url}/fast"),
                "slow": notifier("slow", "webhook", f"{server.url}/slow"),
            }
            async with delivering(specs, events=events, lane_flying=1) as delivery:
                for n in range(30):
                    delivery.put(item("slow", n))
                    delivery.put(item("fast", n))
                await events.wait("notify.sent", 30)
                fast = [r.json()["text"] for r in server.requests("/fast")]
                assert len(server.requests("/slow")) == 1  # one in flight, the rest queued
        assert fast == [f"backup failed #{n}" for n in range(30)]

    go(main)


def test_put_does_not_wait_for_a_slow_endpoint() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer() as server:
            server.answer(delay=2)
            hook = notifier("hook", "webhook", f"{server.url}/hook")
            async with delivering({"hook": hook}, events=events) as delivery:
                delivery.put(item())
                await server.arrived(1)  # the endpoint sleeps on it now
                longest, cpu = 0.0, list[float]()
                for n in range(200):
                    began, began_cpu = time.perf_counter(), time.thread_time()
                    delivery.put(item(n=n))
                    longest = max(longest, time.perf_counter() - began)
                    cpu.append(time.thread_time() - began_cpu)
                    if n % 20 == 0:
                        await asyncio.sleep(0)  # let delivery take them, as the loop would
        # Microseconds of work in fact, counted in this thread's CPU time (on a busy machine
        # a put may wait for a core, which is not crond's doing): the median well under a
        # millisecond, the worst (a garbage collection may fall in it) under 50 ms. And no
        # wait on the endpoint, which answers after 2 s.
        cpu.sort()
        assert cpu[len(cpu) // 2] < 0.0002
        assert cpu[-1] < 0.05
        assert longest < 0.5

    go(main)


def test_pings_start_success_and_fail_with_rid_and_tail() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer() as server:
            url = f"{server.url}/ping/{SECRET}?create=1"
            pinged = job(ping=url)
            delivery = Delivery(events.log, outbox=None, **QUICK)
            teller = Teller(delivery, clock=SystemClock(), memory=None, host="web-1")
            teller.configure({}, {"backup": pinged})
            task = asyncio.create_task(delivery.run())
            slot = SystemClock().now()
            teller.started(pinged, "0190-run-1", slot, 1)
            ok = RunResult(Outcome.SUCCESS, 0, 1.0, 1)
            teller.finished(pinged, "0190-run-1", slot, ok, tail=["a", "b"], attempts_allowed=1)
            failed = RunResult(Outcome.FAILED, 2, 1.0, 1)
            teller.finished(pinged, "0190-run-2", slot, failed, tail=["x"], attempts_allowed=1)
            teller.lost("backup", "0190-run-3", slot)
            await events.wait("notify.sent", 4)
            await delivery.aclose(1)
            await task
            got = [(r.method, r.path, r.query, r.text) for r in server.requests()]
        base = f"/ping/{SECRET}"
        assert got == [
            ("POST", f"{base}/start", {"create": ["1"], "rid": ["0190-run-1"]}, ""),
            ("POST", base, {"create": ["1"], "rid": ["0190-run-1"]}, "a\nb"),
            ("POST", f"{base}/fail", {"create": ["1"], "rid": ["0190-run-2"]}, "x"),
            ("POST", f"{base}/fail", {"create": ["1"], "rid": ["0190-run-3"]},
             "backup lost on web-1: its daemon died during the run"),
        ]  # fmt: skip
        assert {e["notifier"] for e in events.named("notify.sent")} == {"ping"}
        assert {e["level"] for e in events.named("notify.sent")} == {"debug"}  # 2 a run
        no_secret_logged(events)

    go(main)


def test_a_ping_that_needed_retries_says_so_at_info() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer(up=False) as server:
            pinged = job(ping=f"{server.url}/ping/{SECRET}")
            delivery = Delivery(events.log, outbox=None, **QUICK)
            teller = Teller(delivery, clock=SystemClock(), memory=None, host="web-1")
            teller.configure({}, {"backup": pinged})
            task = asyncio.create_task(delivery.run())
            teller.started(pinged, "0190-run-1", SystemClock().now(), 1)
            (retry,) = await events.wait("notify.retry")
            server.up()
            (sent,) = await events.wait("notify.sent")
            await delivery.aclose(1)
            await task
        assert (retry["level"], sent["level"], sent["notifier"]) == ("warning", "info", "ping")
        assert sent["tries"] >= 2
        no_secret_logged(events)

    go(main)


def test_a_command_gets_the_body_on_stdin_and_the_env(tmp_path: Path) -> None:
    out = tmp_path / "out"
    script = f"cat > {out}.body; env | grep ^CROND_ | sort > {out}.env; echo noise; echo err >&2"

    async def main() -> None:
        events = Events()
        page = notifier("page", "command", ("/bin/sh", "-c", script))
        async with delivering({"page": page}, events=events) as delivery:
            delivery.put(item("page"))
            await events.wait("notify.sent")
        assert command.owned_pids() == set()
        assert "noise" not in events.text()

    go(main)
    body = json.loads(Path(f"{out}.body").read_text())
    assert body["text"] == "backup failed #0"
    env = Path(f"{out}.env").read_text().splitlines()
    assert env == [
        "CROND_EVENT=failed", "CROND_EXIT_CODE=1", "CROND_JOB=backup", "CROND_OUTCOME=failed",
        "CROND_RUN_ID=r0", "CROND_TEXT=backup failed #0",
    ]  # fmt: skip


def test_a_command_that_fails_is_retried_through_sh(tmp_path: Path) -> None:
    count = tmp_path / "count"

    async def main() -> None:
        events = Events()
        page = notifier("page", "command", f"echo try >> {count}; exit 1")
        async with delivering({"page": page}, events=events, **{**QUICK, "window": 0.3}) as d:
            d.put(item("page"))
            (failed,) = await events.wait("notify.failed")
        assert failed["error"] == "exit 1"

    go(main)
    assert len(count.read_text().splitlines()) >= 2


def test_a_hanging_command_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"

    async def main() -> None:
        events = Events()
        script = f"sleep 60 & echo $! > {pidfile}; wait"
        page = notifier("page", "command", script)
        tunables: dict[str, Any] = {"try_timeout": 0.5, "window": 0.1}
        async with delivering({"page": page}, events=events, **tunables) as delivery:
            began = time.monotonic()
            delivery.put(item("page"))
            (failed,) = await events.wait("notify.failed")
            took = time.monotonic() - began
        assert failed["error"] == "timed out after 0.5s"
        assert 0.4 < took < 3
        grandchild = int(pidfile.read_text())
        deadline = time.monotonic() + 5
        while _alive(grandchild) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert not _alive(grandchild)
        assert command.owned_pids() == set()

    go(main)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (waiting for its reaper) is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_apprise_json_reaches_the_server_and_logs_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer() as server:
            url = f"json://127.0.0.1:{server.port}/apprise/{SECRET}"
            spec = notifier("mail", "apprise", url)
            async with delivering({"mail": spec}, events=events) as delivery:
                delivery.put(item("mail"))
                await events.wait("notify.sent")
            (request,) = server.requests()
        assert request.path == f"/apprise/{SECRET}"
        sent = request.json()
        assert sent["title"] == "backup failed #0"
        assert json.loads(sent["message"])["run_id"] == "r0"
        no_secret_logged(events)

    go(main)
    captured = capfd.readouterr()
    assert SECRET not in captured.out + captured.err
    assert "127.0.0.1" not in captured.err


def test_apprise_failure_is_retried_then_given_up() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer() as server:
            server.answer(status=500)
            spec = notifier("mail", "apprise", f"json://127.0.0.1:{server.port}/a")
            # QUICK's window of 5 s: each try starts a process that imports Apprise
            # (0.7 s of CPU, over 2 s on a busy machine), and a second try must still fit.
            async with delivering({"mail": spec}, events=events, **QUICK) as d:
                d.put(item("mail"))
                (failed,) = await events.wait("notify.failed")
            assert len(server.requests()) >= 2
        assert failed["error"] == "apprise reported a failure"

    go(main)


def test_the_outbox_keeps_an_item_until_it_is_delivered() -> None:
    async def main() -> None:
        events, outbox = Events(), ListOutbox()
        with NotifyServer(up=False) as server:
            hook = notifier("hook", "webhook", f"{server.url}/hook")
            async with delivering({"hook": hook}, events=events, outbox=outbox, **QUICK) as d:
                for n in range(3):
                    d.put(item(n=n))
                deadline = time.monotonic() + 5
                while not outbox.items and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                assert outbox.adds == [3]  # one write for the three
                assert len(outbox.items) == 3  # kept before any try could succeed
                server.up()
                await events.wait("notify.sent", 3)
                await asyncio.sleep(0.05)  # the next pass forgets them
                assert outbox.items == {}
                assert sorted(outbox.done_ids) == [1, 2, 3]

    go(main)


def test_keep_writes_what_was_put_before_the_loop_turns_again() -> None:
    # A kill right after a run's end is logged must not lose its notification: keep()
    # writes at once (the SQLite store's way), not at the task's next pass.
    async def main() -> None:
        events, outbox = Events(), ListOutbox()
        with NotifyServer(up=False) as server:
            hook = notifier("hook", "webhook", f"{server.url}/hook")
            async with delivering({"hook": hook}, events=events, outbox=outbox, **QUICK) as d:
                d.put(item(n=0))
                deadline = time.monotonic() + 5
                while not outbox.adds and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)  # the task runs: its pass kept the first
                d.put(item(n=1))
                d.put(item(n=2))
                d.keep()
                assert outbox.adds == [1, 2]  # no turn of the loop in between
                assert len(outbox.items) == 3
                server.up()
                await events.wait("notify.sent", 3)
            texts = sorted(r.json()["text"] for r in server.requests())
        assert texts == ["backup failed #0", "backup failed #1", "backup failed #2"]

    go(main)


def test_a_new_delivery_sends_what_a_previous_one_left() -> None:
    async def main() -> None:
        events, outbox = Events(), ListOutbox()
        await outbox.add([item(n=1), item("removed", 2), item(n=3, created=time.time() - 3600)])
        with NotifyServer() as server:
            hook = notifier("hook", "webhook", f"{server.url}/hook")
            async with delivering(
                {"hook": hook}, events=events, outbox=outbox, lane_flying=1
            ) as delivery:
                delivery.put(item(n=4))
                await events.wait("notify.sent", 3)
                await events.wait("notify.stale")
                await asyncio.sleep(0.05)
            texts = [r.json()["text"] for r in server.requests()]
        assert texts == ["backup failed #1", "backup failed #3", "backup failed #4"]
        assert outbox.items == {}
        (stale,) = events.named("notify.stale")
        assert stale["notifier"] == "removed"
        assert stale["level"] == "debug"

    go(main)


def test_a_notification_of_a_job_gone_at_a_reload_is_dropped() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer() as server:
            hook = notifier("hook", "webhook", f"{server.url}/hook")
            async with delivering({"hook": hook}, events=events) as delivery:
                delivery.configure({"hook": hook}, {}, jobs=["other"])
                delivery.put(item())
                (stale,) = await events.wait("notify.stale")
            assert server.requests() == []
        assert (stale["job"], stale["job_event"]) == ("backup", "failed")

    go(main)


def test_aclose_tries_within_the_grace_and_counts_the_rest() -> None:
    async def main() -> None:
        events = Events()
        with NotifyServer() as server, NotifyServer(up=False) as down:
            server.answer(delay=0.2)
            specs = {
                "slow": notifier("slow", "webhook", f"{server.url}/slow"),
                "down": notifier("down", "webhook", f"{down.url}/down"),
            }
            delivery = Delivery(events.log, outbox=None, **QUICK)
            delivery.configure(specs, {})
            task = asyncio.create_task(delivery.run())
            delivery.put(item("slow", 1))
            for n in range(3):
                delivery.put(item("down", n))
            await asyncio.sleep(0)
            began = time.monotonic()
            await delivery.aclose(1.0)
            took = time.monotonic() - began
            await asyncio.wait_for(task, 1)
            assert len(server.requests()) == 1
        assert 0.5 < took < 1.5  # the down ones are retried until no retry fits the grace
        assert len(events.named("notify.sent")) == 1
        (dropped,) = events.named("notify.dropped")
        assert dropped["count"] == 3
        delivery.put(item("slow", 9))  # after the end: dropped, not queued
        assert len(events.named("notify.dropped")) == 2

    go(main)


def test_aclose_with_an_outbox_keeps_what_is_left() -> None:
    async def main() -> None:
        events, outbox = Events(), ListOutbox()
        with NotifyServer(up=False) as down:
            hook = notifier("hook", "webhook", f"{down.url}/hook")
            delivery = Delivery(events.log, outbox=outbox, **QUICK)
            delivery.configure({"hook": hook}, {})
            task = asyncio.create_task(delivery.run())
            delivery.put(item())
            await asyncio.sleep(0.1)
            await delivery.aclose(0.1)
            await asyncio.wait_for(task, 1)
        assert [s.item.body for s in await outbox.pending(10)] == [item().body]
        assert events.named("notify.dropped") == []
        assert events.named("notify.failed") == []

    go(main)


def test_aclose_ends_quickly_when_all_is_sent() -> None:
    async def main() -> None:
        with NotifyServer() as server:
            hook = notifier("hook", "webhook", f"{server.url}/hook")
            delivery = Delivery(Events().log, outbox=None)
            delivery.configure({"hook": hook}, {})
            task = asyncio.create_task(delivery.run())
            delivery.put(item())
            began = time.monotonic()
            await delivery.aclose(10)
            await task
            assert time.monotonic() - began < 2
            assert len(server.requests()) == 1

    go(main)


def test_the_default_five_minute_window_on_a_fake_clock() -> None:
    """Delivery's retries and window are the clock's: with the defaults (1 s doubling to
    60 s, for 5 minutes), a dead endpoint is tried at 0, 1, 3, 7, 15, 31, 63, 123, 183,
    243 s of a fake clock, then given up once — in well under a second of real time."""

    async def main() -> None:
        clock = FakeClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
        events = Events()
        with NotifyServer() as server:
            server.answer(status=503)
            specs = {"hook": notifier("hook", "webhook", f"{server.url}/hook")}
            async with delivering(specs, events=events, clock=clock) as d:

                async def settled() -> None:  # the tries going are real requests
                    async with asyncio.timeout(10):
                        for _ in range(5):
                            await asyncio.sleep(0)
                        while d._flying:
                            await asyncio.sleep(0.001)

                d.put(item("hook", created=clock.now().timestamp()))
                await settled()
                tries = [0]
                for second in range(1, 301):
                    clock.advance(timedelta(seconds=1))
                    await settled()
                    if len(server.requests()) > len(tries):
                        tries.append(second)
                failed = await events.wait("notify.failed", 1)
        assert tries[:4] == [0, 1, 3, 7]
        assert all(b - a <= 61 for a, b in itertools.pairwise(tries))
        assert tries[-1] <= 300
        assert len(failed) == 1
        assert failed[0]["error"] == "HTTP 503"

    go(main)


def test_an_endpoint_that_answers_without_end_costs_nothing() -> None:
    """A hostile webhook answers 200 and then a body that never ends: the POST is done at
    the status line (the body is never read), and the connection is dropped."""

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        chunk = b"x" * 65536
        with contextlib.suppress(ConnectionError):
            while True:  # until crond hangs up
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()

    async def main() -> None:
        server = await asyncio.start_server(endless, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        events, results = Events(), list[tuple[str, str]]()
        specs = {"hook": notifier("hook", "webhook", f"http://127.0.0.1:{port}/hook")}
        async with server, delivering(specs, events=events, results=results) as d:
            d.put(item("hook"))
            sent = await events.wait("notify.sent", 1, timeout=5)
        assert sent[0]["notifier"] == "hook"
        assert results == [("hook", "sent")]

    go(main)


def test_a_command_gets_none_of_the_files_secrets_but_the_rest_of_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SLACK_TOKEN is another notifier's `${NAME}` (withheld at each load); PD_KEY is this
    # script's own, read from crond's environment as docs/alerting.md's recipe does.
    out = tmp_path / "env"
    monkeypatch.setenv("SLACK_TOKEN", "xoxb-secret")
    monkeypatch.setenv("PD_KEY", "pd-routing")
    command.withhold(frozenset({"SLACK_TOKEN"}))
    try:

        async def main() -> None:
            events = Events()
            page = notifier("page", "command", ("/bin/sh", "-c", f"env > {out}"))
            async with delivering({"page": page}, events=events) as delivery:
                delivery.put(item("page"))
                await events.wait("notify.sent")

        go(main)
    finally:
        command.withhold(frozenset())
    env = out.read_text()
    assert "PD_KEY=pd-routing" in env
    assert "xoxb-secret" not in env
