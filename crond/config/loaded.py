"""What a load hands the rest of crond: the validated file, and for each job its name,
its settings and what is derived from them once (the parsed cron, the timing).

These are plain frozen values built by `loader` around the pydantic models of `model`:
nothing is set on a model after validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from crond.config.durations import format_duration
from crond.config.model import Config, Daemon, Job, Notifier
from crond.config.notifiers import shown
from crond.config.places import Mark
from crond.config.problems import Problem
from crond.config.schedfields import cron_texts
from crond.config.schedparts import parts_timing, schedule_extras
from crond.config.secrets import expand, references
from crond.when import cronforms, timing
from crond.when.combined import UnionTiming
from crond.when.cronexpr import CronExpr
from crond.when.dayfilter import CalendarTiming, DayRules
from crond.when.timeline import steady_offset
from crond.when.zones import get_zone


@dataclass(frozen=True, slots=True)
class LoadedJob:
    """One job: its name in the file and its settings (defaults merged in). Two loaded
    jobs are equal when those are: what a reload compares. (Slots: one per job, kept for
    the daemon's life; see the idle RSS in docs/performance.md.)"""

    name: str
    settings: Job
    cron_expr: CronExpr | None = field(default=None, compare=False)  # `settings.cron`, parsed
    # `settings.ping` with its ${NAME}s expanded: a secret, never shown (repr too).
    ping: str | None = field(default=None, compare=False, repr=False)
    # `days`, `skip`, `nth_day`, `roll` resolved (docs/schedules.md, "Calendars"), and a
    # digest of the calendars they use: a reload re-times the job when they change.
    day_rules: DayRules | None = field(default=None, compare=False, repr=False)
    calendars_key: str = ""
    # A `cron` list's expressions after the first (`cron_expr`), parsed: the fires are
    # the union of all (docs/schedules.md).
    more_exprs: tuple[CronExpr, ...] = field(default=(), compare=False)

    @property
    def cron_exprs(self) -> tuple[CronExpr, ...]:
        """Every expression of `cron`, in the file's order."""
        return () if self.cron_expr is None else (self.cron_expr, *self.more_exprs)

    @property
    def zone(self) -> ZoneInfo:
        return get_zone(self.settings.timezone or "UTC")

    @property
    def reboot(self) -> bool:
        """`cron: "@reboot"`: once per host boot, when the daemon starts."""
        return self.cron_expr is not None and self.cron_expr.reboot

    def make_timing(self) -> timing.Timing:
        """The job's schedule as a Timing (when/timing.py), its jitter included."""
        settings = self.settings
        offset = timing.jitter_offset(self.name, settings.jitter)
        inner: timing.Timing | None = None
        if self.cron_expr is not None:
            if self.cron_expr.reboot:
                return timing.RebootTiming()
            if self.more_exprs:
                zone = self.zone
                inner = UnionTiming([timing.CronTiming(e, zone, offset) for e in self.cron_exprs])
            else:
                inner = timing.CronTiming(self.cron_expr, self.zone, offset)
        elif settings.every is not None:
            inner = timing.IntervalTiming(settings.every, settings.anchor, offset, self.zone)
        elif settings.at is None:  # `after` alone: only its parents' ends start it
            return timing.RebootTiming()  # (no slot in time, as for @reboot)
        if inner is not None and self.day_rules is not None:
            inner = CalendarTiming(inner, self.day_rules, self.zone)
        if settings.at is None and settings.start is None and settings.end is None:
            assert inner is not None  # a job has cron, every, at or after (model.Job._shape)
            return inner
        return parts_timing(self, inner)

    @property
    def warned_at_cron(self) -> bool:
        """Whether `crond validate` may warn at the job's `cron` line: an `@reboot` job
        (reboot_warnings), one in a zone with DST changes (dst_warnings), or one whose
        L, W or # form stands beside a restricted other day field (or_warnings)."""
        expr = self.cron_expr
        if expr is None:
            return False
        return expr.reboot or steady_offset(self.zone) is None or self.day_or is not None

    @property
    def day_or(self) -> str | None:
        """R2's "either" beside an L, W or # form, in words (docs/schedules.md)."""
        expr = self.cron_expr
        if expr is None or expr.day_and or not expr.day_forms:
            return None
        fields = expr.source.split()
        return cronforms.or_warning(fields[2], fields[4], expr.day_forms)

    @property
    def schedule_text(self) -> str:
        if self.reboot:
            return "@reboot"
        settings = self.settings
        said = []
        if settings.cron is not None:
            said.append(f"{' | '.join(cron_texts(settings.cron))} ({settings.timezone or 'UTC'})")
        elif settings.every is not None:
            said.append(f"every {format_duration(settings.every)}")
        elif settings.at is None:
            said.append(self.after_text)
        return " + ".join([*said, *schedule_extras(self)])

    @property
    def after_text(self) -> str:
        """`after` in words: "after extract succeeds", "after load fails or extract ends"."""
        verbs = {"success": "succeeds", "failure": "fails", "finished": "ends"}
        after = self.settings.after or {}
        return "after " + " or ".join(f"{job} {verbs[on.value]}" for job, on in after.items())


NotifierKind = Literal["webhook", "command", "apprise"]


@dataclass(frozen=True)
class NotifierSpec:
    """A notifier of the file, ready to send: its ${NAME}s expanded (secrets, kept out of
    repr and never logged). `shown` is what may be shown of it (docs/alerting.md,
    Secrets): "webhook https://hooks.slack.com/…", "command page", "apprise mailtos://…"."""

    name: str
    kind: NotifierKind
    target: str | tuple[str, ...] = field(repr=False)  # URL; command string or argv
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # webhook only
    repeat: timedelta = timedelta(hours=1)
    shown: str = ""


def notifier_spec(name: str, notifier: Notifier, environ: Mapping[str, str]) -> NotifierSpec:
    """The NotifierSpec of a validated notifier, its texts expanded from `environ` (a
    name not set there stays as written: the load has reported it)."""

    def expanded(text: str) -> str:
        return expand(text, environ)[0]

    kind = notifier.kind
    written = notifier.webhook or notifier.apprise or notifier.command
    assert written is not None  # a notifier has one of the three (model.Notifier._shape)
    target: str | tuple[str, ...]
    if isinstance(written, list):
        target = tuple(expanded(part) for part in written)
    else:
        target = expanded(written)
    headers = tuple((key, expanded(value)) for key, value in (notifier.headers or {}).items())
    return NotifierSpec(name, kind, target, headers, notifier.repeat, shown(kind, written))


@dataclass(frozen=True)
class LoadedConfig:
    """A whole schedules file, loaded: `config` as validated, its jobs by name (in file
    order), and where the `cron` lines that may be warned of stand (`warned_at_cron`:
    the others, most lines of most files, are not kept)."""

    path: str
    config: Config
    jobs: dict[str, LoadedJob]
    cron_marks: dict[str, Mark] = field(default_factory=dict, compare=False)
    notifiers: dict[str, NotifierSpec] = field(default_factory=dict)
    # What the load warns of without refusing the file (`crond validate` shows them):
    # `${NAME}`s not set in the environment, when the load did not refuse them (`crond
    # run` refuses the file), and replica settings that change nothing without a database.
    env_warnings: list[Problem] = field(default_factory=list, compare=False)
    # Where the `at` values stand (validate's warnings of an instant in the past).
    at_marks: dict[str, Mark] = field(default_factory=dict, compare=False)

    @property
    def daemon(self) -> Daemon:
        return self.config.daemon


def secret_names(loaded: LoadedConfig) -> frozenset[str]:
    """The environment variables the file takes by `${NAME}` for the daemon's own use
    (notifiers, their headers, pings, the database): secrets a job must not inherit
    (docs/running.md, "The job's environment")."""
    config = loaded.config
    texts = [config.daemon.database or ""]
    for notifier in config.notifiers.values():
        command = notifier.command
        texts += [notifier.webhook or "", notifier.apprise or ""]
        texts += command if isinstance(command, list) else [command or ""]
        texts += (notifier.headers or {}).values()
    texts += (job.ping or "" for job in config.jobs.values())
    return frozenset(name for text in texts for name in references(text))


def dst_warnings(loaded: LoadedConfig, now: datetime) -> list[Problem]:
    """Fixed-time jobs whose wall time falls into a DST gap or repeat in the coming year."""
    found = []
    # Jobs that share an expression and a zone share their sentences: each pair is
    # worked out once.
    sentences: dict[tuple[CronExpr, ZoneInfo], list[str]] = {}
    for name, job in loaded.jobs.items():
        if job.cron_expr is None or not job.settings.enabled or job.reboot:
            continue
        for i, expr in enumerate(job.cron_exprs):
            key = (expr, job.zone)
            said = sentences.get(key)
            if said is None:
                said = sentences[key] = timing.dst_warnings(*key, now)
            where: tuple[str | int, ...] = ("jobs", name, "cron")
            if job.more_exprs:
                where = (*where, i)
            for sentence in said:
                mark = loaded.cron_marks.get(name, Mark(0, 0))
                found.append(Problem.at(loaded.path, mark, where, sentence))
    return found


def or_warnings(loaded: LoadedConfig) -> list[Problem]:
    """A job whose L, W or # form stands beside a restricted other day field: R2 fires it
    on the days of either field, more than the form alone says."""
    return [
        Problem.at(
            loaded.path,
            loaded.cron_marks.get(name, Mark(0, 0)),
            ("jobs", name, "cron"),
            job.day_or,
        )
        for name, job in loaded.jobs.items()
        if job.settings.enabled and job.day_or is not None
    ]


def reboot_warnings(loaded: LoadedConfig) -> list[Problem]:
    """`@reboot` with `state_dir: none`: without a store, every daemon start is a boot."""
    state_dir = loaded.daemon.state_dir
    if state_dir is None or state_dir.strip().lower() != "none":
        return []
    return [
        Problem.at(
            loaded.path,
            loaded.cron_marks.get(name, Mark(0, 0)),
            ("jobs", name, "cron"),
            "@reboot without a state store (daemon.state_dir: none) runs at every daemon "
            "start, not once per boot",
        )
        for name, job in loaded.jobs.items()
        if job.settings.enabled and job.reboot
    ]
