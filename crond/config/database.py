"""The checks of what the schedules file says about replicas (docs/replicas.md): the
shared database's connection string, the cluster's and the replica's names, and which
settings change nothing because no database is set.

The connection string is checked as libpq will read it, values included: libpq reads
`sslmode` or `port` only when it connects, so a typo would otherwise pass `validate` and
fail every connection. A password written in it is taken, with a warning: it belongs in
~/.pgpass or the environment (docs/replicas.md).

`daemon.database` is a libpq connection string, and it may hold a password: no message
here shows a key=value string at all, and a URL only as `secrets.show_url` shows it
(`postgresql://db.internal/…`). libpq's own parse errors quote pieces of the string, so
they are never passed on: each is worded here from what kind of error it is.

The PostgreSQL driver, psycopg 3, is an optional extra (`crond[postgres]`): it is imported
only when a file sets a database, to check the string the way libpq will read it.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic_core import PydanticCustomError

from crond import ownership
from crond.config import yamlsource
from crond.config.secrets import show_url
from crond.config.wording import close_matches, quote

POSTGRES_EXTRA = "pip install 'crond[postgres]'"
# The environment variable that gives the database in place of the file's (docs/
# configuration.md): with it set, the replica settings apply though the file has none.
DATABASE_ENV = "CROND_DATABASE_URL"
MAX_DATABASE = 4096  # characters: far beyond any real connection string
MAX_NAME = 200  # characters of a cluster's or a replica's name
_EXAMPLES = "e.g. postgresql://crond@db.internal/crond or host=db.internal dbname=crond"
_NOT_SHOWN = "(the value is not shown, it may hold a password)"
# libpq reads `postgresql://` and `postgres://` as URLs, lower case only: anything else
# that looks like a URL is one it would take for a (broken) key=value string.
_SCHEMES = ("postgresql://", "postgres://")
_URL_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_CONNINFO_START = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*=")
# A parameter's name that libpq does not know: shown, being a key (never a value).
_UNKNOWN_KEY = re.compile(
    r'invalid (?:connection option|URI query parameter:) "([A-Za-z_][A-Za-z0-9_]{0,63})"'
)
# libpq's parse errors, by a piece of their text, as crond words them: libpq's own text
# quotes the string (the password in it too).
_LIBPQ_REASONS = (
    ('missing "=" after', 'a word without "=" (write key=value pairs separated by spaces)'),
    ("unterminated quoted string", "a quoted value is not closed (with ')"),
    (
        'extra key/value separator "="',
        'a query parameter holds a second "=" (percent-encode it: %3D)',
    ),
    ('missing key/value separator "="', 'a query parameter has no "=" (write ?key=value)'),
    ("invalid percent-encoded token", "a % is not followed by two hex digits (write %25 for %)"),
    ("forbidden value %00", "it holds %00, a NUL character, which libpq refuses"),
    ("IPv6 host address", "an IPv6 host in [...] is empty or not closed"),
    ("unexpected character", 'a character after the host that is not ":" or "/"'),
)


def check_database(written: object) -> object:
    """`daemon.database`, before pydantic's own type check (what is not text is left to
    it): a libpq URL or key=value string that libpq can parse, with psycopg installed.
    Returns `written`."""
    if not isinstance(written, str):
        return written
    if len(written) > MAX_DATABASE:
        raise _error(
            f"a connection string of {len(written):,} characters is too long (at most "
            f"{MAX_DATABASE:,}) {_NOT_SHOWN}"
        )
    scheme = _URL_LIKE.match(written)
    is_url = scheme is not None
    shown = show_url(written) if is_url else "the key=value string"
    if "\0" in written:
        said = show_url(written) if is_url else "the connection string"
        raise _error(f"{said} holds a NUL character (\\0), which libpq cannot take {_NOT_SHOWN}")
    if not written.strip():
        raise _error(f"must not be empty: give a libpq URL or key=value string, {_EXAMPLES}")
    if scheme is not None and not written.startswith(_SCHEMES):
        # As written (show_url writes a scheme in lower case): "POSTGRESQL" is the mistake.
        raise _error(
            f"{shown} is not a PostgreSQL URL: its scheme is {quote(scheme.group()[:-3])}; "
            f"libpq takes postgresql:// and postgres:// (lower case), {_EXAMPLES}"
        )
    if not is_url and not _CONNINFO_START.match(written):
        raise _error(
            "the connection string is neither a libpq URL nor a key=value string "
            f"{_NOT_SHOWN}: write one, {_EXAMPLES}"
        )
    parsed = _conninfo(written)
    if isinstance(parsed, str):
        what = f"{shown} is not a URL libpq can read" if is_url else f"{shown} is not valid"
        hidden = "" if is_url else f" {_NOT_SHOWN}"
        raise _error(f"{what}: {parsed}{hidden}")
    wrong = _value_problem(parsed)
    if wrong is not None:
        raise _error(wrong)
    return written


def _conninfo(written: str) -> dict[str, Any] | str:
    """libpq's parameters in `written`, or why libpq cannot parse it, in crond's words.
    Raises the located error of the missing extra when psycopg cannot be imported."""
    try:
        # Here and nowhere else at load: psycopg is an optional extra, and a file without
        # a database must load without it (and without the time its import takes).
        from psycopg import Error  # noqa: PLC0415
        from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415
    except ImportError:
        raise _error(
            "a database needs the optional PostgreSQL driver, psycopg: "
            f"{POSTGRES_EXTRA} (or remove database: one daemon on its own keeps its state "
            "in its state directory)"
        ) from None
    try:
        return conninfo_to_dict(written)
    except (Error, UnicodeError, ValueError) as exc:
        return _reason(str(exc))


# The parameters whose values libpq reads only when it connects (a typo there would be
# a `database.unavailable` at every try, not an error at load): their choices, and the
# numeric ones. Values of these are never secrets, so they are shown.
_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "target_session_attrs": (
        "any", "read-write", "read-only", "primary", "standby", "prefer-standby",
    ),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
}  # fmt: skip
_WHOLE_NUMBER = re.compile(r"\s*[+-]?[0-9]{1,9}\s*")


def _value_problem(params: Mapping[str, Any]) -> str | None:
    """What is wrong with the value of a parameter libpq would refuse when connecting."""
    for key, choices in _CHOICES.items():
        value = params.get(key)
        if value is not None and value not in choices:
            close = close_matches(str(value), list(choices), cutoff=0.6)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            return f"{key} {quote(str(value))} is not one of {', '.join(choices)}{hint}"
    ports = params.get("port")
    for port in str(ports).split(",") if ports is not None else []:
        if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            return f"the port {quote(port)} is not a number from 1 to 65535"
    timeout = params.get("connect_timeout")
    if timeout is not None and not _WHOLE_NUMBER.fullmatch(str(timeout)):
        return (
            f"connect_timeout {quote(str(timeout))} is not a whole number of seconds "
            "(e.g. connect_timeout=10)"
        )
    return None


def _reason(libpq: str) -> str:
    """What libpq's message `libpq` says, without the pieces of the string it quotes."""
    unknown = _UNKNOWN_KEY.search(libpq)
    if unknown:
        return f'"{unknown.group(1)}" is not a libpq parameter'
    return next((said for piece, said in _LIBPQ_REASONS if piece in libpq), "libpq cannot read it")


def check_name(written: object, what: str) -> object:
    """A cluster's or a replica's name (`what`), before pydantic's own type check: 1 to
    200 printable characters, without whitespace at either end and without "/". Returns
    `written`."""
    if not isinstance(written, str):
        return written
    rule = f"a {what} name is 1 to {MAX_NAME} printable characters, without /"
    if not written:
        raise _error(f"must not be empty ({rule})")
    if len(written) > MAX_NAME:
        raise _error(f"{quote(written)} is {len(written):,} characters long ({rule})")
    if "\0" in written:
        raise _error(f"{quote(written)} holds a NUL character (\\0) ({rule})")
    if not written.isprintable():
        raise _error(f"{quote(written)} holds a control or other non-printable character ({rule})")
    if written != written.strip():
        raise _error(f"{quote(written)} starts or ends with a space; remove it ({rule})")
    if "/" in written:
        raise _error(f"{quote(written)} holds a / ({rule})")
    return written


def _error(message: str) -> PydanticCustomError:
    return PydanticCustomError("crond", message)


Path = tuple[str | int, ...]
_DAEMON_FIELDS = ("cluster", "replica", "replica_timeout", "fencing")


def has_database(data: Mapping[Any, Any], environ: Mapping[str, str]) -> bool:
    """Whether the file's daemons share a database (replicas): `daemon.database` in the
    file, or the environment's."""
    daemon = data.get("daemon")
    return (isinstance(daemon, dict) and daemon.get("database") is not None) or bool(
        environ.get(DATABASE_ENV)
    )


def without_database(
    data: Mapping[Any, Any], jobs: object, environ: Mapping[str, str]
) -> list[tuple[Path, str]]:
    """(path, message) for each replica setting of the file, as written (`jobs`: before
    defaults are merged), that changes nothing because no database is set, in the file or
    in the environment. Read from the data as parsed: wrong shapes are the models' to
    report."""
    daemon = data.get("daemon")
    daemon = daemon if isinstance(daemon, dict) else {}
    if has_database(data, environ):
        return []
    return [(path, _unused(path[-1])) for path in _replica_settings(daemon, data, jobs)]


def _replica_settings(
    daemon: dict[Any, Any], data: Mapping[Any, Any], jobs: object
) -> Iterator[Path]:
    for name in _DAEMON_FIELDS:
        if daemon.get(name) is not None:
            yield ("daemon", name)
    defaults = data.get("defaults")
    if isinstance(defaults, dict) and defaults.get("replicas") is not None:
        yield ("defaults", "replicas")
    if isinstance(jobs, dict):
        for name, job in jobs.items():
            if isinstance(job, dict) and job.get("replicas") is not None:
                yield ("jobs", name, "replicas")


def _unused(field: str | int) -> str:
    return (
        f"{field} applies with daemon.database only (or {DATABASE_ENV} in crond's "
        "environment): without a database there is one daemon, and it changes nothing"
    )


REPLICA_ENV = "CROND_REPLICA"


def written_database(path: pathlib.Path) -> object:
    """The file's `daemon.database` as written (None: none), read without the checks of a
    load (those are `loader.load_file`'s); `...` when the file cannot be read or parsed."""
    try:
        text = ownership.read_schedules_file(path, enforce=False).decode("utf-8")
    except (ownership.FileRefused, UnicodeDecodeError):
        return ...
    data = yamlsource.parse(text, keep=frozenset()).data
    daemon = data.get("daemon") if isinstance(data, dict) else None
    return daemon.get("database") if isinstance(daemon, dict) else None


def replica_given_unused(
    file_database: object, flag: str | None, environ: Mapping[str, str]
) -> list[str]:
    """What `crond run` warns of a replica's name given outside the file (`--replica`,
    `CROND_REPLICA`) that changes nothing, no database being set (`file_database`: the
    file's `daemon.database` as parsed): the words `crond validate` has for the file's
    own `replica:`."""
    if file_database is not None or environ.get(DATABASE_ENV):
        return []
    given = (("--replica", flag), (REPLICA_ENV, environ.get(REPLICA_ENV)))
    return [_unused(where) for where, value in given if value]


_IN_THE_FILE = (
    "the connection string holds a password, which belongs outside the schedules file: put "
    "it in ~/.pgpass of the user crond runs as (mode 0600), or PGPASSWORD in the unit's "
    'environment (docs/replicas.md, "Deploying")'
)


def password_written(data: Mapping[Any, Any]) -> list[tuple[Path, str]]:
    """(path, message) when the file's `daemon.database` holds a password (a warning: it
    works, but the file is read by `validate`, kept in version control, copied to every
    host). Read from the data as parsed: a wrong one is the model's to report."""
    daemon = data.get("daemon")
    written = daemon.get("database") if isinstance(daemon, dict) else None
    if not isinstance(written, str) or len(written) > MAX_DATABASE or "\0" in written:
        return []
    try:
        parsed = _conninfo(written)
    except PydanticCustomError:  # no psycopg: the model reports it at this line
        return []
    if isinstance(parsed, str) or not parsed.get("password"):
        return []
    return [(("daemon", "database"), _IN_THE_FILE)]
