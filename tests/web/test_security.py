"""The dashboard's door over HTTP, against the real `crond web` and daemon: who gets in
(Basic auth against bcrypt hashes), which Host is answered (DNS rebinding), what a POST
needs (same origin, the user's CSRF token, an operator), the bounds on bodies and live
streams, the headers every answer carries, and that what jobs print is escaped."""

from __future__ import annotations

import os
import pwd
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from crond.control import client
from tests.e2e.harness import Crond, eventually
from tests.web.dash import Dash, basic, schedules
from tests.web.dash import site as site_of

pytestmark = pytest.mark.xdist_group("web-http")

JOBS = """\
  xss:
    cron: "0 0 1 1 *"
    command: "printf '%s\\\\n' '<script>window.pwned=1</script>' '<b>bold</b>'; exit 3"
  quiet:
    cron: "0 0 1 1 *"
    command: "true"
    ping: https://hc.example.com/ping/${SECRET_UUID}
"""
SECRET = "5f1d3c0e-secret-uuid"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dash, Crond, Path]]:
    directory = tmp_path_factory.mktemp("websec")
    file = schedules(directory, JOBS)
    mp = pytest.MonkeyPatch()
    mp.setenv("SECRET_UUID", SECRET)
    try:
        with site_of(file, "xss") as (dash, started):
            yield dash, started, file
    finally:
        mp.undo()


def get(dash: Dash, path: str, user: str | None = "alice", **headers: str) -> httpx.Response:
    if user is not None:
        headers.setdefault("authorization", basic(user))
    return httpx.get(dash.url + path, headers=headers, timeout=10)


def token(dash: Dash, user: str) -> str:
    found = re.search(r'name="csrf-token" content="([0-9a-f]+)"', get(dash, "/", user).text)
    assert found is not None
    return found.group(1)


def post(
    dash: Dash, path: str, data: dict[str, str], user: str = "alice", **headers: str
) -> httpx.Response:
    headers.setdefault("authorization", basic(user))
    return httpx.post(dash.url + path, data=data, headers=headers, timeout=10)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        basic("alice", "wrong"),
        basic("alice", ""),
        basic("mallory", "alice-pw"),
        "Basic !!!not-base64",
        "Bearer alice-pw",
        "Basic " + "A" * 5000,
    ],
    ids=[
        "none",
        "wrong_password",
        "empty_password",
        "unknown_user",
        "bad_base64",
        "bearer",
        "huge",
    ],
)
def test_without_a_good_password_nothing_is_shown(
    site: tuple[Dash, Crond, Path], authorization: str | None
) -> None:
    dash = site[0]
    for path in ("/", "/jobs/xss", "/static/app.js"):
        headers = {} if authorization is None else {"authorization": authorization}
        answer = get(dash, path, None, **headers)
        assert answer.status_code == 401, path
        assert answer.headers["www-authenticate"].startswith("Basic")
        assert "xss" not in answer.text


@pytest.mark.parametrize(
    "host",
    [
        "evil.example.com",
        "evil.example.com:{port}",
        "127.0.0.2:{port}",
        "localhost.evil.com",
        "",
        "[::1",
    ],
)
def test_another_host_name_is_refused(site: tuple[Dash, Crond, Path], host: str) -> None:
    dash = site[0]
    port = dash.address.rsplit(":", 1)[1]
    answer = get(dash, "/", host=host.format(port=port))
    assert answer.status_code == 421
    assert "xss" not in answer.text


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}"])
def test_the_loopback_names_are_answered(site: tuple[Dash, Crond, Path], host: str) -> None:
    dash = site[0]
    port = dash.address.rsplit(":", 1)[1]
    assert get(dash, "/", host=host.format(port=port)).status_code == 200


def test_every_answer_has_the_safety_headers(site: tuple[Dash, Crond, Path]) -> None:
    dash = site[0]
    for path, user in (("/", "alice"), ("/jobs/xss", "bob"), ("/nope", "alice"), ("/", None)):
        headers = get(dash, path, user).headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["cache-control"] == "no-store"


def test_pages_carry_no_inline_script_nor_handler(site: tuple[Dash, Crond, Path]) -> None:
    dash = site[0]
    for path in ("/", "/jobs/xss", "/now", "/timeline", "/cluster"):
        html = get(dash, path).text
        assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/app.js" defer>']
        assert not re.search(r"\son[a-z]+=", html), path


def test_what_a_job_prints_is_escaped(site: tuple[Dash, Crond, Path]) -> None:
    dash = site[0]
    job = get(dash, "/jobs/xss").text
    run_id = re.search(r'href="/runs/([0-9a-f-]+)"', job)
    assert run_id is not None
    page = get(dash, f"/runs/{run_id.group(1)}").text
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "<script>window" not in page
    assert "<b>bold" not in page


def test_no_secret_is_shown(site: tuple[Dash, Crond, Path]) -> None:
    dash = site[0]
    for path in ("/", "/jobs/quiet", "/now", "/timeline", "/cluster"):
        assert SECRET not in get(dash, path).text


def test_a_post_without_the_users_token_is_refused(site: tuple[Dash, Crond, Path]) -> None:
    dash, started, _ = site
    bobs = token(dash, "bob")
    for data in ({}, {"csrf": ""}, {"csrf": "0" * 64}, {"csrf": bobs}):
        answer = post(dash, "/jobs/quiet/pause", data)
        assert answer.status_code == 403, data
    dash.wait_for("web.refused", lambda e: e.get("reason") == "csrf" and e.get("by") == "web:alice")
    assert not started.drain() or not started.named("job.paused")


def test_a_post_from_another_origin_is_refused(site: tuple[Dash, Crond, Path]) -> None:
    dash = site[0]
    data = {"csrf": token(dash, "alice")}
    for origin in ("http://evil.example.com", "null"):
        answer = post(dash, "/jobs/quiet/kill", data, origin=origin)
        assert answer.status_code == 403
    answer = post(dash, "/jobs/quiet/kill", data, referer="http://evil.example.com/x")
    assert answer.status_code == 403


def test_a_viewer_is_refused_and_logged(site: tuple[Dash, Crond, Path]) -> None:
    dash, started, _ = site
    answer = post(dash, "/jobs/quiet/trigger", {"csrf": token(dash, "bob")}, user="bob")
    assert answer.status_code == 403
    assert "bob may look but not trigger" in answer.text
    dash.wait_for("web.refused", lambda e: e.get("reason") == "viewer" and e.get("by") == "web:bob")
    triggered = [e for e in started.drain() if e.get("event") == "job.triggered"]
    assert [e["job"] for e in triggered] == ["xss"]  # the set-up's own, none of bob's
    assert '<form method="post"' not in get(dash, "/jobs/quiet", "bob").text


def test_an_operators_pause_reaches_the_daemon(site: tuple[Dash, Crond, Path]) -> None:
    dash, started, _ = site
    data = {"csrf": token(dash, "alice"), "for": "1h", "note": "<i>db</i>"}
    answer = post(dash, "/jobs/quiet/pause", data)
    assert answer.status_code == 303
    paused = started.wait_for("job.paused", lambda e: e.get("job") == "quiet")
    # The daemon logs the dashboard's user as who paused it, and the dashboard's own
    # process (this test's user) as the way it came.
    assert paused["by"]["user"] == "web:alice"
    assert paused["by"]["via"] == pwd.getpwuid(os.getuid()).pw_name
    dash.wait_for("web.action", lambda e: e.get("action") == "pause" and e.get("by") == "web:alice")
    # Seen within 2 s (the pages read the store at most once a second).
    eventually(lambda: "&lt;i&gt;db&lt;/i&gt;" in get(dash, "/jobs/quiet").text, 2.0, "the pause")
    answer = post(dash, "/jobs/quiet/resume", {"csrf": token(dash, "alice")})
    assert answer.status_code == 303
    started.wait_for("job.resumed", lambda e: e.get("job") == "quiet")


def test_bodies_and_methods_are_bounded(site: tuple[Dash, Crond, Path]) -> None:
    dash = site[0]
    data = {"csrf": token(dash, "alice"), "note": "x" * 20_000}
    assert post(dash, "/jobs/quiet/pause", data).status_code == 413

    def chunks() -> Iterator[bytes]:
        for _ in range(40):
            yield b"n" * 1024

    answer = httpx.post(
        dash.url + "/jobs/quiet/pause",
        content=chunks(),
        headers={
            "authorization": basic("alice"),
            "content-type": "application/x-www-form-urlencoded",
        },
        timeout=10,
    )
    assert answer.status_code == 413
    answer = httpx.request("PUT", dash.url + "/", headers={"authorization": basic("alice")})
    assert answer.status_code == 405


def test_static_files_stay_in_their_folder(site: tuple[Dash, Crond, Path]) -> None:
    dash = site[0]
    for path in ("/static/../auth.py", "/static/%2e%2e/auth.py", "/static/..%2fauth.py"):
        answer = get(dash, path)
        assert answer.status_code == 404, path
        assert "bcrypt" not in answer.text


def test_live_streams_are_bounded(site: tuple[Dash, Crond, Path]) -> None:
    dash = site[0]
    host, port = dash.address.rsplit(":", 1)
    request = (
        f"GET /events HTTP/1.1\r\nHost: {dash.address}\r\nAuthorization: {basic('bob')}\r\n\r\n"
    ).encode()
    held = []
    try:
        for _ in range(32):
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.sendall(request)
            assert sock.recv(64).startswith(b"HTTP/1.1 200")
            held.append(sock)
        assert get(dash, "/events", "bob").status_code == 503
        assert get(dash, "/", "bob").status_code == 200  # the pages are still served
    finally:
        for sock in held:
            sock.close()


def test_following_a_run_not_going_says_so(site: tuple[Dash, Crond, Path]) -> None:
    _, _, file = site
    sock = file.parent / "state" / "crond.sock"
    replies = list(client.request(sock, "follow", {"run_id": "not-a-run"}))
    assert replies == [
        {"ok": False, "error": "no run 'not-a-run' is going in this daemon", "code": "not_found"}
    ]
