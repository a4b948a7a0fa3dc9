"""How crond shows a URL that may hold a secret (crond/config/secrets.py): `show_url` for
webhooks, pings and databases (a Unix socket's directory, a key=value string's host, a
text without a scheme by its host as written), `show_apprise` for Apprise URLs (the
scheme only); and a `${NAME}` set to "" taken for one not set."""

from __future__ import annotations

import textwrap

import pytest

from crond.config import loader
from crond.config.problems import ConfigError
from crond.config.secrets import expand, show_apprise, show_url

SECRET = "s3cr3t-T0KEN"

# (id, as written, as shown)
URLS = [
    ("webhook", f"https://hooks.slack.com/services/{SECRET}", "https://hooks.slack.com/…"),
    ("user_info_and_port", f"https://u:{SECRET}@H.example.com:8443", "https://h.example.com"),
    ("ipv6_in_brackets", f"http://[::1]:8080/{SECRET}", "http://[::1]/…"),
    ("no_host", f"https:///{SECRET}", "https:///…"),
    ("does_not_parse", "http://[::1", "http://[::1"),
    (
        "pg_socket_in_query",
        f"postgresql://crond:{SECRET}@/crond?host=%2Ftmp%2Fcrond-pg-XXXX",
        "postgresql://(socket /tmp/crond-pg-XXXX)/…",
    ),
    ("pg_abstract_socket", "postgresql:///crond?host=@crond", "postgresql://(socket @crond)/…"),
    ("pg_no_host", "postgresql:///crond", "postgresql://(PGHOST or the local socket)/…"),
    ("pg_host_in_query", "postgres:///crond?host=db.internal", "postgres://db.internal/…"),
    (
        "pg_several_hosts",
        f"postgres://u:{SECRET}@db1:5432,db2:5433/crond?sslmode=require",
        "postgres://db1,db2/…",
    ),
    (
        "key_value_socket",
        f"host=/run/postgresql dbname=crond password={SECRET}",
        "key=value string, host (socket /run/postgresql)",
    ),
    (
        "key_value_quoted",
        f"password='{SECRET} host=evil' host = 'db.internal'",
        "key=value string, host db.internal",
    ),
    ("key_value_no_host", "dbname=crond", "key=value string, host (PGHOST or the local socket)"),
    ("key_value_escaped", f"host=a\\ b password={SECRET}", "key=value string, host a b"),
    ("no_scheme_host", f"hooks.example.com/crond/{SECRET}", "hooks.example.com/…"),
    ("no_scheme_user_info", f"u:{SECRET}@hooks.example.com:99/x", "hooks.example.com/…"),
    ("no_scheme_address", "10.0.0.7/hook", "10.0.0.7/…"),
    ("no_scheme_reference", "${HOOK}", "${HOOK}"),
    ("no_scheme_token_alone", SECRET, "a value without a scheme"),
    ("no_scheme_uuid_alone", "5bf0e3f7-4a0e-4b3b-9f5e-8c1d2e3f4a5b", "a value without a scheme"),
]


@pytest.mark.parametrize(("written", "shown"), [u[1:] for u in URLS], ids=[u[0] for u in URLS])
def test_show_url(written: str, shown: str) -> None:
    assert show_url(written) == shown
    assert "<url>" not in show_url(written)


APPRISE = [
    ("telegram_token_in_host", "tgram://1234567890SECRETBOTTOKEN/", "tgram://…"),
    ("mail", f"mailtos://crond:{SECRET}@smtp.example.com?to=ops@example.com", "mailtos://…"),
    ("reference", "${APPRISE_URL}", "${APPRISE_URL}"),
    ("reference_and_more", "${APPRISE}/chat", "${APPRISE}…"),
    ("no_scheme", SECRET, "a URL without a scheme"),
]


@pytest.mark.parametrize(
    ("written", "shown"), [a[1:] for a in APPRISE], ids=[a[0] for a in APPRISE]
)
def test_show_apprise(written: str, shown: str) -> None:
    assert show_apprise(written) == shown


JOB = "jobs:\n  a: {every: 1m, command: x}\n"


def _problems(text: str, environ: dict[str, str], *, strict: bool = False) -> list[str]:
    with pytest.raises(ConfigError) as info:
        loader.loads(textwrap.dedent(text), "s.yaml", environ=environ, strict=strict)
    return [str(p) for p in info.value.problems]


def test_an_apprise_url_apprise_refuses_shows_its_scheme_only() -> None:
    pytest.importorskip("apprise")
    text = 'notifiers:\n  app: {apprise: "tgram://1234567890SECRETBOTTOKEN/"}\n' + JOB
    assert _problems(text, {}) == [
        "s.yaml:2:18: notifiers.app.apprise: tgram://… is not a URL Apprise can use (see its "
        "list of services and their URLs: https://github.com/caronc/apprise/wiki)"
    ]


def test_an_apprise_notifier_is_shown_by_its_scheme() -> None:
    pytest.importorskip("apprise")
    text = "notifiers:\n  chat: {apprise: 'json://ops.example.com/${T}'}\n" + JOB
    cfg = loader.loads(text, "s.yaml", environ={"T": SECRET})
    assert cfg.notifiers["chat"].shown == "apprise json://…"


def test_an_empty_name_is_taken_for_one_not_set() -> None:
    assert expand("https://hc-ping.com/${UUID}", {"UUID": ""}) == (
        "https://hc-ping.com/${UUID}",
        ["UUID"],
    )
    text = (
        "notifiers:\n  ops:\n    webhook: https://h.example.com/x\n"
        '    headers: {Authorization: "Bearer ${HOOK_TOKEN}"}\n'
        "jobs:\n  a: {every: 1m, command: x, ping: 'https://hc-ping.com/${HC_UUID}'}\n"
    )
    empty = {"HOOK_TOKEN": "", "HC_UUID": ""}
    said = "is set but empty in crond's environment (give it its value before crond starts: "
    said += "an empty secret is taken for one not set; $$ is a literal $)"
    expected = [
        f"s.yaml:4:30: notifiers.ops.headers.Authorization: ${{HOOK_TOKEN}} {said}",
        f"s.yaml:6:36: jobs.a.ping: ${{HC_UUID}} {said}",
    ]
    assert _problems(text, empty, strict=True) == expected  # crond run, and a reload
    cfg = loader.loads(text, "s.yaml", environ=empty)  # crond validate: warnings
    assert [str(w) for w in cfg.env_warnings] == expected
    assert cfg.jobs["a"].ping == "https://hc-ping.com/${HC_UUID}"
    assert cfg.notifiers["ops"].headers == (("Authorization", "Bearer ${HOOK_TOKEN}"),)
