"""The dashboard's application in this process, for pages whose browser does not matter:
the real file loaded, the real SQLite store (written here as the daemon writes it), the
real routes and templates, asked over ASGI (httpx) on a FakeClock; no daemon, no socket."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import structlog

from crond.clifile import load
from crond.clock import FakeClock
from crond.store.sqlite import SqliteStore
from crond.web.app import build
from crond.web.auth import Gate
from crond.web.context import Web
from crond.web.state import Source

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@dataclass
class Pages:
    web: Web
    store: SqliteStore
    clock: FakeClock

    def get(self, path: str) -> httpx.Response:
        """GET `path` as the local viewer (no users file: loopback)."""
        app = build(self.web, names=frozenset(), loopback=True)

        async def ask() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                return await c.get(path)

        self.web.source.forget()
        return asyncio.run(ask())

    def attempt(
        self,
        job: str,
        run_id: str,
        attempt: int,
        started: datetime,
        outcome: str | None,
        *,
        seconds: float = 1.0,
        exit_code: int | None = None,
        output: tuple[str, ...] = (),
    ) -> int:
        """An attempt recorded as the daemon records one: started, then (with an outcome)
        finished `seconds` later."""
        slot = started.replace(second=0, microsecond=0)
        token = self.store.start(
            job, run_id=run_id, slot=slot, attempt=attempt, started=started, cursor=slot
        )
        if outcome is not None:
            self.store.finish(
                token,
                job=job,
                run_id=run_id,
                finished=started + timedelta(seconds=seconds),
                outcome=outcome,
                exit_code=exit_code,
                duration_s=seconds,
                output=list(output),
            )
        return token


def pages(directory: Path, jobs: str) -> Iterator[Pages]:
    """The dashboard of a file of `jobs` (YAML lines indented by two), its store beside."""
    path = directory / "schedules.yaml"
    state = directory / "state"
    path.write_text(f"daemon:\n  state_dir: {state}\njobs:\n{jobs}")
    path.chmod(0o600)
    cfg = load(path, check_owner=False)
    store = SqliteStore(state)
    clock = FakeClock(NOW)
    web = Web(
        source=Source(path, cfg, None),
        gate=Gate(None, frozenset()),
        socket=None,
        log=structlog.get_logger(),
        clock=clock,
    )
    try:
        yield Pages(web, store, clock)
    finally:
        store.close()
