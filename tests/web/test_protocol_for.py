"""The control protocol's `"for"`: the dashboard's user a request is made for. Only
`web:USER` is taken (a caller cannot pass itself off as a system user such as root), and
the events' `by` names that user and keeps the caller's own as `via`."""

from __future__ import annotations

import json

import pytest

from crond.control import protocol
from crond.control.callers import Caller


def line(**extra: object) -> bytes:
    return json.dumps({"v": 1, "cmd": "ps", "args": {}, **extra}).encode()


def test_for_is_carried_and_said_as_who() -> None:
    request = protocol.parse_request(protocol.request_line("resume", {"all": True}, "web:alice"))
    assert request.on_behalf == "web:alice"
    caller = Caller(uid=990, gid=990, pid=42, user="crond-web", on_behalf=request.on_behalf)
    assert caller.by() == {"uid": 990, "user": "web:alice", "pid": 42, "via": "crond-web"}


def test_without_for_nothing_changes() -> None:
    assert protocol.parse_request(line()).on_behalf is None
    assert protocol.request_line("ps", {}) == line().replace(b" ", b"") + b"\n"
    assert Caller(1, 1, 2, "ann").by() == {"uid": 1, "user": "ann", "pid": 2}


@pytest.mark.parametrize(
    "value", ["root", "web:", "web:a b", "web:" + "a" * 65, 7, ["web:a"], "WEB:a"]
)
def test_for_other_than_web_user_is_refused(value: object) -> None:
    with pytest.raises(protocol.ControlError) as caught:
        protocol.parse_request(line(**{"for": value}))
    assert caught.value.code == "bad_request"


def test_follow_names_one_run() -> None:
    assert protocol.parse_request(protocol.request_line("follow", {"run_id": "r-1"})).args == {
        "run_id": "r-1"
    }
    for args in ({}, {"run_id": ""}, {"run_id": 7}):
        with pytest.raises(protocol.ControlError):
            protocol.parse_request(protocol.request_line("follow", args))
