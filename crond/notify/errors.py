"""How a try to deliver fails: `SendError`, whose message is safe to log.

The message never holds a URL, a header or a command (any of them may carry a secret):
only what kind of failure it was (an exception's type name, an HTTP status, an exit
status). `retry` says whether trying again could help.
"""

from __future__ import annotations


class SendError(Exception):
    def __init__(self, error: str, *, retry: bool = True) -> None:
        super().__init__(error)
        self.error = error
        self.retry = retry
