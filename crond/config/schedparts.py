"""A job's `at`, `start`, `end` and `max_runs` as the rest of crond sees them: its timing
with them (the union of its cron/every fires and its `at` instants, within its bounds:
crond/when/combined.py), the words `status` uses for them, and validate's warnings
(an `at` in the past). docs/schedules.md, "Schedules as a person writes them".
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from crond.config.places import Mark
from crond.config.problems import Problem
from crond.config.schedfields import instants
from crond.when.combined import AtTiming, BoundedTiming, UnionTiming
from crond.when.instants import resolve
from crond.when.zones import get_zone

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import tzinfo

    from crond.config.model import Job
    from crond.when.timing import Timing


class LoadedJob(Protocol):
    """What these functions read of a loaded job (config/loaded.py's, which uses them)."""

    @property
    def settings(self) -> Job: ...

    @property
    def zone(self) -> tzinfo: ...


class LoadedConfig(Protocol):
    """What `at_warnings` reads of a loaded file (config/loaded.py's)."""

    @property
    def path(self) -> str: ...

    @property
    def jobs(self) -> Mapping[str, LoadedJob]: ...


__all__ = [
    "at_only",
    "at_warnings",
    "bounds",
    "done_text",
    "parts_timing",
    "runs_left",
    "schedule_extras",
]


def bounds(job: LoadedJob) -> tuple[datetime | None, datetime | None]:
    """The job's `start` and `end` as UTC instants (None: not given)."""
    settings, zone = job.settings, job.zone
    start = None if settings.start is None else resolve(settings.start, zone)[0]
    end = None if settings.end is None else resolve(settings.end, zone)[0]
    return start, end


def at_only(job: LoadedJob) -> bool:
    """A job with `at` and no other schedule: done once its instants have run."""
    settings = job.settings
    return settings.at is not None and settings.cron is None and settings.every is None


def parts_timing(job: LoadedJob, inner: Timing | None) -> Timing:
    """`inner` (the cron/every fires, None for an `at`-only job) with the job's `at`
    instants and `start`/`end` bounds."""
    settings = job.settings
    timing: Timing
    if settings.at is not None:
        at = AtTiming(instants(settings.at, settings.timezone), job.zone)
        timing = at if inner is None else UnionTiming([inner, at])
    else:
        assert inner is not None  # a job has cron, every or at (model.Job._shape)
        timing = inner
    start, end = bounds(job)
    if start is None and end is None:
        return timing
    return BoundedTiming(timing, start, end)


def schedule_extras(job: LoadedJob) -> list[str]:
    """The words for `at`, `start`, `end` and `max_runs` in a schedule's text."""
    settings = job.settings
    if settings.at is None and settings.start is None and settings.end is None:
        return [] if settings.max_runs is None else [f"at most {settings.max_runs} runs"]
    zone = get_zone(settings.timezone or "UTC")
    said = []
    if settings.at is not None:
        first = [
            u.astimezone(zone).isoformat() for u, _ in instants(settings.at[:3], settings.timezone)
        ]
        more = len(settings.at) - len(first)
        said.append(f"at {', '.join(first)}" + (f" (+{more} more)" if more > 0 else ""))
    start, end = bounds(job)
    if start is not None:
        said.append(f"from {start.astimezone(zone).isoformat()}")
    if end is not None:
        said.append(f"until {end.astimezone(zone).isoformat()}")
    if settings.max_runs is not None:
        said.append(f"at most {settings.max_runs} runs")
    return said


def at_warnings(loaded: LoadedConfig, now: datetime, marks: dict[str, Mark]) -> list[Problem]:
    """An `at` instant already past (it never runs), and one whose local time a DST rule
    decided (docs/schedules.md), for `crond validate`."""
    found = []
    for name, job in loaded.jobs.items():
        settings = job.settings
        if settings.at is None or not settings.enabled:
            continue
        mark = marks.get(name, Mark(0, 0))
        resolved = instants(settings.at, settings.timezone)
        for i, (u, note) in enumerate(resolved):
            where: tuple[str | int, ...] = ("jobs", name, "at")
            if len(resolved) > 1:
                where = (*where, i)
            written = settings.at[i].isoformat()
            if u <= now:
                message = f"{written} is in the past ({u:%Y-%m-%dT%H:%M:%SZ}): it will not run"
                found.append(Problem.at(loaded.path, mark, where, message))
            elif note is not None:
                found.append(Problem.at(loaded.path, mark, where, note))
    return found


def done_text(
    job: LoadedJob, now: datetime, runs: int | None = None, *, no_fire_left: bool = False
) -> str | None:
    """Why a job whose schedule has no fire after `now` is done, in words for `status`
    (None: not one of the reasons below, e.g. an `@reboot` job). `runs`: its scheduled
    runs so far, when known (`max_runs`). `no_fire_left` (an enabled job whose schedule
    ran out): ended at its `end` even before that instant, its last slot being the last
    before `end`, which need not fall on a slot (`every: 2s`, `end` at :37); else (a
    disabled job) only once `end` has passed."""
    settings = job.settings
    if settings.max_runs is not None and runs is not None and runs >= settings.max_runs:
        return f"done: max_runs {settings.max_runs} reached"
    if at_only(job):
        return "done: its at instants have run"
    end = bounds(job)[1]
    if end is not None and (no_fire_left or end <= now):
        return f"ended at {end:%Y-%m-%dT%H:%M:%SZ} (end)"
    return None


def runs_left(job: LoadedJob, runs: int) -> bool:
    """Whether the job may still start a scheduled run after `runs` of them."""
    limit = job.settings.max_runs
    return limit is None or runs < limit
