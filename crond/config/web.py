"""The schedules file's `web:` section: where `crond web` listens, who may log in and who
of them may act (docs/web.md). Checked with the rest of the file, each mistake located.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Self

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from crond.config.address import split_address
from crond.config.fieldtypes import FrozenModel, check_address, field_error

DEFAULT_LISTEN = "127.0.0.1:8080"
_USER = r"[A-Za-z0-9_.@-]{1,64}"  # a login as htpasswd files write them
_HOST = r"[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]"


def is_loopback(host: str) -> bool:
    """Whether `host` (an address's host, without brackets) is reached from this host only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _each(names: list[str], pattern: str, what: str) -> list[str]:
    for name in names:
        if not re.fullmatch(pattern, name):
            raise PydanticCustomError("crond", f"{name!r} is not {what}")
    return names


class Web(FrozenModel):
    """`web:` (docs/web.md). `users` is required for any listen address but loopback."""

    listen: str = DEFAULT_LISTEN
    users: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    operators: list[Annotated[str, Field(max_length=300)]] = Field(default_factory=list)
    # Host header values accepted besides the listen address (a reverse proxy's name).
    hosts: list[Annotated[str, Field(max_length=300)]] = Field(default_factory=list)

    @field_validator("operators")
    @classmethod
    def _operators(cls, value: list[str]) -> list[str]:
        return _each(value, _USER, "a user name of web.users (1 to 64 letters, digits, _ . @ -)")

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        return _each(value, _HOST, "a host name as a Host header gives it (cron.example.com)")

    @field_validator("listen", mode="before")
    @classmethod
    def _listen(cls, value: object) -> object:
        return check_address(value)

    @field_validator("users")
    @classmethod
    def _users(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise PydanticCustomError(
                "crond", f"{value!r} is not an absolute path: e.g. /etc/crond/web.htpasswd"
            )
        return value

    @model_validator(mode="after")
    def _safe(self) -> Self:
        host, _ = split_address(self.listen)
        if self.users is None and not is_loopback(host):
            field_error(
                "listen",
                f"{self.listen!r} is reachable from other hosts: set web.users (an htpasswd "
                "file with bcrypt hashes) or listen on 127.0.0.1",
            )
        if self.operators and self.users is None:
            field_error("operators", "operators are users of web.users: set web.users too")
        return self
