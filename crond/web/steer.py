"""The dashboard's actions, sent to the daemon through its control socket as `crond
trigger`, `kill`, `pause`, `resume` and `ps` send them (crond/control/client.py), from a
thread: the page's event loop never waits on the socket.

A trigger is followed: it is sent with `wait`, and the run's output lines, as the daemon
streams them, are kept for the page that shows them (`Follow`); so is a run going already
(`follow RUN_ID`, from the Now page): at most `MAX_FOLLOWS` runs at once, each its last
`MAX_LINES` lines, forgotten `KEEP_S` after they end.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crond.control import client, where

# Each followed run holds one of the daemon's control connections (16 at most: the
# commands must keep theirs), so few at once.
MAX_FOLLOWS = 4
MAX_LINES = 2000
KEEP_S = 600.0
WATCH_READ_S = 30.0  # a watched run's connection is asked again this often (see Follow)


class SteerError(Exception):
    """The daemon could not be asked, or refused; `str()` is the sentence to show."""


def socket_of(control_socket: str | None, flag: str | None, state_dir: str | None) -> Path | None:
    """Where the daemon listens, as the commands find it; None: `control_socket: none`."""
    path = where.resolve(control_socket, flag, state_dir)
    return None if path is None else where.fallback(path, control_socket, flag, state_dir)


def call(
    path: Path | None, cmd: str, args: dict[str, Any], by: str | None = None
) -> dict[str, Any]:
    """Send one request (for `by`, web:USER); its result. Raises SteerError."""
    if path is None:
        raise SteerError("the file turns the control socket off (control_socket: none)")
    final: dict[str, Any] = {}
    try:
        for message in client.request(path, cmd, args, on_behalf=by):
            if "ok" in message:
                final = message
    except client.NoDaemon:
        raise SteerError(f"no crond is running for this file (no socket at {path})") from None
    except client.ClientError as exc:
        raise SteerError(str(exc)) from None
    if final.get("ok") is not True:
        raise SteerError(str(final.get("error") or "the daemon refused"))
    result = final.get("result")
    return result if isinstance(result, dict) else {}


class Follow:
    """One run's output as it comes, then its end: a run triggered here (`run_id` None:
    the trigger waits for it), or one going already (`follow RUN_ID`), watched while a
    page looks: its connection is asked again every WATCH_READ_S while `wanted_until`
    (moved on by the page's stream) has not passed, and given back after."""

    def __init__(
        self,
        job: str,
        by: str,
        run_id: str | None = None,
        remote: Callable[[Follow], None] | None = None,
    ) -> None:
        self.id = secrets.token_urlsafe(12)
        # With a database: how to follow the run when the daemon reached does not run it.
        self.remote = remote
        self.replica: str | None = None  # the replica it is followed from, when remote
        self.code: str | None = None  # the daemon's refusal's code
        self.job = job
        self.by = by
        self.run_id = run_id
        self.lines: deque[tuple[int, str, str]] = deque(maxlen=MAX_LINES)
        self.count = 0  # lines seen, the first kept's number is count - len(lines)
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.ended_at: float | None = None
        self.wanted_until = time.monotonic() + WATCH_READ_S
        self._lines_lock = threading.Lock()  # the pages copy what this thread appends

    @property
    def done(self) -> bool:
        return self.ended_at is not None

    def after(self, seen: int) -> list[tuple[int, str, str]]:
        """The lines numbered `seen` and later that are still kept."""
        with self._lines_lock:
            return [line for line in self.lines if line[0] >= seen]

    def run(self, path: Path | None) -> None:
        try:
            if self.run_id is None:
                assert path is not None  # Follows.start: a trigger needs the socket
                self._ask(path, "trigger", {"job": self.job, "wait": True}, None)
            elif path is not None:
                self._watch(path)
            remote = self.remote is not None and self.run_id is not None
            if remote and (path is None or self.code == "not_found"):
                assert self.remote is not None
                self.error = None  # not a run of the daemon reached: another replica's
                self.remote(self)
        except client.NoDaemon:
            if self.remote is not None and self.run_id is not None:
                self.remote(self)
            else:
                self.error = f"no crond is running for this file (no socket at {path})"
        except client.ClientError as exc:
            self.error = str(exc)
        finally:
            self.ended_at = time.monotonic()

    def add_tail(self, lines: list[tuple[str, str]], seen: int, replica: object) -> None:
        """A remote run's last lines, `seen` in all: those not had yet are appended."""
        first = seen - len(lines)
        with self._lines_lock:
            for number, (stream, line) in enumerate(lines, start=first):
                if number >= self.count:
                    self.lines.append((number, stream, line))
            self.count = max(self.count, seen)
        self.replica = None if replica is None else str(replica)

    def _watch(self, path: Path) -> None:
        first = True
        while self.result is None and self.error is None:
            try:
                self._ask(path, "follow", {"run_id": self.run_id}, WATCH_READ_S)
            except client.ProtocolError:
                if time.monotonic() > self.wanted_until:
                    self.error = "nobody is looking any more"
                    return
                continue  # a quiet run: asked again, the page still looks
            if self.error is not None and not first:  # it ended between two asks
                self.error, self.result = None, {"run_id": self.run_id, "outcome": None}
            first = False

    def _ask(self, path: Path, cmd: str, args: dict[str, Any], timeout: float | None) -> None:
        for message in client.request(path, cmd, args, timeout=timeout, on_behalf=self.by):
            if "ok" in message:
                if message.get("ok") is True and isinstance(message.get("result"), dict):
                    self.result = message["result"]
                else:
                    self.error = str(message.get("error") or "the daemon refused")
                    self.code = str(message.get("code") or "")
            elif isinstance(message.get("line"), str):
                with self._lines_lock:
                    self.lines.append((self.count, str(message.get("stream")), message["line"]))
                    self.count += 1


class Follows:
    """The triggered runs being followed, bounded."""

    def __init__(self) -> None:
        self._all: dict[str, Follow] = {}
        self._lock = threading.Lock()

    def start(
        self,
        path: Path | None,
        job: str,
        by: str,
        run_id: str | None = None,
        remote: Callable[[Follow], None] | None = None,
    ) -> Follow:
        """Trigger `job` and follow it; or, with `run_id`, follow that run of it going
        already (one follower a run), through `remote` (the cluster's database) when the
        daemon reached does not run it. Raises SteerError (no socket, too many at once)."""
        if path is None and (run_id is None or remote is None):
            raise SteerError("the file turns the control socket off (control_socket: none)")
        with self._lock:
            now = time.monotonic()
            for key, old in list(self._all.items()):
                if old.ended_at is not None and now - old.ended_at > KEEP_S:
                    del self._all[key]
            same = [f for f in self._all.values() if run_id and f.run_id == run_id and not f.done]
            if same:
                return same[0]
            if sum(not f.done for f in self._all.values()) >= MAX_FOLLOWS:
                raise SteerError(f"{MAX_FOLLOWS} runs are being followed already; retry later")
            if len(self._all) >= 4 * MAX_FOLLOWS:  # the oldest ended one goes
                ended = [k for k, f in self._all.items() if f.done]
                if ended:
                    del self._all[ended[0]]
            follow = Follow(job, by, run_id, remote)
            self._all[follow.id] = follow
        threading.Thread(
            target=follow.run, args=(path,), daemon=True, name="crond-web-follow"
        ).start()
        return follow

    def get(self, key: str) -> Follow | None:
        return self._all.get(key)
