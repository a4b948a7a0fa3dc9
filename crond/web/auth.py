"""Who is asking: the users of `web.users` (an htpasswd file of bcrypt hashes) by HTTP
Basic authentication, their role (`web.operators` may act, the others look), and the
CSRF token every form carries.

bcrypt is slow on purpose (~0.2 s a check): a check runs in a thread, at most two at
once, and a password once checked is remembered (its SHA-256, never the password) for
five minutes, so a page refreshing every second costs one check, not one a request.
Without `web.users` the page is loopback-only and read-only: a local process could
otherwise act through it with the dashboard's rights on the control socket.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import bcrypt

from crond import ownership

LOCAL = "local"  # the name of the loopback viewer when there are no users
_MAX_FILE_USERS = 10_000
_REMEMBER_S = 300.0
_MAX_REMEMBERED = 1024
_MAX_CREDENTIALS = 1024  # bytes of an Authorization header's value


class UsersError(Exception):
    """The users file could not be read or is not htpasswd with bcrypt hashes."""


@dataclass(frozen=True)
class User:
    name: str
    operator: bool


def read_users(path: Path) -> dict[str, bytes]:
    """`user:$2y$...` lines; other hash kinds are refused (MD5 and crypt are not safe)."""
    try:
        raw = ownership.read_schedules_file(path)
    except ownership.FileRefused as exc:
        raise UsersError(str(exc)) from None
    users: dict[str, bytes] = {}
    for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, hashed = line.strip().partition(":")
        if not sep or not name or not hashed.startswith(("$2y$", "$2b$", "$2a$")):
            raise UsersError(
                f"{path}:{number}: not `user:bcrypt-hash` (make one with `htpasswd -B {path} NAME`)"
            )
        users[name] = hashed.encode()
        if len(users) > _MAX_FILE_USERS:
            raise UsersError(f"{path}: more than {_MAX_FILE_USERS} users")
    return users


class Gate:
    """Checks credentials against the users file; remembers recent good ones."""

    def __init__(self, users: dict[str, bytes] | None, operators: frozenset[str]) -> None:
        self.users = users  # None: no users file (loopback, read-only)
        self.operators = operators
        self._seen: dict[bytes, float] = {}
        self._checks = asyncio.Semaphore(2)
        self._secret = secrets.token_bytes(32)  # CSRF tokens die with the process
        # An unknown name is checked against a hash of the users' own cost, so the time a
        # refusal takes does not tell whether the name exists.
        salt = next(iter(users.values()))[:29] if users else None
        self._dummy = _DUMMY if salt is None else _hash_like(salt)

    async def user_of(self, authorization: str | None) -> User | None:
        """The user the header names, if its password is right; with no users file, the
        local viewer. None: ask again (401)."""
        if self.users is None:
            return User(LOCAL, operator=False)
        pair = _basic(authorization)
        if pair is None:
            return None
        name, password = pair
        hashed = self.users.get(name)
        if hashed is None:
            # As long as a real check, so a name's existence is not told by the time taken.
            await self._check(password, self._dummy)
            return None
        key = hashlib.sha256(name.encode() + b"\0" + password + b"\0" + hashed).digest()
        now = time.monotonic()
        if self._seen.get(key, 0.0) > now:
            return User(name, operator=name in self.operators)
        if not await self._check(password, hashed):
            return None
        if len(self._seen) >= _MAX_REMEMBERED:
            self._seen.clear()
        self._seen[key] = now + _REMEMBER_S
        return User(name, operator=name in self.operators)

    async def _check(self, password: bytes, hashed: bytes) -> bool:
        async with self._checks:
            return await asyncio.to_thread(_checkpw, password, hashed)

    def csrf(self, user: User) -> str:
        return hmac.new(self._secret, user.name.encode(), "sha256").hexdigest()

    def csrf_ok(self, user: User, token: object) -> bool:
        return isinstance(token, str) and hmac.compare_digest(token, self.csrf(user))


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password[:72], hashed.replace(b"$2y$", b"$2b$", 1))
    except ValueError:  # a malformed hash
        return False


_DUMMY = bcrypt.hashpw(b"not a password", bcrypt.gensalt(rounds=10))


def _hash_like(salt: bytes) -> bytes:
    try:
        return bcrypt.hashpw(b"not a password", salt.replace(b"$2y$", b"$2b$", 1))
    except ValueError:  # a malformed hash: its own check fails anyway
        return _DUMMY


def _basic(header: str | None) -> tuple[str, bytes] | None:
    if not header or len(header) > _MAX_CREDENTIALS:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    name, sep, password = decoded.partition(b":")
    if not sep:
        return None
    try:
        return name.decode("utf-8"), password
    except UnicodeDecodeError:
        return None
