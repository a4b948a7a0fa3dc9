"""The checks of what the schedules file says about telling people (docs/alerting.md): a
notifier's webhook URL, headers, command and Apprise URL, and a job's `ping`.

These texts may take `${NAME}` from crond's environment (`secrets`): a check runs on
the text as it will be used, expanded, and is skipped while a name is not set (the
loader reports the name instead). The texts hold tokens and passwords, so no message
here shows a header's value, an expanded value, or a URL's path, query or user info: a
URL is shown as `secrets.show_url` shows the text written in the file, an Apprise URL
as `secrets.show_apprise` does (its scheme only: some services' tokens are its host).

Apprise is an optional extra (`crond[apprise]`), slow to import: it is imported only
when a file has an `apprise:` notifier, and it logs the URLs it parses, secrets
included, so its logging is dropped while crond checks one.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import shlex
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic_core import PydanticCustomError

from crond.config.secrets import expand, references, show_apprise, show_url
from crond.config.wording import escape, quote

# RFC 9110's `token`: what a header's name may be.
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# What would end a header line early, or smuggle in another header.
_HEADER_BREAK = re.compile("[\r\n\0]")
# What an HTTP client refuses in a URL, or would send somewhere else than it reads.
_URL_BREAK = re.compile(r"[\x00-\x20\x7f]")
_APPRISE_EXTRA = "pip install 'crond[apprise]'"
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SHOWN_PROGRAM = 60


def _expanded(written: str, environ: Mapping[str, str]) -> str | None:
    """`written` with its ${NAME}s expanded, or None while one is not set (the loader
    reports it; nothing can be checked of a text not known yet)."""
    text, missing = expand(written, environ)
    return None if missing else text


def _described(written: str, show: Callable[[str], str] = show_url) -> str:
    """How a message names a URL: as `show` shows what is written; with the names it
    takes from the environment that this does not show (their values never are)."""
    said = show(written)
    names = [name for name in references(written) if "${" + name + "}" not in said]
    if not names:
        return said
    expanded_from = ", ".join("${" + name + "}" for name in names[:5])
    return f"{said} (expanded from {expanded_from})"


def url_problem(url: str) -> str | None:
    """Why `url` is not an http(s) URL with a host, or None when it is one."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        return "it does not parse as a URL"
    if not parts.scheme:
        return "it has no scheme"
    if parts.scheme.lower() not in ("http", "https"):
        return "its scheme is not http or https"
    if not host:
        return "it has no host"
    if _URL_BREAK.search(url):
        return "it holds a space or a control character (percent-encode it: %20)"
    return None


WEBHOOK_EXAMPLE = "https://hooks.example.com/crond"
PING_EXAMPLE = "https://hc-ping.com/YOUR-UUID"


def check_url(written: str, environ: Mapping[str, str], example: str = WEBHOOK_EXAMPLE) -> str:
    """A webhook's or a ping's URL: http or https, with a host, once expanded. Returns
    `written` (the model keeps the text as written)."""
    url = _expanded(written, environ)
    if url is not None:
        why = url_problem(url)
        if why is not None:
            raise PydanticCustomError(
                "crond",
                f"{_described(written)} is not an http(s) URL with a host: {why} "
                f"(write e.g. {example})",
            )
    return written


def check_command(written: str | list[str], environ: Mapping[str, str]) -> str | list[str]:
    """A notifier's command: a program to run; no part can hold a NUL character (no
    program can take one). Its parts are not shown: they may carry a token."""
    parts = [written] if isinstance(written, str) else written
    if not parts:
        raise PydanticCustomError("crond", "an empty list has no program to run")
    for index, part in enumerate(parts):
        expanded = _expanded(part, environ)
        if "\0" in part or (expanded is not None and "\0" in expanded):
            message = (
                "holds a NUL character (\\0), which no program can take (the command is not "
                "shown, it may hold a secret)"
            )
            if isinstance(written, str):
                raise PydanticCustomError("crond", f"the command {message}")
            raise _at(index, f"this item of the command {message}", at_key=False)
    return written


def check_headers(headers: dict[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """A webhook's headers: each name an HTTP token, each value (as written and once
    expanded) without a line break or NUL, which would forge further headers."""
    for name, written in headers.items():
        if not HEADER_NAME.fullmatch(name):
            raise _at(
                name,
                f"{quote(name)} is not an HTTP header name (letters, digits and "
                "!#$%&'*+.^_`|~- only, no spaces or colons)",
                at_key=True,
            )
        expanded = _expanded(written, environ)
        if _HEADER_BREAK.search(written) or (
            expanded is not None and _HEADER_BREAK.search(expanded)
        ):
            after = " once its ${NAME}s are expanded" if references(written) else ""
            raise _at(
                name,
                f"the value of the header {quote(name)} holds a line break or a NUL "
                f"character{after}, which no HTTP header can carry (the value is not "
                "shown, it may be a secret)",
                at_key=False,
            )
    return headers


def _at(key: str | int, message: str, *, at_key: bool) -> PydanticCustomError:
    """An error about the entry `key` of the mapping (or list) being checked, located at
    its key or its value (see problems._message)."""
    return PydanticCustomError("crond_at", message, {"crond_key": key, "crond_at_key": at_key})


def check_apprise(written: str, environ: Mapping[str, str]) -> str:
    """An Apprise URL: the extra installed, and the URL one Apprise can use."""
    try:
        with apprise_silenced():  # its first import logs too (its locale), in this thread
            apprise: Any = importlib.import_module("apprise")
    except ImportError:
        raise PydanticCustomError(
            "crond",
            f"apprise notifiers need the optional Apprise library: {_APPRISE_EXTRA} "
            "(or use a webhook or command notifier)",
        ) from None
    url = _expanded(written, environ)
    if url is None:
        return written
    with apprise_silenced(), warnings.catch_warnings():
        # Its plugins, loaded on first use, import modules Python deprecates: not the
        # schedules file's business.
        warnings.simplefilter("ignore", DeprecationWarning)
        usable = apprise.Apprise.instantiate(url)
    if not usable:
        raise PydanticCustomError(
            "crond",
            f"{_described(written, show_apprise)} is not a URL Apprise can use (see its "
            "list of services and their URLs: https://github.com/caronc/apprise/wiki)",
        )
    return written


class _OtherThreads(logging.Filter):
    """Passes the records of every thread but one."""

    def __init__(self, thread: int) -> None:
        super().__init__()
        self.thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread


@contextlib.contextmanager
def apprise_silenced() -> Iterator[None]:
    """Apprise's log records, from this thread, dropped for the time of the block: it logs
    the URLs it parses, passwords and tokens included. (Only this thread's: a reload
    checks a file while other threads may be logging through Apprise on purpose.)"""
    logger = logging.getLogger("apprise")  # every module of Apprise logs through this one
    dropped = _OtherThreads(threading.get_ident())
    logger.addFilter(dropped)
    try:
        yield
    finally:
        logger.removeFilter(dropped)


def shown(kind: str, written: str | list[str]) -> str:
    """What may be shown of a notifier (logs, `crond status`): its kind and, of a webhook,
    `scheme://host/…`, of an Apprise URL, `scheme://…`, of a command, the program's base
    name, from the text as written (never an expanded value or an argument)."""
    if isinstance(written, str) and kind != "command":
        show = show_apprise if kind == "apprise" else show_url
        return f"{kind} {escape(show(written))}"
    return f"command {program(written)}"


def program(command: str | list[str]) -> str:
    """The base name of the program a command runs: the first word of a shell string
    that is not an assignment (`TOKEN=x page` runs page), or the first item of an argv."""
    if isinstance(command, list):
        first = command[0] if command else ""
    else:
        try:
            words = shlex.split(command)
        except ValueError:  # an unclosed quote: sh will say so when it runs
            words = command.split()
        first = next((w for w in words if not _ASSIGNMENT.match(w)), "")
    name = os.path.basename(first.rstrip("/")) or "?"  # noqa: PTH119  (a text, not a path)
    if len(name) > _SHOWN_PROGRAM:
        name = name[:_SHOWN_PROGRAM] + "..."
    return escape(name)


Path = tuple[str | int, ...]


def unset_names(
    notifiers: object, jobs: object, defaults: object, environ: Mapping[str, str]
) -> list[tuple[Path, str]]:
    """(path, NAME) for each `${NAME}` the file's texts take from the environment that is
    not set in `environ`, or set to "": notifiers' URLs, headers and commands, and the `ping` of the
    defaults and of each job that sets its own (`jobs`: as written, before defaults are
    merged). Read from the data as parsed: wrong shapes are the models' to report."""
    found: list[tuple[Path, str]] = []
    for path, text in _expandable(notifiers, jobs, defaults):
        if isinstance(text, str) and "$" in text:
            found.extend((path, name) for name in expand(text, environ)[1])
    return found


def _expandable(notifiers: object, jobs: object, defaults: object) -> Iterator[tuple[Path, object]]:
    """Every place of the data where a `${NAME}` is expanded, with what stands there."""
    if isinstance(notifiers, dict):
        for name, notifier in notifiers.items():
            if isinstance(notifier, dict):
                yield from _notifier_texts(("notifiers", name), notifier)
    if isinstance(defaults, dict):
        yield ("defaults", "ping"), defaults.get("ping")
    if isinstance(jobs, dict):
        for name, job in jobs.items():
            if isinstance(job, dict) and "ping" in job:
                yield ("jobs", name, "ping"), job["ping"]


def _notifier_texts(at: Path, notifier: dict[str, Any]) -> Iterator[tuple[Path, object]]:
    yield (*at, "webhook"), notifier.get("webhook")
    yield (*at, "apprise"), notifier.get("apprise")
    command = notifier.get("command")
    if isinstance(command, list):
        for index, part in enumerate(command):
            yield (*at, "command", index), part
    else:
        yield (*at, "command"), command
    headers = notifier.get("headers")
    if isinstance(headers, dict):
        for header, value in headers.items():
            yield (*at, "headers", header), value


def unset_message(name: str, environ: Mapping[str, str]) -> str:
    """What is said of a `${NAME}` that `expand` left as written: not set, or empty."""
    if name in environ:  # set to "": taken for not set (see secrets)
        return (
            f"${{{name}}} is set but empty in crond's environment (give it its value before "
            "crond starts: an empty secret is taken for one not set; $$ is a literal $)"
        )
    return (
        f"${{{name}}} is not set in crond's environment (export it before crond starts; "
        "$$ is a literal $)"
    )
