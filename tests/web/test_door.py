"""The door's parts in this process: the Host header's name as the Guard reads it, and
the users' gate (bcrypt, remembered checks, CSRF tokens tied to a user)."""

from __future__ import annotations

import asyncio
import base64

import bcrypt
import pytest

from crond.web.auth import LOCAL, Gate
from crond.web.guard import host_name


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("127.0.0.1:8080", "127.0.0.1"),
        ("LocalHost:80", "localhost"),
        ("cron.example.com", "cron.example.com"),
        ("[::1]:8080", "::1"),
        ("[::1]", "::1"),
        ("", None),
        ("[::1", None),
        ("[::1]x", None),
        ("[::1]:8o", None),
        ("a:b", None),
        (":80", None),
    ],
)
def test_host_name(header: str, name: str | None) -> None:
    assert host_name(header) == name


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_the_gate() -> None:
    users = {"alice": bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4))}
    gate = Gate(users, frozenset({"alice"}))

    async def check() -> None:
        alice = await gate.user_of(basic("alice", "pw"))
        assert alice is not None
        assert alice.operator
        assert await gate.user_of(basic("alice", "pw")) == alice  # remembered
        assert await gate.user_of(basic("alice", "pW")) is None
        assert await gate.user_of(basic("bob", "pw")) is None
        assert await gate.user_of(None) is None
        token = gate.csrf(alice)
        assert gate.csrf_ok(alice, token)
        assert not gate.csrf_ok(alice, token[:-1] + "0" if token[-1] != "0" else "1")
        assert not gate.csrf_ok(alice, None)

    asyncio.run(check())


def test_without_users_everyone_local_only_looks() -> None:
    gate = Gate(None, frozenset())
    user = asyncio.run(gate.user_of(None))
    assert user is not None
    assert (user.name, user.operator) == (LOCAL, False)
