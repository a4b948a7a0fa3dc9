"""Sending over HTTP: a webhook's POST and a healthchecks.io ping, through httpx.

Redirects are not followed: a notifier's headers may hold a token, and a redirect could
hand it to another host. A 2xx is delivered; 408, 429 and 5xx (the server is busy or
broken) and connection errors are worth another try (after the `Retry-After` the endpoint
asks for, when it says one, within Delivery's bounds); any other status means the request
itself is wrong, and is given up at once. Errors say the exception's type and the status,
never `str(exc)`: httpx puts the URL in its messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit, urlunsplit

from crond.notify.errors import SendError

if TYPE_CHECKING:
    import httpx

_RETRIED_STATUSES: Final = frozenset({408, 429})
PING_SIGNALS: Final = {"start": "/start", "success": "", "fail": "/fail"}


def ping_url(base: str, signal: str, rid: str) -> str:
    """healthchecks.io's URL for `signal` ("start", "success", "fail") of run `rid`:
    `BASE/start?rid=RID`, with the base's own query kept."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/") + PING_SIGNALS[signal]
    query = f"{parts.query}&rid={rid}" if parts.query else f"rid={rid}"
    return urlunsplit((parts.scheme, parts.netloc, path, query, parts.fragment))


async def post(
    client: httpx.AsyncClient,
    url: str,
    content: bytes,
    headers: tuple[tuple[str, str], ...] = (),
    content_type: str = "application/json",
) -> None:
    """POST `content` to `url`; returns once a 2xx came back, else raises SendError."""
    import httpx  # noqa: PLC0415  (only a daemon whose file has webhooks or pings needs it)

    sent = [("content-type", content_type), *headers]
    try:
        response = await client.post(url, content=content, headers=sent)
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise SendError(type(exc).__name__, retry=False) from None
    except httpx.HTTPError as exc:
        raise SendError(type(exc).__name__) from None
    status = response.status_code
    if 200 <= status < 300:
        return
    retry = status >= 500 or status in _RETRIED_STATUSES
    raise SendError(f"HTTP {status}", retry=retry, after=retry_after(response.headers))


def retry_after(headers: httpx.Headers) -> float | None:
    """`Retry-After` in seconds (its delta-seconds form; an HTTP date is not read), or None."""
    value = headers.get("retry-after", "").strip()
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        return None
    return float(value)
