"""A job's whole schedule in words, for the jobs page and a job's page: its `cron`
expressions (crond/when/words.py), `every`, `at`, `start`/`end`, `max_runs`, `after`,
its calendars and jitter, joined with "; "."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from crond.config.durations import format_duration
from crond.config.schedparts import schedule_extras
from crond.when import timing
from crond.when.words import cron_words, duration_words, ordinal

if TYPE_CHECKING:
    from crond.config.loaded import LoadedConfig, LoadedJob


class Said:
    """Per load of the file: its jobs' schedules in words, made when first shown (a page
    shows 200 of 10,000 jobs), and the zones its jobs fire in."""

    def __init__(self) -> None:
        self._cfg: LoadedConfig | None = None
        self._words: dict[str, str] = {}
        self._zones: list[str] = []

    def _of(self, cfg: LoadedConfig) -> None:
        if cfg is not self._cfg:
            self._cfg, self._words, self._zones = cfg, {}, []

    def words(self, cfg: LoadedConfig, name: str) -> str:
        self._of(cfg)
        found = self._words.get(name)
        if found is None:
            found = self._words[name] = schedule_words(cfg.jobs[name])
        return found

    def zones(self, cfg: LoadedConfig) -> list[str]:
        """The most used first (ties: the file's own `timezone` first, then by name): the
        timeline's choices, its first the default."""
        self._of(cfg)
        if not self._zones:
            default = cfg.config.timezone
            used = Counter(j.settings.timezone or default for j in cfg.jobs.values())
            self._zones = sorted(used, key=lambda z: (-used[z], z != default, z)) or [default]
        return self._zones


def schedule_words(job: LoadedJob) -> str:
    """ "at 02:00, Monday to Friday", "every 15 minutes; only on days of business-days; the
    last of them each month", "after extract succeeds"."""
    settings = job.settings
    said: list[str] = []
    if job.cron_exprs:
        said.append("; and ".join(cron_words(e) for e in job.cron_exprs))
    elif settings.every is not None:
        every = duration_words(settings.every)
        if settings.anchor is not None:
            every += f", counted from {settings.anchor.isoformat()}"
        said.append(every)
    if settings.after:
        said.append(job.after_text)
    said.extend(_extra(item) for item in schedule_extras(job))
    said.extend(_calendars(job))
    if settings.jitter and not job.reboot:
        shift = timing.jitter_offset(job.name, settings.jitter)
        said.append(
            f"each fire {format_duration(shift)} late (jitter up to "
            f"{format_duration(settings.jitter)})"
        )
    return "; ".join(said)


def _extra(item: str) -> str:
    """schedule_extras' "at T1, T2" is a one-shot list: "once at T1, T2"."""
    return f"once {item}" if item.startswith("at ") and not item.startswith("at most") else item


def _calendars(job: LoadedJob) -> list[str]:
    settings = job.settings
    said = []
    if settings.days is not None:
        said.append(f"only on days of {settings.days}")
    if settings.nth_day is not None:
        n = settings.nth_day
        if n > 0:
            which = f"the {ordinal(n)}"
        elif n == -1:
            which = "the last"
        else:
            which = f"the {ordinal(-n)} from last"
        said.append(f"{which} of {'those days' if settings.days else 'its days'} each month")
    if settings.skip is not None:
        skip = [settings.skip] if isinstance(settings.skip, str) else settings.skip
        said.append(f"never on days of {' or '.join(skip)}")
    if settings.roll is not None and settings.days is not None:
        where = "next" if settings.roll.value == "next" else "previous"
        said.append(f"a fire on another day moves to the {where} day of {settings.days}")
    return said
