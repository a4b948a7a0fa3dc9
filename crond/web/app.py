"""The dashboard as an ASGI application: the pages (crond/web/pages.py), the actions
(crond/web/actions.py), the live updates (crond/web/live.py) and the static assets of
this package, behind the Guard (crond/web/guard.py)."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from crond.web import actions, live, pages
from crond.web.context import HERE, Web
from crond.web.guard import MAX_BODY, BodyTooLarge, Guard


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
        Route("/now/{run_id}", bind(pages.watch)),
        Route("/timeline", bind(pages.timeline)),
        Route("/cluster", bind(pages.cluster)),
        Route("/follow/{key}", bind(pages.follow)),
        Route("/events", bind(live.changes)),
        Route("/follow/{key}/events", bind(live.lines)),
        Route("/jobs/{name}/{action}", bind(actions.act), methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    async def too_large(_request: Request, _exc: Exception) -> Response:
        return PlainTextResponse(f"a request body is at most {MAX_BODY} bytes\n", status_code=413)

    async def not_found(request: Request, _exc: Exception) -> Response:
        if "user" not in request.scope:
            return PlainTextResponse("not found\n", status_code=404)
        return web.render(request, "missing.html", 404, what="That page")

    app = Starlette(routes=routes, exception_handlers={BodyTooLarge: too_large, 404: not_found})
    return Guard(app, gate=web.gate, names=names, loopback=loopback, log=web.log)
