"""Secrets in the schedules file: `${NAME}` taken from the daemon's environment, and URLs
shown without what may be secret.

A notifier's URL, its headers, a command and a job's `ping` may need a token: the file
says `${NAME}` and the value comes from crond's environment when the file is loaded, so
the file itself holds no secret (docs/alerting.md). `$$` is a literal `$`; a `$` before
anything else is kept as it is.

Whatever crond prints of such a URL (logs, `status`, errors) goes through `show_url`:
scheme and host only, never its path, query or user info; of an Apprise URL, through
`show_apprise`: its scheme only.

A name set to the empty string is taken for one not set: an `EnvironmentFile=` line
left empty (`HC_UUID=`) would otherwise send pings to the bare base URL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import unquote

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def references(text: str) -> list[str]:
    """The names `text` takes from the environment, in order, each once."""
    names = [m.group(1) for m in _REFERENCE.finditer(text) if m.group(1)]
    return list(dict.fromkeys(names))


def expand(text: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """`text` with each `${NAME}` replaced by its value in `environ`, and `$$` by `$`; and
    the names that are not set, or set to "" (left as written)."""
    missing: list[str] = []

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        if environ.get(name):
            return environ[name]
        if name not in missing:
            missing.append(name)
        return match.group(0)

    return _REFERENCE.sub(value, text), missing


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_POSTGRES = frozenset({"postgresql", "postgres"})
# A key=value connection string (`host=db.internal dbname=crond`): libpq's own syntax,
# read here for its host only; a value is a word, or quoted with '' and \ escapes.
_KEY_VALUE = re.compile(
    r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*('(?:[^'\\]|\\.)*'?|(?:[^\s'\\]|\\.)(?:[^\s\\]|\\.)*|)"
)
# A host name with a dot and a top-level domain, an IPv4 address, or localhost: what a
# URL written without its scheme starts with (a token has no such shape).
_HOST_NAME = re.compile(
    r"localhost|(?:[A-Za-z0-9-]{1,63}\.){1,10}[A-Za-z]{2,63}|[0-9]{1,3}(?:\.[0-9]{1,3}){3}"
)
_MAX_HOST = 100  # characters of a host shown: a message stays one readable line
# Where libpq connects without a host: PGHOST, else its Unix socket's default directory.
_NO_HOST = "(PGHOST or the local socket)"


def show_url(url: str) -> str:
    """A URL as crond shows it: `scheme://host/…`, never its user info, port, path or
    query, which could carry a token.

    A PostgreSQL URL on a Unix socket shows its directory, `postgresql://(socket
    /run/postgresql)/…`, and a key=value connection string its host only, `key=value
    string, host db.internal`. A text without a scheme (a mistake) shows its host as
    written, `hooks.example.com/…`, when it starts with one.
    """
    scheme = _SCHEME.match(url)
    if scheme is None:
        return _key_value_host(url) if _KEY_VALUE.match(url) else _bare_host(url)
    name = scheme.group(1).lower()
    rest = url[scheme.end() :]
    netloc, tail = _split_netloc(rest)
    hosts = [_host(part).lower() for part in netloc.rpartition("@")[2].split(",")]
    shown = ",".join(host for host in hosts if host)
    query = tail.partition("?")[2].partition("#")[0]
    if name in _POSTGRES and not shown:
        shown = _socket_hosts(_query_value(query, "host"))
    more = "/…" if tail not in ("", "/") else ""
    return f"{name}://{_bounded(shown)}{more}"


def show_apprise(url: str) -> str:
    """An Apprise URL as crond shows it: its scheme only, `tgram://…`. For many services
    the part after the scheme, host included, is the credential (a bot's token)."""
    scheme = _SCHEME.match(url)
    if scheme is not None:
        return f"{scheme.group(1).lower()}://…"
    first = _REFERENCE.match(url)
    if first is not None and first.group(1):  # `${APPRISE_URL}`: a name, not a secret
        return first.group() + ("…" if len(url) > first.end() else "")
    return "a URL without a scheme"


def _split_netloc(rest: str) -> tuple[str, str]:
    """(the authority, what follows it) of a URL's text after `scheme://`."""
    end = next((i for i, char in enumerate(rest) if char in "/?#"), len(rest))
    return rest[:end], rest[end:]


def _host(part: str) -> str:
    """The host of `host:port`, `[v6]:port` or `host`."""
    if part.startswith("["):
        return part[: part.find("]") + 1] if "]" in part else part
    return part.partition(":")[0]


def _query_value(query: str, key: str) -> str:
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if name == key:
            return unquote(value)
    return ""


def _socket_hosts(hosts: str) -> str:
    """libpq's `host` parameter as shown: a directory (or an @abstract name) is a Unix
    socket's; none at all is libpq's default."""
    if not hosts:
        return _NO_HOST
    shown = [f"(socket {h})" if h.startswith(("/", "@")) else h for h in hosts.split(",")]
    return ",".join(shown)


def _key_value_host(text: str) -> str:
    """A key=value connection string as shown: its host (as libpq reads the string:
    quoted values may hold spaces, \\ escapes), nothing of the rest."""
    host = ""
    for match in _KEY_VALUE.finditer(text):
        if match.group(1) == "host":
            value = match.group(2)
            quoted = value.startswith("'")
            value = value[1:].removesuffix("'") if quoted else value
            host = re.sub(r"\\(.)", r"\1", value)
    said = _socket_hosts(host) if host else _NO_HOST
    return f"key=value string, host {_bounded(said)}"


def _bare_host(text: str) -> str:
    """What a text without a scheme holds where a URL's host would be, as written, when it
    is a host name or address (or a `${NAME}`): a token pasted alone is not shown."""
    netloc, tail = _split_netloc(text)
    host = _host(netloc.rpartition("@")[2])
    if not (_HOST_NAME.fullmatch(host) or _REFERENCE.fullmatch(host)):
        return "a value without a scheme"
    return host + ("/…" if tail not in ("", "/") else "")


def _bounded(text: str) -> str:
    return text if len(text) <= _MAX_HOST else text[:_MAX_HOST] + "..."
