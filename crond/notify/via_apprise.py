"""An Apprise notifier: one of the services the optional `apprise` library reaches
(mail, Slack, Telegram, ... : `apprise:` URLs, docs/alerting.md).

Apprise is synchronous, so a send runs in one of delivery's bounded threads; it is
imported only when the file has such a notifier. Its loggers print URLs (with their
tokens): they are silenced before its first use.
"""

from __future__ import annotations

import functools
import logging
import threading
import warnings
from typing import Any

from crond.notify.errors import SendError


@functools.cache
def _quiet() -> None:
    """Nothing Apprise logs reaches a handler (nor Python's last-resort stderr one)."""
    logger = logging.getLogger("apprise")
    logger.handlers[:] = [logging.NullHandler()]
    logger.propagate = False
    logger.setLevel(logging.CRITICAL + 1)


_LOADING = threading.Lock()


def send(url: str, title: str, body: str) -> None:
    """Tell `url` through Apprise, blocking; raises SendError unless it reports success."""
    apprise = _load()
    sender = apprise.Apprise()
    if not sender.add(url):
        raise SendError("apprise cannot use this URL", retry=False)
    if not sender.notify(body=body, title=title):
        raise SendError("apprise reported a failure")


def _load() -> Any:
    """Apprise, imported with its plugins, once. Its plugins import modules Python
    deprecates (imghdr): their warnings are not crond's to show (and a warnings filter
    set to "error" would make them fail the first send)."""
    with _LOADING:
        _quiet()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import apprise  # noqa: PLC0415  (optional, and slow to import: only when used)

            apprise.Apprise().instantiate("json://localhost")  # loads the plugins now
        _quiet_children()
    return apprise


def _quiet_children() -> None:
    # Apprise's plugins log under "apprise.<plugin>": they propagate to "apprise"
    # (silenced), unless one set a handler of its own; those are cleared too.
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if name.startswith("apprise.") and isinstance(logger, logging.Logger):
            logger.handlers[:] = []
            logger.propagate = True
