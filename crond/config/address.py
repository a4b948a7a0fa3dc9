"""HOST:PORT, as `daemon.metrics` and `crond run --metrics` take it (docs/alerting.md):
one check for both, so the file and the flag say the same of the same mistake."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

MAX_TEXT = 300  # a host name is at most 253 characters
_PORT = 9464  # the port of the examples: Prometheus's registry lists it for crond
_PATHS = "(the paths are /metrics and /healthz)"


class AddressError(ValueError):
    """Not HOST:PORT; the message says what would be right."""


def split_address(written: object) -> tuple[str, int]:
    """`written` as (host, port): `127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`; port 0
    asks the system for a free one. The host is required: an address that listens on
    every interface must say so (`0.0.0.0:9464`). A whole number (YAML's `9464`) is
    refused as a port without its host."""
    if isinstance(written, int) and not isinstance(written, bool):
        text, shown = str(written), str(written)
    elif isinstance(written, str) and len(written) <= MAX_TEXT:
        text, shown = written, repr(written)
    else:
        raise AddressError(f"not an address; {_choices(_PORT)}")
    if "://" in text:
        raise AddressError(f"{shown}: a URL is not HOST:PORT: write {_from_url(text)} {_PATHS}")
    before, slash, _ = text.partition("/")
    if slash:
        write = f"write {before}" if before else _choices(_PORT)
        raise AddressError(f"{shown}: a path is not part of it: {write} {_PATHS}")
    host, sep, port_text = text.rpartition(":")
    if not sep:
        if text.isascii() and text.isdigit():
            raise AddressError(f"{shown} has no host: {_choices(text)}")
        write = f"write {text}:{_PORT}" if _is_host_name(text) else _choices(_PORT)
        raise AddressError(f"{shown} has no port: {write}")
    if not host:
        raise AddressError(f"{shown} has no host: {_choices(port_text or _PORT)}")
    host = _host(host, shown)
    if not (port_text.isascii() and port_text.isdigit() and int(port_text) <= 65535):
        raise AddressError(f"{shown}: the port must be a number from 0 to 65535; {_choices(_PORT)}")
    return host, int(port_text)


def _host(host: str, shown: str) -> str:
    """The host of HOST:PORT without its brackets; raises AddressError."""
    if host.startswith("["):
        if not host.endswith("]"):
            raise AddressError(f"{shown}: an IPv6 host is written in brackets, e.g. [::1]:{_PORT}")
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise AddressError(f"{shown}: {host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise AddressError(f"{shown}: write an IPv6 host in brackets, e.g. [::1]:{_PORT}")
    elif not _is_host_name(host):
        raise AddressError(f"{shown}: {host!r} is not a host name or address; {_choices(_PORT)}")
    return host


def _is_host_name(text: str) -> bool:
    return bool(text) and all(c.isascii() and (c.isalnum() or c in "-.") for c in text)


def _choices(port: object) -> str:
    return f"write HOST:PORT, e.g. 127.0.0.1:{port} (this host only) or 0.0.0.0:{port}"


def _from_url(url: str) -> str:
    """The HOST:PORT a URL such as `http://127.0.0.1:9464/metrics` names (its port, else
    the usual one), or the example."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not _is_host_name(host.replace(":", "")):
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port if port is not None else _PORT}"
