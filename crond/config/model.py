"""The schedules file as frozen pydantic models: every field, its type, its default and
its check. A job field is added here and in docs/configuration.md, and nowhere else.

What a load derives from a job (its name, its parsed cron, its timing) is not kept in
these models: see `loader.LoadedJob`.
"""

from __future__ import annotations

import functools
import re
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from crond.config.address import AddressError, split_address
from crond.config.database import (
    DATABASE_ENV,
    MAX_DATABASE,
    MAX_NAME,
    check_database,
    check_name,
)
from crond.config.durations import DurationError, format_duration, parse_duration
from crond.config.notifiers import (
    PING_EXAMPLE,
    check_apprise,
    check_command,
    check_headers,
    check_url,
)
from crond.config.wording import kind_of, quote, show
from crond.when import cronexpr
from crond.when.zones import ZoneError, get_zone

JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
PYTHON_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_DURATION_SCHEMA = {
    "anyOf": [
        {"type": "integer", "minimum": 0, "description": "seconds"},
        {"type": "string", "pattern": r"^\s*(\d+(ms|s|m|h|d))+\s*$|^\s*\d+\s*$"},
    ]
}


# Files repeat the same few expressions and durations across thousands of jobs, and a
# parse is pure: each distinct text is parsed once per process.
parse_cron = functools.lru_cache(maxsize=8192)(cronexpr.parse_cron)
# The validation context's key for the expressions parsed during one `loads` (text ->
# CronExpr): the jobs get theirs from there, parsed once, however many distinct ones a
# file has (past the cache's size, a second lookup per job would parse it again).
CRONS = "crons"
# The validation context's key for the environment `${NAME}`s are expanded from, for the
# checks of what they expand to (config/notifiers.py); without it, only texts that take no
# name are checked.
ENVIRON = "environ"
# The highest `max_running` (a job's, the daemon's): far beyond what a host can run, and
# low enough that a typo (an extra zero or ten) is said rather than taken.
MAX_RUNNING = 100_000
# How many heartbeats a replica may miss before the others take it for dead: the least
# `replica_timeout` is this many times `heartbeat`.
REPLICA_HEARTBEATS = 3
_parse_duration = functools.lru_cache(maxsize=8192)(parse_duration)


def _duration(value: object) -> timedelta:
    # What is not a short text or a whole number is refused here, in crond's words (a
    # list or a long text would be echoed whole).
    if isinstance(value, bool) or not isinstance(value, (str, int)) or len(str(value)) > 100:
        raise PydanticCustomError(
            "crond",
            f"{show(value)} is not a duration (use whole seconds or units like 90s, 5m, 1h30m)",
        )
    try:
        return _parse_duration(value) if isinstance(value, str) else parse_duration(value)
    except DurationError as exc:
        raise PydanticCustomError("crond", str(exc)) from None


# A bound is checked in the same call as the parse: one Python call per value instead of
# two (with an after-validator), over the tens of thousands of durations of a big file.
_ONE_SECOND = timedelta(seconds=1)


def _interval(value: object) -> timedelta:
    delta = _duration(value)
    if delta < _ONE_SECOND:
        raise PydanticCustomError("crond", "an interval must be at least 1s")
    return delta


def _grace(value: object) -> timedelta:
    delta = _duration(value)
    if delta < _ONE_SECOND:
        raise PydanticCustomError(
            "crond", "grace must be at least 1s (a start is always a little late)"
        )
    return delta


def _warn_after(value: object) -> timedelta:
    delta = _duration(value)
    if not delta:
        raise PydanticCustomError(
            "crond",
            "warn_after must be more than 0s (how long after its start a run that is "
            "still going is reported as long_running)",
        )
    return delta


def _replica_timeout(value: object) -> timedelta:
    delta = _duration(value)
    if delta < _ONE_SECOND:
        raise PydanticCustomError(
            "crond",
            "replica_timeout must be at least 1s (and at least 3 heartbeats: how long a "
            "replica may go silent before the others take it for dead)",
        )
    return delta


Duration = Annotated[timedelta, BeforeValidator(_duration), WithJsonSchema(_DURATION_SCHEMA)]
WarnAfter = Annotated[timedelta, BeforeValidator(_warn_after), WithJsonSchema(_DURATION_SCHEMA)]
Interval = Annotated[timedelta, BeforeValidator(_interval), WithJsonSchema(_DURATION_SCHEMA)]
Grace = Annotated[timedelta, BeforeValidator(_grace), WithJsonSchema(_DURATION_SCHEMA)]
ReplicaTimeout = Annotated[
    timedelta, BeforeValidator(_replica_timeout), WithJsonSchema(_DURATION_SCHEMA)
]


def _env_value(value: object) -> str:
    # An env value may be a secret: a message names its kind, never the value (null,
    # true and false say no more than their kind).
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    shown = kind_of(value)
    if value is None or isinstance(value, bool):
        raise PydanticCustomError("crond_unquoted", "not text")  # worded in problems.py
    raise PydanticCustomError(
        "crond",
        f"{shown} is not a string (env values are text; numbers are turned into text); "
        "the value is not shown, it may be a secret",
    )


EnvValue = Annotated[str, BeforeValidator(_env_value), WithJsonSchema({"type": "string"})]


class Overlap(StrEnum):
    SKIP = "skip"
    ALLOW = "allow"
    REPLACE = "replace"


class Replicas(StrEnum):
    """Which replicas of a cluster run a job's slot (docs/replicas.md)."""

    ONE = "one"  # one of them: the one whose claim commits
    ALL = "all"  # each of them, once per replica name (host-local work)


class Catchup(StrEnum):
    NONE = "none"
    LATEST = "latest"


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


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


class Retry(_Model):
    """Up to `attempts` more attempts after a failure or timeout, with growing delays."""

    attempts: int = Field(default=0, ge=0, le=100)
    delay: Duration = timedelta(seconds=10)
    backoff: float = Field(default=2.0, ge=1.0, le=100.0)
    max_delay: Duration = timedelta(minutes=10)

    def delay_before(self, attempt: int) -> timedelta:
        """The wait before attempt number `attempt` (2, 3, ...)."""
        seconds = self.delay.total_seconds() * self.backoff ** max(0, attempt - 2)
        return min(timedelta(seconds=seconds), self.max_delay)


def _no_nul(value: str | None) -> str | None:
    """No program can be given a NUL character (it ends a C string): refused here,
    rather than failing every run of the job."""
    if value is not None and "\0" in value:
        raise PydanticCustomError(
            "crond", f"{show(value)} holds a NUL character (\\0), which no program can take"
        )
    return value


def _check_zone(value: str | None) -> str | None:
    if value is not None:
        try:
            get_zone(value)
        except ZoneError as exc:
            raise PydanticCustomError("crond", str(exc)) from None
    return value


class JobFields(_Model):
    """Every job field, all optional: the shape of `defaults`."""

    description: str | None = None
    cron: str | None = None
    every: Interval | None = None
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

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            crons = info.context.get(CRONS) if info.context else None
            if crons is None or value not in crons:
                try:
                    expr = parse_cron(value)
                except cronexpr.CronError as exc:
                    raise PydanticCustomError("crond", f'"{value}": {exc}') from None
                if crons is not None:
                    crons[value] = expr
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        return _check_zone(value)

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
            _no_nul(part)
        return value

    @field_validator("workdir", "user", "interpreter", "python")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return _no_nul(value)

    @field_validator("ping")
    @classmethod
    def _ping(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_url(value, _environ(info), PING_EXAMPLE)

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
    history: Annotated[int, Field(ge=1, le=100_000)] = 100
    notify: dict[str, list[NotifyEvent]] = Field(default_factory=dict)
    replicas: Replicas = Replicas.ONE

    @model_validator(mode="after")
    def _shape(self) -> Self:
        # Runs once per job: the usual job is checked with plain comparisons, and the
        # helpers only run to say what is wrong.
        if (self.cron is None) is (self.every is None):
            _exactly_one(self, "cron", "every", "a schedule")
        if (self.command is None) is (self.python is None):
            _exactly_one(self, "command", "python", "something to run")
        if self.every is not None and self.timezone is not None:
            _field_error(
                "timezone",
                "an every job runs in absolute time; remove timezone "
                "(or use cron for a local time of day)",
            )
        if self.max_running is not None and self.overlap is not Overlap.ALLOW:
            _field_error(
                "max_running",
                f"max_running applies to overlap: allow only (this job has overlap: "
                f"{self.overlap.value}, which runs one at a time already)",
            )
        if self.anchor is not None and self.every is None:
            _field_error("anchor", "anchor applies to every jobs only")
        if self.python is None and not (
            self.args is None and self.kwargs is None and self.interpreter is None
        ):
            for name in ("args", "kwargs", "interpreter"):
                if getattr(self, name) is not None:
                    _field_error(name, f"{name} applies to python jobs only")
        return self


def _exactly_one(job: Job, first: str, second: str, what: str) -> None:
    has_first, has_second = getattr(job, first) is not None, getattr(job, second) is not None
    if has_first and has_second:
        _field_error(second, f"give either {first} or {second}, not both")
    if not has_first and not has_second:
        _field_error("", f"{what} is missing: give {first} or {second}")


def _field_error(field: str, message: str) -> None:
    raise PydanticCustomError("crond_field", message, {"field": field})


def _environ(info: ValidationInfo) -> dict[str, str]:
    context = info.context
    found = context.get(ENVIRON) if context else None
    return found if found is not None else {}


class Notifier(_Model):
    """A named place to tell (docs/alerting.md): exactly one of webhook, command, apprise.
    The texts may hold `${NAME}`, expanded from crond's environment at load."""

    webhook: str | None = None
    command: Annotated[str, Field(min_length=1)] | list[str] | None = None
    apprise: str | None = None
    headers: dict[str, str] | None = None  # webhook only
    repeat: Duration = timedelta(hours=1)  # a failing streak is told at most this often

    @field_validator("webhook")
    @classmethod
    def _webhook(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_url(value, _environ(info))

    @field_validator("apprise")
    @classmethod
    def _apprise(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_apprise(value, _environ(info))

    @field_validator("command")
    @classmethod
    def _command(
        cls, value: str | list[str] | None, info: ValidationInfo
    ) -> str | list[str] | None:
        return None if value is None else check_command(value, _environ(info))

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str] | None, info: ValidationInfo) -> dict[str, str] | None:
        return None if value is None else check_headers(value, _environ(info))

    @model_validator(mode="after")
    def _shape(self) -> Self:
        given = [kind for kind in _NOTIFIER_KINDS if getattr(self, kind) is not None]
        if not given:
            _field_error("", "a notifier needs one of webhook, command or apprise")
        if len(given) > 1:
            _field_error(
                given[1],
                f"give one of webhook, command or apprise, not {given[0]} and {given[1]} "
                "(a notifier is one place to tell; define another for the second)",
            )
        if self.headers is not None and self.webhook is None:
            _field_error("headers", "headers apply to webhook notifiers only")
        authorization = any(name.lower() == "authorization" for name in self.headers or {})
        if authorization and self.webhook is not None and _has_user_info(self.webhook):
            _field_error(
                "headers",
                "the webhook's URL has user info (user:password@), which is sent as an "
                "Authorization header and would replace this one; give one or the other",
            )
        return self

    @property
    def kind(self) -> Literal["webhook", "command", "apprise"]:
        """Which of webhook, command and apprise this notifier is."""
        if self.webhook is not None:
            return "webhook"
        return "command" if self.command is not None else "apprise"


_NOTIFIER_KINDS = ("webhook", "command", "apprise")


def _has_user_info(url: str) -> bool:
    """Whether `url`, as written, has `user@` or `user:password@` before its host."""
    rest = url.partition("://")[2]
    return "@" in rest.split("/", 1)[0]


class Daemon(_Model):
    liveness_file: str | None = None
    # Unset: the default place (state.default_dir); "none": no state store at all.
    state_dir: Annotated[str, Field(min_length=1)] | None = None
    heartbeat: Duration = timedelta(seconds=10)
    shutdown_timeout: Duration = timedelta(seconds=30)
    metrics: str | None = None  # HOST:PORT serving /metrics and /healthz; None: off
    # How many runs the whole daemon has going at once; a due run beyond it waits (queued).
    max_running: Annotated[int, Field(ge=1, le=MAX_RUNNING, strict=True)] | None = None
    # The control socket (docs/control.md): unset, crond.sock in the state directory;
    # "none": none.
    control_socket: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    # Several replicas sharing one PostgreSQL database (docs/replicas.md): its libpq URL
    # (CROND_DATABASE_URL overrides it), the cluster's name, this replica's name (default:
    # the host name), and how long a replica may go without a heartbeat before the others
    # take it for dead.
    database: Annotated[str, Field(min_length=1, max_length=MAX_DATABASE)] | None = None
    cluster: Annotated[str, Field(min_length=1, max_length=MAX_NAME)] = "default"
    replica: Annotated[str, Field(min_length=1, max_length=MAX_NAME)] | None = None
    replica_timeout: ReplicaTimeout = timedelta(seconds=30)

    @field_validator("control_socket")
    @classmethod
    def _control_socket(cls, value: str | None) -> str | None:
        return _no_nul(value)

    @field_validator("database", mode="before")
    @classmethod
    def _database(cls, value: object) -> object:
        return check_database(value)

    @field_validator("cluster", "replica", mode="before")
    @classmethod
    def _names(cls, value: object, info: ValidationInfo) -> object:
        return check_name(value, str(info.field_name))

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                split_address(value)
            except AddressError as exc:
                raise PydanticCustomError("crond", str(exc)) from None
        return value

    @field_validator("heartbeat")
    @classmethod
    def _heartbeat(cls, value: timedelta) -> timedelta:
        if value < timedelta(milliseconds=100):
            raise PydanticCustomError("crond", "heartbeat must be at least 100ms")
        return value

    @model_validator(mode="after")
    def _replica_timeout_heartbeats(self, info: ValidationInfo) -> Self:
        # A replica is taken for dead after missing three heartbeats, not one late one.
        # Checked only where it matters (a database, or a timeout written): a single
        # daemon with a slow heartbeat is not told about replicas.
        least = REPLICA_HEARTBEATS * self.heartbeat
        if self.replica_timeout >= least:
            return self
        written = "replica_timeout" in self.model_fields_set
        if not (written or self.database is not None or _environ(info).get(DATABASE_ENV)):
            return self
        timeout = format_duration(self.replica_timeout)
        said = timeout if written else f"{timeout} by default"
        raise PydanticCustomError(
            "crond_field",
            f"replica_timeout ({said}) must be at least {REPLICA_HEARTBEATS} x heartbeat "
            f"({format_duration(self.heartbeat)}): a replica is taken for dead after "
            f"missing {REPLICA_HEARTBEATS} heartbeats; set replica_timeout: "
            f"{format_duration(least)} or more, or a shorter heartbeat",
            # At the timeout's value; at the heartbeat's when the timeout is the default.
            {"field": "replica_timeout" if written else "heartbeat", "crond_at_key": False},
        )


class Config(_Model):
    """A whole schedules file."""

    version: Literal[1] = 1
    timezone: str = "UTC"
    defaults: JobFields = JobFields()
    daemon: Daemon = Daemon()
    notifiers: dict[str, Notifier] = Field(default_factory=dict)
    jobs: dict[str, Job]

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        _check_zone(value)
        return value


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the schedules file, for editors (yaml-language-server)."""
    schema = Config.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "crond schedules file"
    schema["patternProperties"] = {"^x-": {}}  # the file's own keys, for anchors
    jobs = schema["properties"]["jobs"]
    jobs["propertyNames"] = {"pattern": f"^{JOB_NAME.pattern}$"}
    jobs["minProperties"] = 1
    job = schema["$defs"]["Job"]
    # "Exactly one" is checked by crond; an editor only flags "both", since `defaults`
    # may supply either half.
    job["allOf"] = [
        {"not": {"required": ["cron", "every"]}},
        {"not": {"required": ["command", "python"]}},
    ]
    return schema
