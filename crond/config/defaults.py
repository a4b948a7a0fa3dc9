"""What each job of a file takes from the file around it: the fields of `defaults` that
are valid, merged into every job (kind by kind, `env` and `notify` key by key), the
file's `timezone` for its cron jobs, and the bound on how many values that copying makes.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from crond.config import places
from crond.config.model import JobFields
from crond.config.problems import Problem
from crond.when.zones import ZoneError, get_zone

# Fields that only make sense for one kind of job are not merged from `defaults` into
# the other kind, so `defaults: {interpreter: ...}` does not break every command job.
_ONLY_FOR = {
    "timezone": "cron",
    "anchor": "every",
    "args": "python",
    "kwargs": "python",
    "interpreter": "python",
}


# Mappings merged key by key: a job's `env: {A: "1"}` adds A to the defaults' env; its
# `notify: {ops: []}` replaces the defaults' list for `ops` (unsubscribes it).
_MERGED_BY_KEY = ("env", "notify")


def merge_all(defaults: dict[str, Any], jobs: dict[Any, Any], zone: Any) -> dict[Any, Any]:
    """Each job of `jobs` with `defaults` merged in (the job's own fields win; the env
    and notify mappings are merged key by key, the job's keys winning; a cron job gets
    the file's zone unless it has one; `defaults.max_running` goes to the `overlap: allow`
    jobs only, the only ones it applies to). What depends on `defaults` alone is worked out
    once, not once per job."""
    plain = _ONLY_FOR.keys().isdisjoint(defaults)  # the usual case: one C-level merge
    by_key = [(k, v) for k in _MERGED_BY_KEY if isinstance(v := defaults.get(k), dict)]
    limit_default = "max_running" in defaults
    merged_jobs = {}
    for name, job in jobs.items():
        if not isinstance(job, dict):
            merged_jobs[name] = job  # let validation report the wrong type
            continue
        if plain:
            merged = {**defaults, **job}
        else:
            merged = {}
            for key, value in defaults.items():
                needed = _ONLY_FOR.get(key)
                if needed is None or needed in job or (key == "timezone" and _local_times(job)):
                    merged[key] = value
            merged.update(job)
        for key, default in by_key:
            own = job.get(key)
            if isinstance(own, dict):
                merged[key] = {**default, **own}
        if "timezone" not in merged and ("cron" in job or _local_times(job)):
            merged["timezone"] = zone
        if limit_default and "max_running" not in job and merged.get("overlap") != "allow":
            del merged["max_running"]  # the default's limit is for `overlap: allow` jobs
        merged_jobs[name] = merged
    return merged_jobs


def _local_times(job: dict[Any, Any]) -> bool:
    """Whether a job without `cron` gives instants that may be local times (`at`, `start`,
    `end`: docs/schedules.md), read in the file's zone unless it has its own."""
    return any(job.get(key) is not None for key in ("at", "start", "end"))


def good_defaults(defaults: object, checks: dict[str, Any]) -> dict[str, Any]:
    """The fields of `defaults` that are valid: a bad one is reported once, at
    `defaults.FIELD`, and not merged into every job."""
    if not isinstance(defaults, dict):
        return {}
    try:
        JobFields.model_validate(defaults, context=checks)
    except ValidationError as exc:
        bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
    else:
        bad = set()
    # `grace:` with no value sets no default (merged, it would fail in every job)
    return {k: v for k, v in defaults.items() if k not in bad and v is not None}


def file_zone(zone: object) -> object:
    """The file's zone for its cron jobs; "UTC" when it is not one (reported once, at
    the top-level `timezone`)."""
    if not isinstance(zone, str):
        return "UTC"
    try:
        get_zone(zone)
    except ZoneError:
        return "UTC"
    return zone


# Every job gets the defaults' values and checks them as its own: a default of N values
# (a list's items, a mapping's entries, each counted) in a file of J jobs is N x J values
# to check. Past this many, the file is refused rather than read for minutes.
MAX_DEFAULT_VALUES = 1_000_000


def defaults_too_big(
    defaults: dict[str, Any], jobs: int, source: places.Source, filename: str
) -> Problem | None:
    """The problem, at the biggest field of `defaults`, when copying them into each of
    `jobs` jobs makes more than MAX_DEFAULT_VALUES values to check; else None."""
    if not defaults or not jobs:
        return None
    limit = MAX_DEFAULT_VALUES // jobs
    sizes = {key: _size(value, limit) for key, value in defaults.items()}
    total = sum(sizes.values())
    if total <= limit:
        return None
    biggest = max(sizes, key=lambda key: sizes[key])
    path = ("defaults", biggest)
    return Problem.at(
        filename,
        source.locate(path, key=True),
        path,
        f"copied into each of the {jobs:,} jobs, the defaults come to more than "
        f"{MAX_DEFAULT_VALUES:,} values to check (at most {limit:,} a job here); set this "
        "field in the jobs that need it instead",
    )


def _size(value: object, limit: int) -> int:
    """How many values `value` is (itself, and all inside it), counted to past `limit`."""
    count, stack = 0, [value]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count
