"""HOST:PORT, as `daemon.metrics` and `crond run --metrics` take it (docs/alerting.md)."""

from __future__ import annotations

import ipaddress

MAX_TEXT = 300  # a host name is at most 253 characters


class AddressError(ValueError):
    """Not HOST:PORT; the message says what would be right."""


def split_address(text: str) -> tuple[str, int]:
    """`text` as (host, port): `127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`; port 0
    asks the system for a free one. The host is required: an address that listens on
    every interface must say so (`0.0.0.0:9464`)."""
    example = "write HOST:PORT, e.g. 127.0.0.1:9464 (this host only) or 0.0.0.0:9464"
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        raise AddressError(f"not an address; {example}")
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise AddressError(f"{text!r} has no port; {example}")
    if not host:
        raise AddressError(f"{text!r} has no host; {example}")
    if host.startswith("["):
        if not host.endswith("]"):
            raise AddressError(f"{text!r}: an IPv6 host is written in brackets, e.g. [::1]:9464")
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise AddressError(f"{text!r}: {host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise AddressError(f"{text!r}: write an IPv6 host in brackets, e.g. [::1]:9464")
    elif not all(part.isascii() and (part.isalnum() or part in "-.") for part in host):
        raise AddressError(f"{text!r}: {host!r} is not a host name or address; {example}")
    if not (port_text.isascii() and port_text.isdigit() and int(port_text) <= 65535):
        raise AddressError(f"{text!r}: the port must be a number from 0 to 65535; {example}")
    return host, int(port_text)
