"""structlog, configured once: one event per line on stderr, JSON or console.

Every event carries `event`, `level` and `timestamp` (UTC ISO-8601). Writing a log line
never raises: a closed or broken stderr (journald restarted) must not stop scheduling.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import EventDict, FilteringBoundLogger, WrappedLogger

LogFormat = Literal["json", "console"]
LEVELS = ("debug", "info", "warning", "error", "critical")


class SafeWriter:
    """A structlog logger that writes whole lines and swallows I/O errors."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.failures = 0

    def msg(self, message: str) -> None:
        try:
            self._stream.write(message + "\n")
            self._stream.flush()
        except (OSError, ValueError):  # broken pipe, closed file: keep scheduling
            self.failures += 1

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


# Built once: json.dumps with any option builds a new encoder per call, which was about
# half of the rendering's cost (3.5 of 7.5 µs an event; a run logs at least two).
_JSON = json.JSONEncoder(default=str, ensure_ascii=False, separators=(",", ":"))


# JSON lets these stand raw inside a string, but line-based tools (Python's splitlines,
# some log shippers) take them for line breaks: a job's output line holding one would
# read as two events. Escaped, each event stays one line.
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def _encode(event_dict: EventDict) -> str:
    text = _JSON.encode(event_dict)
    return text if text.isascii() else text.translate(_LINE_BREAKS)


def _render_json(_: WrappedLogger, __: str, event_dict: EventDict) -> str:
    return _encode(event_dict)


# syslog priorities: journald reads a `<N>` at the start of a line on a stream it owns
# (SyslogLevelPrefix=, on by default), strips it, and files the line at that priority.
_PRIORITY = {"debug": 7, "info": 6, "warning": 4, "error": 3, "critical": 2}


def _render_json_for_journal(_: WrappedLogger, __: str, event_dict: EventDict) -> str:
    """JSON with its syslog priority in front, for journald: `journalctl -p err` then
    shows failed runs, reload failures and store errors, and nothing else."""
    return f"<{_PRIORITY.get(event_dict.get('level', 'info'), 6)}>" + _encode(event_dict)


def writes_to_journal(stream: TextIO) -> bool:
    """Whether `stream` is systemd's journal stream for this service ($JOURNAL_STREAM
    names its device and inode; a pipe or file that replaced it does not match)."""
    expected = os.environ.get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return False
    return bool(expected) and expected == f"{st.st_dev}:{st.st_ino}"


def _order(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """timestamp, level and event first: a human reading raw JSON lines finds them at once."""
    head = {k: event_dict.pop(k) for k in ("timestamp", "level", "event") if k in event_dict}
    return {**head, **event_dict}


def choose_format(requested: LogFormat | None, stream: TextIO) -> LogFormat:
    """JSON unless stderr is a terminal, unless asked otherwise."""
    if requested:
        return requested
    try:
        return "console" if stream.isatty() else "json"
    except (OSError, ValueError):
        return "json"


def configure(
    fmt: LogFormat | None = None, level: str = "info", stream: TextIO | None = None
) -> FilteringBoundLogger:
    """Configure structlog for the whole process and return the root logger."""
    out = stream if stream is not None else sys.stderr
    chosen = choose_format(fmt, out)
    renderer: Any = (
        (_render_json_for_journal if writes_to_journal(out) else _render_json)
        if chosen == "json"
        else structlog.dev.ConsoleRenderer(colors=out.isatty(), sort_keys=False)
    )
    writer = SafeWriter(out)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _order,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=lambda *_: writer,
        # Each event otherwise re-runs structlog's set-up (~0.1 ms): the loop logs a lot.
        cache_logger_on_first_use=True,
    )
    logger: FilteringBoundLogger = structlog.get_logger()
    return logger
