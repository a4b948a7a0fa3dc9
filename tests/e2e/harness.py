"""Drive the real `crond` binary: start it, send signals, wait on its JSON log events."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

CROND = shutil.which("crond", path=str(Path(sys.executable).parent)) or "crond"
Event = dict[str, Any]


class Crond:
    """A running `crond run` whose stderr JSON events are collected as they come."""

    def __init__(
        self, args: list[str], env: Mapping[str, str] | None = None, prefix: list[str] | None = None
    ) -> None:
        self.events: list[Event] = []
        self.other: list[str] = []  # stderr lines that are not JSON events
        self._queue: queue.Queue[Event | None] = queue.Queue()
        full_env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(
            [*(prefix or []), CROND, "run", *args, "--log-format", "json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=full_env,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            try:
                event = json.loads(raw)
            except ValueError:
                self.other.append(raw.decode(errors="replace"))
                continue
            self._queue.put(event)
        self._queue.put(None)
        self.proc.stderr.close()

    def wait_for(
        self, name: str, where: Callable[[Event], bool] | None = None, timeout: float = 15.0
    ) -> Event:
        """The first event called `name` (matching `where`) not yet returned by wait_for."""
        deadline = time.monotonic() + timeout
        for event in self.events:
            if (
                event.get("event") == name
                and not event.get("_seen")
                and (where is None or where(event))
            ):
                event["_seen"] = True
                return event
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {name} event within {timeout}s; got {self.names()}")
            try:
                item = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if item is None:
                self._queue.put(None)
                raise AssertionError(
                    f"crond exited ({self.proc.wait()}) before {name}; "
                    f"got {self.names()}; stderr: {self.other[-5:]}"
                )
            self.events.append(item)
            if item.get("event") == name and (where is None or where(item)):
                item["_seen"] = True
                return item

    def drain(self) -> list[Event]:
        """Every event logged so far, without waiting (wait_for's marks are left alone)."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return self.events
            if item is None:
                self._queue.put(None)  # the end stays in the queue for wait_for and exited
                return self.events
            self.events.append(item)

    def named(self, name: str) -> list[Event]:
        return [e for e in self.events if e.get("event") == name]

    def names(self) -> list[str]:
        return [str(e.get("event")) for e in self.events]

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM (unless it already exits), then wait for the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.exited(timeout)

    def exited(self, timeout: float = 15.0) -> int:
        """Wait for the exit (no signal sent) and collect the remaining events."""
        code = self.proc.wait(timeout)
        self._reader.join(5)
        while True:
            item = self._queue.get()
            if item is None:
                break
            self.events.append(item)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(5)


def run_cli(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CROND, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def eventually(check: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    """Poll `check` (a cheap state read, not a sleep-and-hope) until true or fail."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.02)
