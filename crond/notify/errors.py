"""How a try to deliver fails: `SendError`, whose message is safe to log.

The message never holds a URL, a header or a command (any of them may carry a secret):
only what kind of failure it was (an exception's type name, an HTTP status, an exit
status). `retry` says whether trying again could help.
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
