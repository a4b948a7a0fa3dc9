"""What every page and action of the dashboard shares (`Web`): the file and its store,
the users, the daemon's socket, the followed triggers, the templates (Jinja2, every value
escaped) and how a page is rendered."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from structlog.typing import FilteringBoundLogger

from crond.clock import Clock
from crond.web.auth import Gate, User
from crond.web.state import Source
from crond.web.steer import Follows

HERE = Path(__file__).parent
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
            loader=jinja2.FileSystemLoader(HERE / "templates"),
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
