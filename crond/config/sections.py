"""The schedules file's `notifiers:` and `daemon:` sections as frozen pydantic models: each
field, its default and its check (docs/configuration.md). The jobs and the file as a
whole are crond/config/model.py, which takes these in.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from crond.config.database import (
    DATABASE_ENV,
    MAX_DATABASE,
    MAX_NAME,
    check_database,
    check_name,
)
from crond.config.durations import format_duration
from crond.config.fieldtypes import (
    MAX_RUNNING,
    Duration,
    FrozenModel,
    ReplicaTimeout,
    check_address,
    environ_of,
    field_error,
    no_nul,
)
from crond.config.notifiers import check_apprise, check_command, check_headers, check_url

# How many heartbeats a replica may miss before the others take it for dead: the least
# `replica_timeout` is this many times `heartbeat`.
REPLICA_HEARTBEATS = 3


class Fencing(StrEnum):
    """`daemon.fencing` (docs/replicas.md): what a replica cut off from its database does
    with its runs once the others may take its jobs over."""

    STOP = "stop"
    KEEP = "keep"


class Notifier(FrozenModel):
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
        return None if value is None else check_url(value, environ_of(info))

    @field_validator("apprise")
    @classmethod
    def _apprise(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_apprise(value, environ_of(info))

    @field_validator("command")
    @classmethod
    def _command(
        cls, value: str | list[str] | None, info: ValidationInfo
    ) -> str | list[str] | None:
        return None if value is None else check_command(value, environ_of(info))

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str] | None, info: ValidationInfo) -> dict[str, str] | None:
        return None if value is None else check_headers(value, environ_of(info))

    @model_validator(mode="after")
    def _shape(self) -> Self:
        given = [kind for kind in _NOTIFIER_KINDS if getattr(self, kind) is not None]
        if not given:
            field_error("", "a notifier needs one of webhook, command or apprise")
        if len(given) > 1:
            field_error(
                given[1],
                f"give one of webhook, command or apprise, not {given[0]} and {given[1]} "
                "(a notifier is one place to tell; define another for the second)",
            )
        if self.headers is not None and self.webhook is None:
            field_error("headers", "headers apply to webhook notifiers only")
        authorization = any(name.lower() == "authorization" for name in self.headers or {})
        if authorization and self.webhook is not None and _has_user_info(self.webhook):
            field_error(
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


class Daemon(FrozenModel):
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
    # What a replica that could not heartbeat for replica_timeout does with its runs:
    # `stop` them before another replica may take their jobs over, or `keep` them going
    # (docs/replicas.md, "Fencing").
    fencing: Fencing = Fencing.KEEP

    @field_validator("control_socket")
    @classmethod
    def _control_socket(cls, value: str | None) -> str | None:
        return no_nul(value)

    @field_validator("database", mode="before")
    @classmethod
    def _database(cls, value: object) -> object:
        return check_database(value)

    @field_validator("cluster", "replica", mode="before")
    @classmethod
    def _names(cls, value: object, info: ValidationInfo) -> object:
        return check_name(value, str(info.field_name))

    @field_validator("metrics", mode="before")
    @classmethod
    def _metrics(cls, value: object) -> object:
        return check_address(value)

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
        if not (written or self.database is not None or environ_of(info).get(DATABASE_ENV)):
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
