"""What `crond status` shows of the named locks (docs/workflows.md): who holds each lock
and which runs wait for one, as the running daemon (each replica) keeps them in the
state store at each change (crond/daemon/view.py), so `status` needs no daemon answer.
In the table's form, a line a lock under it; with `--json`, a `"locks"` object in the
line of each job that holds or waits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

# The meta keys the daemon keeps them under (a replica's: the key and its name).
KEY = "locks:"


def merged(kept: Mapping[str, str]) -> tuple[dict[str, list[str]], list[dict[str, Any]]]:
    """The holders of each lock (`job@slot`) and the waiting runs, of every daemon that
    kept them (a value that does not read is passed over)."""
    holds: dict[str, list[str]] = {}
    waits: list[dict[str, Any]] = []
    for key, value in sorted(kept.items()):
        try:
            got = json.loads(value)
            replica = key.removeprefix(KEY) or None
            for lock, holders in got["holds"].items():
                holds.setdefault(str(lock), []).extend(map(str, holders))
            waits += [{**w, **({"replica": replica} if replica else {})} for w in got["waits"]]
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return holds, sorted(waits, key=lambda w: (str(w.get("slot")), str(w.get("job"))))


def lock_lines(holds: Mapping[str, list[str]], waits: Sequence[dict[str, Any]]) -> str:
    """`lock db: held by backup@…Z; waiting: vacuum@…Z (until …Z)`, a line a lock."""
    names = sorted({*holds, *(str(w.get("lock")) for w in waits)})
    lines = []
    for name in names:
        held = ", ".join(holds.get(name, ())) or "nobody here"
        waiting = [
            f"{w['job']}@{w['slot']} (until {w['deadline']})"
            for w in waits
            if w.get("lock") == name
        ]
        lines.append(f"lock {name}: held by {held}; waiting: {', '.join(waiting) or 'none'}")
    return "\n".join(lines)


def with_locks(text: str, jobs: Sequence[str], kept: Mapping[str, str], *, as_json: bool) -> str:
    """`crond status`'s output (`jobs`: the job of each line of the JSON form) with the
    locks the daemon kept. JSON: a job's line gets `"locks": {"holds": [LOCK...],
    "waiting": [{"slot", "lock", "held_by", "deadline"}...]}` while it holds or waits."""
    holds, waits = merged(kept)
    if not holds and not waits:
        return text
    if not as_json:
        return f"{text}\n{lock_lines(holds, waits)}"
    lines = text.split("\n") if text else []
    if len(lines) != len(jobs):  # (never: one line a row)
        return text
    mine: dict[str, dict[str, Any]] = {}
    for lock, holders in holds.items():
        for holder in holders:
            job = holder.split("@", 1)[0]
            mine.setdefault(job, {"holds": [], "waiting": []})["holds"].append(lock)
    for w in waits:
        entry = mine.setdefault(str(w.get("job")), {"holds": [], "waiting": []})
        entry["waiting"].append({k: v for k, v in w.items() if k not in ("job", "reason")})
    out = []
    for line, job in zip(lines, jobs, strict=True):
        found = mine.get(job)
        if found is None:
            out.append(line)
            continue
        found["holds"] = sorted(set(found["holds"]))
        out.append(f'{line[:-1]},"locks":{json.dumps(found, separators=(",", ":"))}}}')
    return "\n".join(out)
