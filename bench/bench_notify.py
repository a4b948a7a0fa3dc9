"""Notifications beside the schedule: start lag with and without a slow webhook, RSS over
minutes of failures, and a scrape of /metrics with 1,000 jobs.

1. 100 jobs `every: 1s` that fail (the stamp job, then `exit 1`), each failure notifying
   a webhook on loopback that answers after 2 s (`repeat: 0s`: every failed run is
   told, 100 a second, far more than the endpoint can take). The start lag of the same
   100 jobs without notifiers is measured in the same run, alternately, as the baseline.
   Target: the median with notifiers within 1.1x the median without.
2. The same daemon for 10 minutes (1 with --quick): its RSS sampled every 30 s. Target:
   flat (the last sample within 10 % of the first after a minute's warm-up): the queues
   are bounded whatever the endpoint does.
3. 1,000 jobs far ahead, `--metrics 127.0.0.1:PORT`: the time of a whole `GET /metrics`
   (connect, render, read), median of 30, each more than a second after the last (a page
   is reused for a second: crond.notify.metrics.REUSE_S). Target < 50 ms.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import common
from common import JobDef, row, summary, verdict

from crond.notify.metrics import REUSE_S

JOBS = 100
DELAY_S = 2.0


class _SlowHook(BaseHTTPRequestHandler):
    """Reads the request, waits DELAY_S, answers 200: an endpoint slower than crond's
    failures come."""

    received = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with _SlowHook.lock:
            _SlowHook.received += 1
        time.sleep(DELAY_S)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def slow_hook() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowHook)
    server.daemon_threads = True
    server.request_queue_size = 512
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def failing_jobs(out: Path) -> list[JobDef]:
    command = common.COMMAND.format(out=out) + "; exit 1"
    return [JobDef(f"fail{i}", command, every="1s") for i in range(JOBS)]


def head(url: str) -> str:
    return (
        f"notifiers:\n  hook: {{webhook: {url}/hook, repeat: 0s}}\n"
        "defaults:\n  notify: {hook: [failed]}\n"
    )


def lag_rounds(work: Path, url: str | None, seconds: int) -> list[float]:
    """The start lags (ms) of every run over `seconds` slots."""
    work.mkdir()
    system = common.CrondSystem(head(url) if url else "")
    rounds = common.slot_rounds(system, failing_jobs, 1, seconds, work)
    return [lag for r in rounds for lag in r.lags]


def show_lag(quick: bool) -> None:
    seconds, pairs = (10, 1) if quick else (30, 3)
    plain: list[float] = []
    told: list[float] = []
    with slow_hook() as url, tempfile.TemporaryDirectory(prefix="bench-notify-") as tmp:
        for i in range(pairs):  # alternately, so both see the same machine
            plain += lag_rounds(Path(tmp) / f"plain{i}", None, seconds)
            told += lag_rounds(Path(tmp) / f"told{i}", url, seconds)
    label = f"{JOBS} failing jobs every: 1s"
    row(label, "crond", summary(plain, p99=True), "no notifiers (baseline)")
    ratio = statistics.median(told) / statistics.median(plain) if plain and told else 0
    row(
        "  each failure told to a 2 s webhook",
        "crond",
        summary(told, p99=True),
        f"median {ratio:.2f}x the baseline; target <= 1.1x: {verdict(0 < ratio <= 1.1)}",
    )
    row("  webhook requests received", "", str(_SlowHook.received), "(all pairs)")


def show_rss(quick: bool) -> None:
    minutes = 1 if quick else 10
    with slow_hook() as url, tempfile.TemporaryDirectory(prefix="bench-notify-") as tmp:
        work = Path(tmp)
        (work / "run").mkdir()
        launched = common.CrondSystem(head(url)).launch(
            failing_jobs(work / "s.txt"), work / "run", 60
        )
        samples: list[float] = []
        try:
            end = time.monotonic() + minutes * 60
            while time.monotonic() < end:
                time.sleep(min(30.0, max(0.0, end - time.monotonic())))
                samples.append(common.sample(launched.pid).rss_kib / 1024)
        finally:
            launched.stop()
        log = (work / "run" / "crond.log").read_bytes()
    warm = samples[min(2, len(samples) - 1)] if samples else 0.0  # after a minute
    last = samples[-1] if samples else 0.0
    shown = " ".join(f"{s:.0f}" for s in samples)
    gave_up = sum(
        json.loads(line).get("count", 1) for line in log.splitlines() if b'"notify.failed"' in line
    )
    lines = log.count(b'"notify.failed"')
    row(f"RSS over {minutes} min, MB (every 30 s)", "crond", shown)
    flat = warm > 0 and last <= warm * 1.1
    row(
        "  last vs after 1 min",
        "crond",
        f"{last:.1f} / {warm:.1f}",
        f"flat (<= 1.1x): {verdict(flat)}",
    )
    row("  notifications given up (queue full)", "crond", str(gave_up), f"in {lines} log lines")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> tuple[float, bytes]:
    began = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read()
    conn.close()
    return (time.perf_counter() - began) * 1000, body


def show_scrape(quick: bool) -> None:
    port = free_port()
    system = common.CrondSystem(args=["--metrics", f"127.0.0.1:{port}"])
    with tempfile.TemporaryDirectory(prefix="bench-notify-") as tmp:
        work = Path(tmp)
        launched = system.launch(common.far_jobs(1000, work / "s.txt"), work, 120)
        try:
            scrape(port)  # the first: imports, series made
            times, body = [], b""
            for _ in range(5 if quick else 30):
                time.sleep(REUSE_S + 0.05)  # a fresh render, not the page reused
                took, body = scrape(port)
                times.append(took)
        finally:
            launched.stop()
    series = len(re.findall(rb"^crond_", body, re.MULTILINE))
    med = statistics.median(times)
    row("GET /metrics, 1,000 jobs", "crond", summary(times), f"target < 50 ms: {verdict(med < 50)}")
    row("  the answer", "", f"{len(body) // 1024} KiB, {series} samples")


def main() -> None:
    args = common.parser(__doc__).parse_args()
    common.header("notifications and metrics")
    show_lag(args.quick)
    show_scrape(args.quick)
    show_rss(args.quick)


if __name__ == "__main__":
    main()
