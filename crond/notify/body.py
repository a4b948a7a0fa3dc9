"""What a notification says: its JSON body and its one readable line (docs/alerting.md).

The same body goes to every kind of notifier (a webhook's POST, a command's stdin,
Apprise's message), so that one script can read them all. Every key is always there,
null when it does not apply; instants are ISO-8601 UTC as everywhere in crond. The
output tail is bounded (4 KiB) and valid UTF-8 whatever the job printed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from crond.clock import iso_utc
from crond.config.durations import format_duration
from crond.run.attempt import Outcome, RunResult

TAIL_BYTES: Final = 4096
_JSON: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def body(
    event: str,
    job: str,
    host: str,
    at: datetime,
    text: str,
    *,
    run_id: str | None = None,
    slot: datetime | None = None,
    attempt: int | None = None,
    outcome: str | None = None,
    exit_code: int | None = None,
    duration_s: float | None = None,
    streak: int | None = None,
    output_tail: str | None = None,
) -> str:
    """The JSON body of a notification, as text."""
    return _JSON.encode(
        {
            "event": event,
            "job": job,
            "host": host,
            "run_id": run_id,
            "slot": None if slot is None else iso_utc(slot),
            "attempt": attempt,
            "outcome": outcome,
            "exit_code": exit_code,
            "duration_s": duration_s,
            "streak": streak,
            "output_tail": output_tail,
            "at": iso_utc(at),
            "text": text,
        }
    )


def tail_text(lines: Sequence[str], limit: int = TAIL_BYTES) -> str:
    """The last of `lines`, one per line, in at most `limit` bytes of UTF-8: whole lines
    where they fit; a last line longer than that alone keeps its end. Characters UTF-8
    cannot carry (lone surrogates) become U+FFFD."""
    kept: list[bytes] = []
    size = 0
    for line in reversed(lines):  # from the end: a long sequence costs only what is kept
        data = line.encode("utf-8", "replace")
        cost = len(data) + (1 if kept else 0)
        if size + cost > limit:
            if not kept:  # nothing fits whole: the end of the last line
                kept.append(data[-limit:])
            break
        kept.append(data)
        size += cost
    # A cut inside a character leaves a broken first byte sequence: dropped.
    return b"\n".join(reversed(kept)).decode("utf-8", "ignore")


def seconds_text(seconds: float) -> str:
    """A duration as people read it: `12.3s` under a minute, else crond's own format
    (`2h`, `45m`, `1h30m5s`), to the second."""
    if seconds < 59.95:
        return f"{seconds:.1f}".removesuffix(".0") + "s"
    return format_duration(timedelta(seconds=round(seconds)))


def failure_text(
    job: str, host: str, result: RunResult, attempts_allowed: int, timeout: timedelta | None
) -> str:
    """`backup failed on web-1: timeout after 2h, attempt 3 of 3`."""
    return (
        f"{job} failed on {host}: {_how(result, timeout)}, "
        f"attempt {result.attempt} of {max(attempts_allowed, result.attempt)}"
    )


def _how(result: RunResult, timeout: timedelta | None) -> str:
    code = result.exit_code
    if result.outcome is Outcome.TIMEOUT:
        after = format_duration(timeout) if timeout else seconds_text(result.duration_s)
        return f"timeout after {after}"
    if result.outcome is Outcome.KILLED:
        return "killed" if code is None or code >= 0 else f"killed by signal {-code}"
    if code is not None and code < 0:
        return f"signal {-code}"
    return f"exit {code}"


def success_text(job: str, host: str, duration_s: float) -> str:
    return f"{job} succeeded on {host} in {seconds_text(duration_s)}"


def recovered_text(job: str, host: str, streak: int) -> str:
    runs = "run" if streak == 1 else "runs"
    return f"{job} recovered on {host} after {streak} failed {runs}"


def missed_text(
    job: str, host: str, count: int, first: datetime, last: datetime, *, reason: str | None
) -> str:
    """`backup missed 4 slots on web-1 (02:30 to 05:30 UTC)`; the dates too when the
    slots are not all of one day."""
    first, last = first.astimezone(UTC), last.astimezone(UTC)
    fmt = "%H:%M" if first.date() == last.date() else "%Y-%m-%d %H:%M"
    if first.second or last.second or first.microsecond or last.microsecond:
        fmt += ":%S"  # every-second jobs: "17:28:03 to 17:28:09", not "17:28 to 17:28"
    when = first.strftime(fmt)
    if count > 1 or first != last:
        when += " to " + last.strftime(fmt)
    slots = "slot" if count == 1 else "slots"
    text = f"{job} missed {count} {slots} on {host} ({when} UTC)"
    return f"{text}: {_REASONS.get(reason, reason)}" if reason else text


def started_text(job: str, host: str) -> str:
    return f"{job} started on {host}"


# The reasons of job.missed and job.skipped events, as a sentence says them.
_REASONS: Final = {
    "grace": "too late to start (past its grace)",
    "queue": "it waited for a place under the daemon's max_running past its grace",
    "overlap": "the previous run is still going",
    "paused": "the job is paused",
    "max_running": "too many runs are going",
}


def skipped_text(job: str, host: str, reason: str) -> str:
    """`backup skipped on web-1: the previous run is still going`."""
    return f"{job} skipped on {host}: {_REASONS.get(reason, reason)}"


def lost_text(job: str, host: str) -> str:
    return f"{job} lost on {host}: its daemon died during the run"


def long_running_text(job: str, host: str, after: timedelta) -> str:
    return f"{job} still running on {host} after {format_duration(after)}"
