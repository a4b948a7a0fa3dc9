"""The Prometheus text format, written by hand for the metrics page (metrics.py): numbers
as the format writes them (Go's float formatting), label values escaped as it says
(backslash, double quote, newline: notifier and job names may hold any character), and
a histogram's samples.

Each is the fast path of what prometheus-client's `generate_latest` does through several
calls per sample; the metrics tests check the page byte for byte against it.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import utils as prometheus_utils

# Numbers as the format writes them (Go's float formatting); untyped in prometheus-client.
go_float: Callable[[float], str] = prometheus_utils.floatToGoString


def label_value(text: str) -> str:
    """`text` as a quoted label value's inside: backslash, newline and quote escaped."""
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def number(value: float) -> str:
    """A sample's value as go_float writes it."""
    # Most values of a big file are 0: that case skips go_float's work.
    return "0.0" if value == 0 else go_float(value)


def whole(value: int) -> str:
    """A count as go_float writes it (Go switches to an exponent from 1e6 on): the
    common case without its float conversions, half a render's time otherwise."""
    return f"{value}.0" if 0 <= value < 1_000_000 else go_float(value)


_KEYS: dict[str, str] = {}  # outcomes, reasons, results (named by crond's code), escaped


def escaped(text: str) -> str:
    """label_value of one of the few values crond's code names, escaped once."""
    value = _KEYS.get(text)
    if value is None:
        value = _KEYS[text] = label_value(text)
    return value


def histogram(
    out: list[str],
    name: str,
    labels: str,
    buckets: list[int],
    total: float,
    *,
    les: tuple[str, ...],
) -> None:
    """One histogram's samples: cumulative buckets, then _count and _sum."""
    pairs = f"{labels}," if labels else ""
    bucket = f"{name}_bucket{{{pairs}le="
    tail = f"{{{labels}}}" if labels else ""
    seen = 0
    for le, count in zip(les, buckets, strict=True):
        seen += count
        out.append(f'{bucket}"{le}"}} {whole(seen)}\n')
    out.append(f"{name}_count{tail} {whole(seen)}\n{name}_sum{tail} {number(total)}\n")
