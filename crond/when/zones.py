"""IANA time zones: lookup with suggestions, what `local` means on this host, and which
tz database is in use. The one module of crond.when that reads files (the zone paths)."""

from __future__ import annotations

import contextlib
import importlib
import os
import zoneinfo
from functools import cache
from pathlib import Path

LOCAL = "local"
_LOCALTIME = Path("/etc/localtime")  # the host's zone, when $TZ names none


class ZoneError(ValueError):
    """str(e) names the bad zone and, when one is close, the zone that was probably meant."""


def _all_zones() -> dict[str, str]:
    return {name.lower(): name for name in zoneinfo.available_timezones()}


# The caches of this module are applied by assignment rather than with `@`: mutmut, which
# `make mutate` runs, leaves decorated functions alone.
_available = cache(_all_zones)


def _find_zone(name: str) -> zoneinfo.ZoneInfo:
    """The zone called `name` (an IANA name, or `local` for the host's zone)."""
    if name == LOCAL:
        return host_zone()
    zone = None
    # zoneinfo refuses a path (absolute, with "..", not normalized) and a file not a zone.
    with contextlib.suppress(ValueError, zoneinfo.ZoneInfoNotFoundError, OSError):
        zone = zoneinfo.ZoneInfo(name)
    if zone is not None and _spelled_as_on_disk(name):
        return zone  # the usual case, without listing every zone (~30 ms)
    if name.lower() in _available() and _available()[name.lower()] != name:
        raise ZoneError(
            f'unknown time zone "{name}" (did you mean "{_available()[name.lower()]}"?)'
        )
    if zone is not None:
        return zone
    import difflib  # noqa: PLC0415  (only to word the error: ~1 ms of every start)

    close = difflib.get_close_matches(name.lower(), list(_available()), n=1)
    hint = (
        f' (did you mean "{_available()[close[0]]}"?)'
        if close
        else " (an IANA name such as Europe/Berlin, UTC, or local)"
    )
    raise ZoneError(f'unknown time zone "{name}"{hint}')


get_zone = cache(_find_zone)


def _spelled_as_on_disk(name: str) -> bool:
    """Whether `name` is a zone file under the zone path, each part spelled as listed: on a
    case-insensitive file system `europe/berlin` loads too, and must be refused. False
    when unsure (zoneinfo's fallback `tzdata` package): the full listing decides then."""
    for root in zoneinfo.TZPATH:
        if (Path(root) / name).is_file():
            where = root
            for part in name.split("/"):
                if part not in _listing(where):
                    return False
                where = f"{where}/{part}"
            return True
    return False


def _entries(directory: str) -> frozenset[str]:
    return frozenset(entry.name for entry in os.scandir(directory))


_listing = cache(_entries)


def _read_host_zone() -> zoneinfo.ZoneInfo:
    """The host's zone: $TZ if it names one, else the zone /etc/localtime links to or
    holds, else UTC."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        with contextlib.suppress(ValueError, zoneinfo.ZoneInfoNotFoundError, OSError):
            return zoneinfo.ZoneInfo(tz)
    try:
        # A link into a zone directory names the zone by what follows the last /zoneinfo/;
        # a copy, or a zone the tz database lacks, is read as it is.
        _, into_zones, key = str(_LOCALTIME.resolve()).rpartition("/zoneinfo/")
        if into_zones:
            with contextlib.suppress(ValueError, zoneinfo.ZoneInfoNotFoundError):
                return zoneinfo.ZoneInfo(key)
        with _LOCALTIME.open("rb") as fh:
            return zoneinfo.ZoneInfo.from_file(fh, key="localtime")
    except (ValueError, OSError):
        return zoneinfo.ZoneInfo("UTC")


host_zone = cache(_read_host_zone)


def tzdata_version() -> str:
    """Which tz database zoneinfo uses: the system's, or the `tzdata` package's."""
    for root in zoneinfo.TZPATH:
        version_file = Path(root) / "tzdata.zi"
        try:
            with version_file.open("rb") as fh:
                first = fh.readline().split()
        except OSError:
            continue
        if first[:2] == [b"#", b"version"]:
            return f"system {first[-1].decode()} ({root})"
    try:
        fallback = importlib.import_module("tzdata")  # the optional fallback package
    except ImportError:
        return "unknown"
    return f"tzdata package {getattr(fallback, 'IANA_VERSION', '?')}"
