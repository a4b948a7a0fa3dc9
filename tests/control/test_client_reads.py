"""The control client's reads of the daemon's answer are bounded (crond/control/client.py):
a line of at most 1 MiB, and each read within its timeout. The other end here is a real
Unix socket whose server misbehaves on purpose."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crond.control import client


@contextlib.contextmanager
def hostile(path: Path, mode: str) -> Iterator[threading.Event]:
    """A server at `path` that reads the request, then sends a line without end
    (`endless`) or nothing (`silent`) until the client leaves; the event is set then."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    gone = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            while mode == "endless":
                conn.sendall(b"x" * 65536)
            conn.recv(1)  # silent: until the client closes
        gone.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield gone
    finally:
        listener.close()


def test_a_reply_line_without_end_stops_at_1_mib(tmp_path: Path) -> None:
    path = tmp_path / "run" / "crond.sock"
    with hostile(path, "endless") as gone:
        with pytest.raises(client.ProtocolError) as caught:
            list(client.request(path, "ps", {}, timeout=5))
        assert gone.wait(5)  # the client hung up: it did not read on
    assert str(caught.value) == f"the daemon at {path} sent a line longer than 1 MiB"


def test_a_daemon_that_says_nothing_is_given_up_at_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "run" / "crond.sock"
    with hostile(path, "silent"):
        began = time.monotonic()
        with pytest.raises(client.ProtocolError) as caught:
            list(client.request(path, "ps", {}, timeout=0.3))
        took = time.monotonic() - began
    assert str(caught.value) == f"the daemon at {path} did not answer in time"
    assert 0.25 <= took < 3
