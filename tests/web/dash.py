"""Drive the real `crond web`: a schedules file with a `web:` section, its users (bcrypt,
cheap rounds), the real daemon beside it (tests/e2e/harness.py), and the dashboard's
process, whose JSON log events are collected as they come."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import bcrypt

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

from tests.e2e.harness import CROND, Crond, run_cli

PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw"}  # alice operates, bob looks


def users_file(directory: Path) -> Path:
    path = directory / "web.htpasswd"
    lines = [
        f"{name}:{bcrypt.hashpw(pw.encode(), bcrypt.gensalt(rounds=4)).decode()}"
        for name, pw in PASSWORDS.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def basic(user: str, password: str | None = None) -> str:
    pw = PASSWORDS[user] if password is None else password
    return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()


def schedules(directory: Path, jobs: str, *, users: bool = True) -> Path:
    """A schedules file in `directory` (its state there too) with `jobs` (YAML lines,
    indented by two) and a web section naming the users (alice an operator)."""
    web = ""
    if users:
        web = f"web:\n  users: {users_file(directory)}\n  operators: [alice]\n"
    path = directory / "schedules.yaml"
    path.write_text(f"daemon:\n  state_dir: {directory / 'state'}\n{web}jobs:\n{jobs}")
    return path


class Dash:
    """A running `crond web FILE --listen 127.0.0.1:0`: its address, its events."""

    def __init__(self, file: Path, *args: str) -> None:
        self.events: list[dict[str, Any]] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.proc = subprocess.Popen(
            [CROND, "web", str(file), "--listen", "127.0.0.1:0", "--log-format", "json", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=os.environ.copy(),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        serving = self.wait_for("web.serving", timeout=30)
        self.address = str(serving["address"])
        self.url = f"http://{self.address}"

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            try:
                self._queue.put(json.loads(raw))
            except ValueError:
                self._queue.put({"event": "(not json)", "line": raw.decode(errors="replace")})
        self._queue.put(None)
        self.proc.stderr.close()

    def wait_for(
        self, name: str, where: Callable[[dict[str, Any]], bool] | None = None, timeout: float = 10
    ) -> dict[str, Any]:
        """The first event `name` (matching `where`), logged before or within `timeout`."""
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("event") == name and (where is None or where(event)):
                return event
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {name} within {timeout}s: {self.events[-5:]}") from None
            if item is None:
                self._queue.put(None)
                raise AssertionError(f"crond web exited ({self.proc.wait()}): {self.events[-5:]}")
            self.events.append(item)
            if item.get("event") == name and (where is None or where(item)):
                return item

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(5)


def daemon(file: Path) -> Crond:
    """The real daemon on `file`, once it listens on its control socket."""
    started = Crond([str(file)])
    started.wait_for("control.listening")
    return started


def chrome(browser: str, driver: str) -> WebDriver:
    """Headless Chromium at `browser`, driven through the chromedriver at `driver` (both
    given: Selenium downloads nothing), its network domain on (for the credentials)."""
    from selenium import webdriver  # noqa: PLC0415  (only where a browser runs)
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",  # as root in CI
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--no-first-run",
        "--disable-background-networking",
    ):
        options.add_argument(arg)
    started = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    started.execute_cdp_cmd("Network.enable", {})
    return started


def as_user(driver: WebDriver, user: str) -> None:
    """Every request of the browser from now on carries `user`'s credentials."""
    driver.execute_cdp_cmd(
        "Network.setExtraHTTPHeaders", {"headers": {"Authorization": basic(user)}}
    )


@contextlib.contextmanager
def site(file: Path, failing: str) -> Iterator[tuple[Dash, Crond]]:
    """The daemon on `file`, `failing` run once (it exits 3), then the dashboard."""
    started = daemon(file)
    dash = None
    try:
        done = run_cli("trigger", str(file), failing, "--wait")
        assert done.returncode == 3, done.stderr
        dash = Dash(file)
        yield dash, started
    finally:
        if dash is not None:
            dash.stop()
        started.kill()


@dataclass
class Replicas:
    """Two replicas of one file on PostgreSQL and a `crond web` beside r1: `gated` prints
    "first", waits for `go`, prints "second"; r2's socket is `r2_socket`."""

    file: Path
    go: Path
    r2_socket: Path
    replicas: list[Crond]
    dash: Dash


@contextlib.contextmanager
def two_replicas(pg_url: str, directory: Path) -> Iterator[Replicas]:
    go = directory / "go"
    file = directory / "schedules.yaml"
    file.write_text(
        f"daemon:\n  database: {pg_url}\n  state_dir: {directory / 'state-r1'}\n"
        "  heartbeat: 1s\n  replica_timeout: 3s\n"
        f"web:\n  users: {users_file(directory)}\n  operators: [alice]\n"
        "jobs:\n  gated:\n    cron: '0 0 1 1 *'\n"
        f'    command: "echo first; while [ ! -e {go} ]; do sleep 0.05; done; echo second"\n'
    )
    r2_state = directory / "state-r2"
    r2_state.mkdir()
    replicas = [
        Crond([str(file), "--replica", "r1"]),
        Crond([str(file), "--replica", "r2", "--state-dir", str(r2_state)]),
    ]
    dash = None
    try:
        dash = Dash(file)  # starts while the replicas do
        for replica in replicas:
            replica.wait_for("control.listening")
        yield Replicas(file, go, r2_state / "crond.sock", replicas, dash)
    finally:
        go.touch()  # a gated run left waiting ends
        if dash is not None:
            dash.stop()
        for replica in replicas:
            replica.kill()
