"""What `crond status` shows of the backfills going (`crond backfill`, docs/schedules.md):
in the table's form, a line each under it; with `--json`, a `"backfill"` object in its
job's line. Read from the store's `backfills` rows, so `status` needs no daemon answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from crond.clock import iso_utc
from crond.store.base import BackfillRow


def backfill_json(row: BackfillRow) -> dict[str, Any]:
    """`{"id", "from", "to", "total", "done", "succeeded", "failed", "next_slot"}`."""
    return {
        "id": row.id,
        "from": iso_utc(row.range_from),
        "to": iso_utc(row.range_to),
        "total": row.total,
        "done": row.succeeded + row.failed,
        "succeeded": row.succeeded,
        "failed": row.failed,
        "next_slot": None if row.next_slot is None else iso_utc(row.next_slot),
    }


def backfill_lines(backfills: Sequence[BackfillRow]) -> str:
    """`backfill ID of JOB: 12/50 done (1 failed), next slot 2026-...Z`, a line each."""
    lines = []
    for row in backfills:
        shown = backfill_json(row)
        nxt = shown["next_slot"] or "-"
        lines.append(
            f"backfill {row.id} of {row.job}: {shown['done']}/{row.total} done "
            f"({row.failed} failed), next slot {nxt}"
        )
    return "\n".join(lines)


def with_backfills(
    text: str, jobs: Sequence[str], backfills: Sequence[BackfillRow], *, as_json: bool
) -> str:
    """`crond status`'s output (`jobs`: the job of each line of the JSON form) with its
    backfills going. The JSON form keeps one object a job: a job's backfill going is a
    key of its line (`"backfill"`; absent while none goes)."""
    by_job: Mapping[str, BackfillRow] = {row.job: row for row in backfills}
    if not as_json:
        return f"{text}\n{backfill_lines(backfills)}"
    lines = text.split("\n") if text else []
    if len(lines) != len(jobs):  # (never: one line a row)
        return text
    out = []
    for line, job in zip(lines, jobs, strict=True):
        row = by_job.get(job)
        if row is None:
            out.append(line)
            continue
        shown = json.dumps(backfill_json(row), separators=(",", ":"))
        out.append(f'{line[:-1]},"backfill":{shown}}}')
    return "\n".join(out)
