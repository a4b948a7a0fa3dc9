"""sd_notify without a dependency: one datagram to $NOTIFY_SOCKET per state change.

READY=1 once scheduling, RELOADING=1 / READY=1 around a reload, STOPPING=1, and
WATCHDOG=1 from the scheduling loop every WATCHDOG_USEC / 2.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from datetime import timedelta


class Systemd:
    """Sends to systemd when NOTIFY_SOCKET is set; does nothing otherwise."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        # An abstract socket is written with a leading "@" and addressed with a NUL.
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self._sock: socket.socket | None = None
        self.watchdog = _watchdog_interval(env)
        self.errors = 0

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def send(self, *states: str) -> None:
        if not self._address:
            return
        try:
            if self._sock is None:
                # Non-blocking: a reader that stops reading (a full socket buffer) must
                # cost a dropped message, never a stalled scheduling loop.
                self._sock = socket.socket(
                    socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
                )
            self._sock.sendto("\n".join(states).encode(), self._address)
        except OSError:
            self.errors += 1  # systemd gone or socket full: never fatal for scheduling

    def ready(self, status: str = "") -> None:
        self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def reloading(self) -> None:
        # systemd >= 253 wants MONOTONIC_USEC with RELOADING=1 (Type=notify-reload).
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self) -> None:
        self.send("STOPPING=1")

    def ping(self) -> None:
        self.send("WATCHDOG=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _watchdog_interval(env: Mapping[str, str]) -> timedelta | None:
    """Half of WATCHDOG_USEC, if the watchdog is meant for this process."""
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if pid and pid != str(os.getpid()):
        return None
    return timedelta(microseconds=int(usec) / 2)
