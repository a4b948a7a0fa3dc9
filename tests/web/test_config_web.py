"""The file's `web:` section as `crond validate` checks it (every mistake located, all at
once), and what `crond web` refuses before it serves anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from crond.config import loader, problems
from tests.e2e.harness import run_cli

JOB = "jobs:\n  a:\n    cron: '* * * * *'\n    command: 'true'\n"


def validate(web: str) -> tuple[int, str]:
    """As `crond validate` says it, in this process (the CLI's own is tested below)."""
    try:
        loader.loads(f"web:\n{web}{JOB}", "F")
    except problems.ConfigError as exc:
        return 1, "\n".join(map(str, exc.problems))
    return 0, ""


@pytest.mark.parametrize(
    ("web", "said"),
    [
        (
            "  listen: 0.0.0.0:8080\n",
            "F:2:3: web.listen: '0.0.0.0:8080' is reachable from other hosts: set web.users",
        ),
        ("  listen: 8080\n", "F:2:11: web.listen: 8080 has no host"),
        ("  listen: http://x:80/\n", "F:2:11: web.listen: 'http://x:80/': a URL is not HOST:PORT"),
        ("  users: web.htpasswd\n", "F:2:10: web.users: 'web.htpasswd' is not an absolute path"),
        ("  operators: [alice]\n", "F:2:3: web.operators: operators are users of web.users"),
        (
            "  operators: ['al ice']\n",
            "F:2:14: web.operators: 'al ice' is not a user name of web.users",
        ),
        ("  hosts: ['a/b']\n", "F:2:10: web.hosts: 'a/b' is not a host name"),
        ("  listne: 127.0.0.1:1\n", "F:2:3: web.listne: unknown field"),
    ],
    ids=[
        "public_without_users",
        "no_host",
        "url",
        "relative_users",
        "operators_without_users",
        "bad_user_name",
        "bad_host",
        "typo",
    ],
)
def test_a_bad_web_section_is_told_where(web: str, said: str) -> None:
    code, out = validate(web)
    assert code == 1
    assert said in out, out


def test_a_good_web_section_validates() -> None:
    web = (
        "  listen: 0.0.0.0:8080\n  users: /etc/crond/web.htpasswd\n  operators: [alice]\n"
        "  hosts: [cron.example.com]\n"
    )
    assert validate(web)[0] == 0


def test_every_mistake_is_told_at_once() -> None:
    code, out = validate("  listen: 8080\n  users: rel\n  hosts: ['a b']\n")
    assert code == 1
    assert [
        line.split(":")[1]
        for line in out.splitlines()
        if line.startswith("F:") and "errors" not in line
    ] == [
        "2",
        "3",
        "4",
    ]


def test_crond_web_will_not_listen_beyond_loopback_without_users(tmp_path: Path) -> None:
    file = tmp_path / "s.yaml"
    file.write_text(JOB)
    done = run_cli("web", str(file), "--listen", "0.0.0.0:0")
    assert done.returncode == 1
    assert "reachable from other hosts: set web.users" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("alice:$apr1$abc$def\n", ":1: not `user:bcrypt-hash`"),
        ("# users\n\nbob\n", ":3: not `user:bcrypt-hash`"),
    ],
)
def test_crond_web_refuses_a_users_file_without_bcrypt(
    tmp_path: Path, content: str, said: str
) -> None:
    users = tmp_path / "web.htpasswd"
    users.write_text(content)
    file = tmp_path / "s.yaml"
    file.write_text(f"web:\n  users: {users}\n{JOB}")
    done = run_cli("web", str(file), "--listen", "127.0.0.1:0")
    assert done.returncode == 1
    assert f"{users}{said}" in done.stderr
    assert "Traceback" not in done.stderr
