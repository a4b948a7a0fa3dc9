"""How a try to deliver fails: `SendError`, whose message is safe to log.

The message never holds a URL, a header or a command (any of them may carry a secret):
only what kind of failure it was, in words (an HTTP status, `connection refused`, an
exit status), and for a webhook or a ping the endpoint's host and port, which are not
secret (crond/notify/webhook.py). `retry` says whether trying again could help.
"""

from __future__ import annotations


class SendError(Exception):
    """`after`: the seconds the endpoint asked to wait before the next try (a 429 or 503
    with `Retry-After`), or None."""

    def __init__(self, error: str, *, retry: bool = True, after: float | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.retry = retry
        self.after = after
