"""The dashboard as an ASGI application: the pages (crond/web/pages.py), the actions
(crond/web/actions.py), the live updates (crond/web/live.py) and the static assets of
this package, behind the Guard (crond/web/guard.py)."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from structlog.typing import FilteringBoundLogger

from crond.clock import Clock
from crond.web import actions, live, pages
from crond.web.auth import Gate, User
from crond.web.guard import BodyTooLarge, Guard
from crond.web.state import Source
from crond.web.steer import Follows

_HERE = Path(__file__).parent
_FLASHES = 256


@dataclass
class Web:
    """What every handler shares."""

    source: Source
    gate: Gate
    socket: Path | None
    log: FilteringBoundLogger
    clock: Clock
    follows: Follows = field(default_factory=Follows)
    flashes: OrderedDict[str, tuple[bool, str]] = field(default_factory=OrderedDict)
    templates: jinja2.Environment = field(
        default_factory=lambda: jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
    )

    def __post_init__(self) -> None:
        self.templates.filters["when"] = when

    def flash(self, ok: bool, text: str) -> str:
        key = secrets.token_urlsafe(9)
        self.flashes[key] = (ok, text)
        while len(self.flashes) > _FLASHES:
            self.flashes.popitem(last=False)
        return key

    def render(self, request: Request, name: str, status: int = 200, **values: Any) -> Response:
        user: User = request.scope["user"]
        said = self.flashes.get(request.query_params.get("said", ""))
        html = self.templates.get_template(name).render(
            user=user,
            csrf=self.gate.csrf(user),
            said=said,
            nav=request.url.path,
            **{"version": "", **values},
        )
        return HTMLResponse(html, status_code=status)


def when(text: str | None) -> str:
    """An ISO-8601 instant as the pages show it: `2026-12-03 18:43:25Z`, to the second
    (`2026-12-04 02:30:00+01:00` with an offset)."""
    if not text:
        return ""
    day, _, rest = text.partition("T")
    clock, offset = rest[:8], rest[8:]
    if offset.startswith("."):  # fractions of a second
        offset = offset.lstrip(".0123456789")
    return f"{day} {clock}{offset}"


def build(web: Web, *, names: frozenset[str], loopback: bool) -> Guard:
    """The application, its routes each given `web`."""

    def bind(handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            return await handler(web, request)  # type: ignore[no-any-return]

        return endpoint

    routes = [
        Route("/", bind(pages.jobs)),
        Route("/jobs/{name}", bind(pages.job)),
        Route("/runs/{run_id}", bind(pages.run)),
        Route("/now", bind(pages.now)),
        Route("/timeline", bind(pages.timeline)),
        Route("/cluster", bind(pages.cluster)),
        Route("/follow/{key}", bind(pages.follow)),
        Route("/events", bind(live.changes)),
        Route("/follow/{key}/events", bind(live.lines)),
        Route("/jobs/{name}/{action}", bind(actions.act), methods=["POST"]),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]

    async def too_large(_request: Request, _exc: Exception) -> Response:
        return PlainTextResponse("a request body is at most 16384 bytes\n", status_code=413)

    async def not_found(request: Request, _exc: Exception) -> Response:
        if "user" not in request.scope:
            return PlainTextResponse("not found\n", status_code=404)
        return web.render(request, "missing.html", 404, what="That page")

    app = Starlette(routes=routes, exception_handlers={BodyTooLarge: too_large, 404: not_found})
    return Guard(app, gate=web.gate, names=names, loopback=loopback, log=web.log)
