"""`crond next`: the next fires of many jobs, merged in time order, as a table or JSON lines.

Pure: given the jobs' timings and an instant, it computes and formats; cli.py reads the
file and the clock, and prints.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from crond.when.dayfilter import CalendarTiming
from crond.when.timing import Fire, Timing

__all__ = [
    "PreviewRow",
    "format_json_lines",
    "format_table",
    "hash_notes",
    "limit_notes",
    "next_fires",
    "removed_lines",
]


@dataclass(frozen=True)
class PreviewRow:
    job: str
    fire: Fire


def next_fires(timings: Mapping[str, Timing], after: datetime, n: int) -> list[PreviewRow]:
    """The next n fires of each job strictly after `after`, ordered by (instant, job).

    Every fire is listed anyway, so one sort of the whole list does it: a lazy merge of
    one generator per job compared (instant, job) tuples in Python at every step of a
    10,000-deep heap. Job names are unique, so no two rows compare equal. The rows are
    built with the collector paused by the caller, as a load is (`crond next`: see
    crond.config.loader.gc_paused): 10,000 jobs give 50,000 rows that live until printed,
    and no cycles.
    """
    rows = [
        PreviewRow(job, fire)
        for job, timing in timings.items()
        for fire in itertools.islice(timing.fires(after), n)
    ]
    rows.sort(key=_order)
    return rows


def _order(row: PreviewRow) -> tuple[datetime, str]:
    return row.fire.at, row.job


def utc_text(t: datetime) -> str:
    """ISO-8601 in UTC with a Z: seconds, or milliseconds when there are any (jitter)."""
    spec = "milliseconds" if t.microsecond else "seconds"
    return t.astimezone(UTC).replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def local_text(t: datetime) -> str:
    """ISO-8601 with the zone's offset, e.g. 2026-03-08T03:00:00-04:00."""
    return t.isoformat(timespec="milliseconds" if t.microsecond else "seconds")


def _offset(t: datetime) -> str:
    offset = t.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(offset) // timedelta(minutes=1)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _local_column(t: datetime) -> str:
    """'Sun 2026-03-08 03:00:00 EDT -04:00'; a numeric abbreviation ("+11") becomes the offset."""
    clock = f"{t:%a %Y-%m-%d %H:%M:%S}"
    if t.microsecond:
        clock += f".{t.microsecond // 1000:03d}"
    name = t.tzname() or ""
    if name == "UTC":
        return f"{clock} UTC"
    if not name or name[0] in "+-":
        return f"{clock} {_offset(t)}"
    return f"{clock} {name} {_offset(t)}"


def hash_notes(hashed: Mapping[str, tuple[str, str]], *, shown: int = 10) -> list[str]:
    """The `H` values of the listed jobs, resolved, a line a job: `hashed` maps a job to
    its cron as written and as its name resolves it ("H 2 * * *" -> "17 2 * * *"). At
    most `shown` jobs are named, the rest counted."""
    lines = [
        f'{job}: "{written}" runs as "{resolved}" (H is picked by the job\'s name)'
        for job, (written, resolved) in itertools.islice(hashed.items(), shown)
    ]
    if len(hashed) > shown:
        lines.append(f"and {len(hashed) - shown} more jobs with H")
    return lines


def limit_notes(
    job_limits: Mapping[str, int | None], daemon_limit: int | None, *, shown: int = 10
) -> list[str]:
    """What the table cannot show: a fire may not start at its time because of a
    `max_running` (docs/schedules.md). `job_limits`: the listed jobs' `max_running`.
    At most `shown` jobs are named, the rest counted."""
    notes = []
    limited = [(name, limit) for name, limit in job_limits.items() if limit is not None]
    if limited:
        named = ", ".join(f"{name} ({limit})" for name, limit in limited[:shown])
        more = f" and {len(limited) - shown} more" if len(limited) > shown else ""
        notes.append(
            f"max_running: a fire of {named}{more} is skipped while that many of the "
            "job's runs are going (job.skipped, reason max_running)"
        )
    if daemon_limit is not None:
        notes.append(
            f"daemon.max_running: {daemon_limit} runs at most at once; a fire beyond it "
            "waits (job.queued) and starts when a run ends, or is missed (reason queue) "
            "if its grace runs out first"
        )
    return notes


def wait_notes(
    chained: Mapping[str, str],
    locks: Mapping[str, Sequence[str]],
    capacity: Mapping[str, int],
    skipping: Collection[str],
) -> list[str]:
    """What the table cannot show of jobs that wait for each other (docs/workflows.md):
    each chained job's parents in words (`chained`: job -> "after extract succeeds"),
    and each lock the listed jobs take (`locks`: job -> its locks; `skipping`: the jobs
    with `on_lock: skip`), which may delay or skip a fire."""
    notes = [f"{job}: {text} (for the parent's slot)" for job, text in chained.items()]
    users: dict[str, list[str]] = {}
    for job, names in locks.items():
        for name in names:
            users.setdefault(name, []).append(job)
    for name, jobs in users.items():
        skip = [job for job in jobs if job in skipping]
        verb = "skips" if len(skip) == 1 else "skip"
        said = f"; {', '.join(skip)} {verb} instead (job.skipped, reason lock)" if skip else ""
        notes.append(
            f"lock {name} ({capacity.get(name, 1)} at once) for {', '.join(jobs)}: a fire "
            f"waits while it is full (job.waiting), up to its grace{said}"
        )
    return notes


def removed_lines(
    timings: Mapping[str, Timing], rows: Sequence[PreviewRow], after: datetime, limit: int
) -> list[str]:
    """What calendars took away from each job up to its last fire listed, one a line
    ("payroll  2026-12-25 09:00 skipped: de-holidays (Christmas Day)"), in time order; at
    most `limit` a job (docs/schedules.md, "Calendars")."""
    last: dict[str, datetime] = {}
    for row in rows:
        last[row.job] = row.fire.at
    found = []
    for job, timing in timings.items():
        if isinstance(timing, CalendarTiming):
            until = last.get(job, after + timedelta(days=366))
            found += [(r.fire.at, job, r) for r in timing.removed(after, until, limit)]
    found.sort(key=lambda item: (item[0], item[1]))
    return [f"{job}  {r.fire.local:%Y-%m-%d %H:%M} {r.why}" for _, job, r in found]


def format_table(rows: Sequence[PreviewRow], notes: Sequence[str] = ()) -> str:
    """A readable table: job, zone, local time (abbreviation and offset), UTC, note;
    then `notes` (`limit_notes`), one a line, after an empty line."""
    header = ("JOB", "ZONE", "LOCAL TIME", "UTC", "NOTE")
    lines = [header] + [  # a tuple per row, as many as next_fires's (the caller's gc note)
        (
            row.job,
            str(row.fire.local.tzinfo),
            _local_column(row.fire.local),
            utc_text(row.fire.at),
            row.fire.note or "",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    table = "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )
    return "\n\n".join([table, "\n".join(notes)]) if notes else table


def format_json_lines(rows: Sequence[PreviewRow]) -> str:
    """One JSON object a line, as docs/schedules.md shows it: {"job", "at", "local", "note"}."""
    return "\n".join(
        json.dumps(
            {
                "job": row.job,
                "at": utc_text(row.fire.at),
                "local": local_text(row.fire.local),
                "note": row.fire.note,
            }
        )
        for row in rows
    )
