"""How a notification is sent, one try at a time: a webhook's or a ping's POST (httpx,
one client for all), a command notifier (command.py), an Apprise URL (a child process
each, a few at once: via_apprise.py). Delivery (delivery.py) decides when, how often
and in what order; this module only sends, and raises SendError, whose message never
holds a URL, a header or a command (errors.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from crond.config.loaded import NotifierSpec
from crond.notify import command, webhook
from crond.notify.outbox import OutboxItem

if TYPE_CHECKING:
    import httpx


class Destinations(Protocol):
    """Where items go, as of the latest load (Delivery is one)."""

    @property
    def notifiers(self) -> Mapping[str, NotifierSpec]: ...

    @property
    def pings(self) -> Mapping[str, str]:
        """Each job's ping URL, by job name."""

    @property
    def jobs(self) -> Collection[str] | None:
        """The file's job names; None: every job counts."""


class Senders:
    """The webhook client and the Apprise slots, made when first needed."""

    def __init__(self, *, try_timeout: float, connections: int, threads: int) -> None:
        self.try_timeout = try_timeout
        self.connections = connections
        self.threads = threads
        self._client: httpx.AsyncClient | None = None
        self._slots: asyncio.Semaphore | None = None  # Apprise children at once

    async def send(self, item: OutboxItem, where: Destinations) -> bool:
        """One try of `item`, to where `where` says now; False when its notifier or job is
        gone from the file. Raises SendError when not delivered."""
        if item.kind == "ping":
            base = where.pings.get(item.job)
            if base is None:
                return False
            data = json.loads(item.body)
            url = webhook.ping_url(base, item.event, str(data.get("rid") or ""))
            tail = str(data.get("tail") or "").encode()
            await webhook.post(self._http(), url, tail, content_type="text/plain; charset=utf-8")
            return True
        spec = where.notifiers.get(item.notifier)
        if spec is None or (where.jobs is not None and item.job not in where.jobs):
            return False
        if spec.kind == "webhook":
            assert isinstance(spec.target, str)
            await webhook.post(self._http(), spec.target, item.body.encode(), spec.headers)
        elif spec.kind == "command":
            env = _command_env(item.body)
            await command.run_command(spec.target, item.body.encode(), env, self.try_timeout)
        else:
            assert isinstance(spec.target, str)
            await self._apprise(spec.target, item.body)
        return True

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx  # noqa: PLC0415  (only for a file with webhooks or pings)

            self._client = httpx.AsyncClient(
                follow_redirects=False,  # a redirect could take the headers elsewhere
                timeout=httpx.Timeout(self.try_timeout),
                limits=httpx.Limits(max_connections=self.connections),
                trust_env=False,  # no proxy from the environment sees the notifications
            )
        return self._client

    async def _apprise(self, url: str, body: str) -> None:
        """Apprise in a child process (via_apprise.py), at most `threads` at once: a try
        waits for a free slot within its own timeout; the child is killed at the try's
        deadline, so none outlives its try."""
        from crond.notify import via_apprise  # noqa: PLC0415

        if self._slots is None:
            self._slots = asyncio.Semaphore(self.threads)
        title = str(json.loads(body).get("text") or "")
        async with self._slots:
            await via_apprise.send(url, title, body, self.try_timeout)

    async def aclose(self) -> None:
        """The client's connections closed (Apprise children die with their tries)."""
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()


def _command_env(body: str) -> dict[str, str]:
    """The CROND_* variables a command notifier gets from the body ("" for null)."""
    data: dict[str, Any] = json.loads(body)
    env = {}
    for name, key in (
        ("CROND_EVENT", "event"),
        ("CROND_JOB", "job"),
        ("CROND_RUN_ID", "run_id"),
        ("CROND_OUTCOME", "outcome"),
        ("CROND_EXIT_CODE", "exit_code"),
        ("CROND_TEXT", "text"),
    ):
        value = data.get(key)
        env[name] = "" if value is None else str(value)
    return env
