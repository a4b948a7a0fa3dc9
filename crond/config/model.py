"""The schedules file as frozen pydantic models: every field, its type, its default and
its check. A job field is added here and in docs/configuration.md, and nowhere else; the
`notifiers:` and `daemon:` sections are crond/config/sections.py, the field types they
share crond/config/fieldtypes.py (both taken in here, so `model.Daemon` and the rest
stay where callers look).

What a load derives from a job (its name, its parsed cron, its timing) is not kept in
these models: see `loader.LoadedJob`.
"""

from __future__ import annotations

import functools
import re
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import (
    AwareDatetime,
    BeforeValidator,
    Field,
    JsonValue,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from crond.config.calendars import CalendarDef
from crond.config.fieldtypes import (
    ENVIRON,
    MAX_RUNNING,
    NAME,
    Duration,
    EnvValue,
    FrozenModel,
    Grace,
    Interval,
    OnLock,
    WarnAfter,
    check_shape,
    check_zone,
    environ_of,
    field_error,
    no_nul,
)
from crond.config.notifiers import (
    PING_EXAMPLE,
    check_url,
)
from crond.config.schedfields import CRONS_SCHEMA, At, Instant, check_crons, check_schedule
from crond.config.sections import Daemon, Notifier
from crond.config.waitfields import After, LockCapacities, Locks
from crond.config.web import Web
from crond.config.wording import quote
from crond.when import cronparse

__all__ = [
    "CRONS",
    "ENVIRON",
    "JOB_NAME",
    "MAX_RUNNING",
    "PYTHON_REF",
    "Catchup",
    "Config",
    "Daemon",
    "Duration",
    "Job",
    "JobFields",
    "Notifier",
    "NotifyEvent",
    "OnLock",
    "Output",
    "Overlap",
    "Replicas",
    "Retry",
    "Roll",
    "parse_cron",
]

JOB_NAME = NAME
PYTHON_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")

# Files repeat the same few expressions and durations across thousands of jobs, and a
# parse is pure: each distinct text is parsed once per process.
parse_cron = functools.lru_cache(maxsize=8192)(cronparse.parse_cron)
# The validation context's key for the expressions parsed during one `loads` (text ->
# CronExpr): the jobs get theirs from there, parsed once, however many distinct ones a
# file has (past the cache's size, a second lookup per job would parse it again).
CRONS = "crons"


def _crons(value: object, info: ValidationInfo) -> object:
    # `parse_cron` is looked up at each call: a test counts the parses
    return check_crons(value, info, parse_cron, CRONS)


Crons = Annotated[str | list[str], BeforeValidator(_crons), WithJsonSchema(CRONS_SCHEMA)]


class Overlap(StrEnum):
    SKIP = "skip"
    ALLOW = "allow"
    REPLACE = "replace"
    QUEUE = "queue"  # one run waits for the one going (Temporal's BufferOne)


class Replicas(StrEnum):
    """Which replicas of a cluster run a job's slot (docs/replicas.md)."""

    ONE = "one"  # one of them: the one whose claim commits
    ALL = "all"  # each of them, once per replica name (host-local work)


class Roll(StrEnum):
    """Where a fire on a day outside `days` moves (docs/schedules.md, "Calendars")."""

    NEXT = "next"
    PREVIOUS = "previous"


class Catchup(StrEnum):
    NONE = "none"
    LATEST = "latest"
    ALL = "all"  # every missed slot within the window, oldest first, one at a time


class Output(StrEnum):
    LOG = "log"
    INHERIT = "inherit"
    DISCARD = "discard"


class NotifyEvent(StrEnum):
    """What a notifier can be told of a job (docs/alerting.md)."""

    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # a run whose last attempt, retries spent, did not succeed
    RECOVERED = "recovered"  # the first success after failed runs
    MISSED = "missed"
    SKIPPED = "skipped"
    LOST = "lost"
    LONG_RUNNING = "long_running"


class Retry(FrozenModel):
    """Up to `attempts` more attempts after a failure or timeout, with growing delays."""

    attempts: int = Field(default=0, ge=0, le=100)
    delay: Duration = timedelta(seconds=10)
    backoff: float = Field(default=2.0, ge=1.0, le=100.0)
    max_delay: Duration = timedelta(minutes=10)

    def delay_before(self, attempt: int) -> timedelta:
        """The wait before attempt number `attempt` (2, 3, ...)."""
        seconds = self.delay.total_seconds() * self.backoff ** max(0, attempt - 2)
        return min(timedelta(seconds=seconds), self.max_delay)


class JobFields(FrozenModel):
    """Every job field, all optional: the shape of `defaults`."""

    description: str | None = None
    cron: Crons | None = None  # one expression, or a list: their fires' union
    every: Interval | None = None
    at: At | None = None  # one-shot instants (docs/schedules.md)
    start: Instant | None = None  # fires only at or after this instant
    end: Instant | None = None  # fires only at or before this instant
    # The job stops firing after this many scheduled runs (counted in the state store).
    max_runs: Annotated[int, Field(ge=1, le=1_000_000_000, strict=True)] | None = None
    anchor: AwareDatetime | None = None
    timezone: str | None = None
    jitter: Duration | None = None
    command: Annotated[str, Field(min_length=1)] | list[str] | None = None
    python: str | None = None
    args: list[JsonValue] | None = None
    kwargs: dict[str, JsonValue] | None = None
    interpreter: str | None = None
    workdir: str | None = None
    env: dict[str, EnvValue] | None = None
    user: str | None = None
    timeout: Duration | None = None
    kill_after: Duration | None = None
    overlap: Overlap | None = None
    grace: Grace | None = None
    retry: Retry | None = None
    output: Output | None = None
    enabled: bool | None = None
    catchup: Catchup | None = None
    catchup_window: Grace | None = None
    catchup_max: Annotated[int, Field(ge=1, le=100_000, strict=True)] | None = None
    history: Annotated[int, Field(ge=1, le=100_000)] | None = None
    # Telling people (docs/alerting.md): notifier name -> events; a healthchecks.io URL;
    # one `long_running` when a run is still going this long after its start.
    notify: dict[str, list[NotifyEvent]] | None = None
    ping: str | None = None
    warn_after: WarnAfter | None = None
    # `overlap: allow` only: a fire while this many runs of the job are going is skipped.
    max_running: Annotated[int, Field(ge=1, le=MAX_RUNNING, strict=True)] | None = None
    # With `daemon.database`: one replica runs each slot, or each replica does.
    replicas: Replicas | None = None
    # Calendars (docs/schedules.md, "Calendars"): names of `calendars:`.
    days: str | None = None
    skip: str | list[str] | None = None
    nth_day: Annotated[int, Field(ge=-31, le=31, strict=True)] | None = None
    roll: Roll | None = None
    # Locks (docs/workflows.md): names of `locks:`, all taken at once before a run starts.
    locks: Locks | None = None
    on_lock: OnLock | None = None
    # Chains: the jobs whose runs' ends start a run of this one (`JOB`: its successes).
    after: After | None = None

    @field_validator("locks")
    @classmethod
    def _locks(cls, value: list[str] | None) -> list[str] | None:
        # A lock written twice is one lock: a run takes one place of it.
        return None if value is None else list(dict.fromkeys(value))

    @field_validator("nth_day")
    @classmethod
    def _nth_day(cls, value: int | None) -> int | None:
        if value == 0:
            raise PydanticCustomError(
                "crond", "0 is no day: 1 is the first day of the month, -1 the last"
            )
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        return check_zone(value)

    @field_validator("python")
    @classmethod
    def _python_ref(cls, value: str | None) -> str | None:
        if value is not None and not PYTHON_REF.fullmatch(value):
            raise PydanticCustomError(
                "crond",
                f'"{value}" is not a python reference (write package.module:callable, '
                'e.g. "myapp.tasks:cleanup")',
            )
        return value

    @field_validator("command")
    @classmethod
    def _argv(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and not value:
            raise PydanticCustomError("crond", "an empty list has no program to run")
        for part in [value] if isinstance(value, str) else value or []:
            no_nul(part)
        return value

    @field_validator("workdir", "user", "interpreter", "python")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return no_nul(value)

    @field_validator("ping")
    @classmethod
    def _ping(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_url(value, environ_of(info), PING_EXAMPLE)

    @field_validator("notify")
    @classmethod
    def _notify(
        cls, value: dict[str, list[NotifyEvent]] | None
    ) -> dict[str, list[NotifyEvent]] | None:
        # `{ops: []}` unsubscribes from a notifier `defaults.notify` subscribes to: the
        # notifier is not kept. An event written twice is one subscription.
        if value is None:
            return None
        return {name: list(dict.fromkeys(events)) for name, events in value.items() if events}

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name, text in (value or {}).items():
            if not name or "=" in name or "\0" in name:
                raise PydanticCustomError(
                    "crond",
                    f"{quote(name)} cannot be an environment variable's name (it must be "
                    "non-empty, without = or a NUL character)",
                )
            if "\0" in text:
                raise PydanticCustomError(
                    "crond",
                    f"the value of {quote(name)} holds a NUL character, which no "
                    "environment can carry (the value is not shown, it may be a secret)",
                )
        return value


class Job(JobFields):
    """One job, with the file's defaults already merged in."""

    timezone: str | None = None
    jitter: Duration = timedelta(0)
    env: dict[str, EnvValue] = Field(default_factory=dict)
    kill_after: Duration = timedelta(seconds=10)
    overlap: Overlap = Overlap.SKIP
    grace: Grace = timedelta(minutes=5)
    retry: Retry = Retry()
    output: Output = Output.LOG
    enabled: bool = True
    catchup: Catchup = Catchup.NONE
    catchup_window: Grace = timedelta(days=1)
    catchup_max: Annotated[int, Field(ge=1, le=100_000, strict=True)] = 100
    history: Annotated[int, Field(ge=1, le=100_000)] = 100
    notify: dict[str, list[NotifyEvent]] = Field(default_factory=dict)
    replicas: Replicas = Replicas.ONE
    on_lock: OnLock = OnLock.WAIT

    @model_validator(mode="after")
    def _shape(self) -> Self:
        # Runs once per job: the usual job is checked with plain comparisons, and the
        # helpers only run to say what is wrong.
        if (
            (self.cron is None) is (self.every is None)
            or (self.every is not None and self.timezone is not None)
            or self.end is not None
        ):
            check_schedule(self)  # (the usual job, cron or every alone, skips the call)
        check_shape(self.locks, self.overlap, self.after, self.replicas)
        if (self.command is None) is (self.python is None):
            _exactly_one(self, "command", "python", "something to run")
        if self.max_running is not None and self.overlap is not Overlap.ALLOW:
            field_error(
                "max_running",
                f"max_running applies to overlap: allow only (this job has overlap: "
                f"{self.overlap.value}, which runs one at a time already)",
            )
        if self.roll is not None and self.days is None and self.nth_day is None:
            field_error(
                "roll",
                "roll moves a fire on a day outside days: give days (or nth_day) too",
            )
        if self.anchor is not None and self.every is None:
            field_error("anchor", "anchor applies to every jobs only")
        if self.python is None and not (
            self.args is None and self.kwargs is None and self.interpreter is None
        ):
            for name in ("args", "kwargs", "interpreter"):
                if getattr(self, name) is not None:
                    field_error(name, f"{name} applies to python jobs only")
        return self


def _exactly_one(job: Job, first: str, second: str, what: str, more: str = "") -> None:
    has_first, has_second = getattr(job, first) is not None, getattr(job, second) is not None
    if has_first and has_second:
        field_error(second, f"give either {first} or {second}, not both")
    if not has_first and not has_second:
        field_error("", f"{what} is missing: give {first} or {second}{more}")


class Config(FrozenModel):
    """A whole schedules file."""

    version: Literal[1] = 1
    timezone: str = "UTC"
    defaults: JobFields = JobFields()
    daemon: Daemon = Daemon()
    notifiers: dict[str, Notifier] = Field(default_factory=dict)
    calendars: dict[str, CalendarDef] = Field(default_factory=dict)
    # name -> capacity: at most this many runs hold the lock at once (docs/workflows.md).
    locks: LockCapacities = Field(default_factory=dict)
    web: Web = Web()  # `crond web` (docs/web.md); the daemon ignores it
    jobs: dict[str, Job]

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        check_zone(value)
        return value
