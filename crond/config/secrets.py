"""Secrets in the schedules file: `${NAME}` taken from the daemon's environment, and URLs
shown without what may be secret.

A notifier's URL, its headers, a command and a job's `ping` may need a token: the file
says `${NAME}` and the value comes from crond's environment when the file is loaded, so
the file itself holds no secret (docs/alerting.md). `$$` is a literal `$`; a `$` before
anything else is kept as it is.

Whatever crond prints of such a URL (logs, `status`, errors) goes through `show_url`:
scheme and host only, never its path, query or user info.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def references(text: str) -> list[str]:
    """The names `text` takes from the environment, in order, each once."""
    names = [m.group(1) for m in _REFERENCE.finditer(text) if m.group(1)]
    return list(dict.fromkeys(names))


def expand(text: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """`text` with each `${NAME}` replaced by its value in `environ`, and `$$` by `$`; and
    the names that are not set (left as written)."""
    missing: list[str] = []

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        if name in environ:
            return environ[name]
        if name not in missing:
            missing.append(name)
        return match.group(0)

    return _REFERENCE.sub(value, text), missing


def show_url(url: str) -> str:
    """A URL as crond shows it: `scheme://host/…` (no user info, path, query or port that
    could carry a token). What does not parse as a URL is shown as `<url>`."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return "<url>"
    if not parts.scheme or not host:
        return "<url>"
    rest = "/…" if (parts.path not in ("", "/") or parts.query or parts.fragment) else ""
    return f"{parts.scheme}://{host}{rest}"
