"""The schedules file's notifiers, `notify`, `ping`, `warn_after`, `daemon.metrics` and
`${NAME}`: every mistake located and worded, the merge of `defaults.notify`, expansion
from the environment (strict or as warnings), the specs a load builds, and no secret in
any message."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from crond.config import loader, notifiers, places, schema_json, yamlsource
from crond.config.loaded import NotifierSpec
from crond.config.model import NotifyEvent
from crond.config.problems import ConfigError, Problem

ROOT = Path(__file__).resolve().parents[2]
JOB = "jobs:\n  a: {every: 1m, command: x}\n"
SECRET = "s3cr3t-T0KEN"  # what must never reach a message


def problems(
    text: str, environ: dict[str, str] | None = None, *, strict: bool = False
) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        loader.loads(textwrap.dedent(text), "s.yaml", environ=environ or {}, strict=strict)
    return info.value.problems


def one(text: str, environ: dict[str, str] | None = None) -> str:
    found = problems(text, environ)
    assert len(found) == 1, [str(p) for p in found]
    return str(found[0])


def notifier(body: str) -> str:
    return "notifiers:\n  ops:\n" + textwrap.indent(textwrap.dedent(body), "    ") + JOB


def job(body: str, notifiers: str = "notifiers:\n  ops: {command: page}\n") -> str:
    lines = textwrap.indent(textwrap.dedent(body), "    ")
    return f"{notifiers}jobs:\n  a:\n    every: 1m\n    command: x\n{lines}"


# (id, file, the one line crond must print, exactly)
BAD = [
    (
        "no_kind",
        notifier("repeat: 1h\n"),
        "s.yaml:2:3: notifiers.ops: a notifier needs one of webhook, command or apprise",
    ),
    (
        "two_kinds",
        notifier("webhook: https://h.example.com/x\ncommand: page\n"),
        "s.yaml:4:5: notifiers.ops.command: give one of webhook, command or apprise, not "
        "webhook and command (a notifier is one place to tell; define another for the second)",
    ),
    (
        "headers_on_command",
        notifier("command: page\nheaders: {A: b}\n"),
        "s.yaml:4:5: notifiers.ops.headers: headers apply to webhook notifiers only",
    ),
    (
        "webhook_not_http",
        notifier(f"webhook: ftp://h.example.com/{SECRET}\n"),
        "s.yaml:3:14: notifiers.ops.webhook: ftp://h.example.com/… is not an http(s) URL "
        "with a host: its scheme is not http or https (write e.g. https://hooks.example.com/crond)",
    ),
    (
        "webhook_no_host",
        notifier(f"webhook: https:///{SECRET}\n"),
        "s.yaml:3:14: notifiers.ops.webhook: https:///… is not an http(s) URL with a host: "
        "it has no host (write e.g. https://hooks.example.com/crond)",
    ),
    (
        "webhook_no_scheme",
        notifier(f"webhook: hooks.example.com/{SECRET}\n"),
        "s.yaml:3:14: notifiers.ops.webhook: hooks.example.com/… is not an http(s) URL with "
        "a host: it has no scheme (write e.g. https://hooks.example.com/crond)",
    ),
    (
        "webhook_bad_port",
        notifier(f"webhook: https://h.example.com:99999x/{SECRET}\n"),
        "s.yaml:3:14: notifiers.ops.webhook: https://h.example.com/… is not an http(s) URL "
        "with a host: it does not parse as a URL (write e.g. https://hooks.example.com/crond)",
    ),
    (
        "webhook_space",
        notifier(f"webhook: 'https://h.example.com/a {SECRET}'\n"),
        "s.yaml:3:14: notifiers.ops.webhook: https://h.example.com/… is not an http(s) URL "
        "with a host: it holds a space or a control character (percent-encode it: %20) "
        "(write e.g. https://hooks.example.com/crond)",
    ),
    (
        "ping_not_url",
        job(f"ping: hc-ping.com/{SECRET}\n"),
        "s.yaml:7:11: jobs.a.ping: hc-ping.com/… is not an http(s) URL with a host: it has no "
        "scheme "
        "(write e.g. https://hc-ping.com/YOUR-UUID)",
    ),
    (
        "notify_unknown_did_you_mean",
        job("notify: {opps: [failed]}\n"),
        's.yaml:7:14: jobs.a.notify.opps: "opps" names no notifier (did you mean "ops"?)',
    ),
    (
        "notify_unknown_listed",
        job("notify: {zzz: [failed]}\n", "notifiers:\n  ops: {command: p}\n  mail: {command: m}\n"),
        's.yaml:8:14: jobs.a.notify.zzz: "zzz" names no notifier (the file\'s notifiers: '
        "ops, mail)",
    ),
    (
        "notify_without_notifiers",
        job("notify: {ops: [failed]}\n", ""),
        's.yaml:5:14: jobs.a.notify.ops: "ops" names no notifier (the file has none: define '
        "it under the top-level notifiers:)",
    ),
    (
        "notify_unknown_in_defaults",
        "notifiers:\n  ops: {command: p}\ndefaults:\n  notify: {opz: [failed]}\n" + JOB,
        's.yaml:4:12: defaults.notify.opz: "opz" names no notifier (did you mean "ops"?)',
    ),
    (
        "unsubscribing_from_nothing",
        job("notify: {nope: []}\n"),
        's.yaml:7:14: jobs.a.notify.nope: "nope" names no notifier (the file\'s notifiers: ops)',
    ),
    (
        "unknown_event",
        job("notify: {ops: [failed, faild]}\n"),
        's.yaml:7:28: jobs.a.notify.ops.1: "faild" is not one of started, succeeded, failed, '
        'recovered, missed, skipped, lost, long_running (did you mean "failed"?)',
    ),
    (
        "events_not_a_list",
        job("notify: {ops: failed}\n"),
        's.yaml:7:19: jobs.a.notify.ops: "failed" is not a list',
    ),
    (
        "notify_not_a_mapping",
        job("notify: [failed]\n"),
        "s.yaml:7:13: jobs.a.notify: a list is not a mapping of notifier names to lists of "
        "events, e.g. notify: {ops: [failed]}",
    ),
    (
        "warn_after_zero",
        job("warn_after: 0s\n"),
        "s.yaml:7:17: jobs.a.warn_after: warn_after must be more than 0s (how long after its "
        "start a run that is still going is reported as long_running)",
    ),
    (
        "warn_after_negative",
        job("warn_after: -5\n"),
        "s.yaml:7:17: jobs.a.warn_after: -5 is negative; a duration is 0 or more",
    ),
    (
        "repeat_negative",
        notifier("command: page\nrepeat: -1\n"),
        "s.yaml:4:13: notifiers.ops.repeat: -1 is negative; a duration is 0 or more",
    ),
    (
        "repeat_not_a_duration",
        notifier("command: page\nrepeat: -5m\n"),
        's.yaml:4:13: notifiers.ops.repeat: "-5m" is not a duration (use whole seconds or '
        "units like 90s, 5m, 1h30m, 2d)",
    ),
    (
        "metrics_no_host",
        "daemon:\n  metrics: ':9464'\n" + JOB,
        "s.yaml:2:12: daemon.metrics: ':9464' has no host: write HOST:PORT, e.g. "
        "127.0.0.1:9464 (this host only) or 0.0.0.0:9464",
    ),
    (
        "metrics_ipv6_unbracketed",
        "daemon:\n  metrics: '::1:9464'\n" + JOB,
        "s.yaml:2:12: daemon.metrics: '::1:9464': write an IPv6 host in brackets, e.g. [::1]:9464",
    ),
    (
        "metrics_a_number",
        "daemon:\n  metrics: 9464\n" + JOB,
        "s.yaml:2:12: daemon.metrics: 9464 has no host: write HOST:PORT, e.g. 127.0.0.1:9464 "
        "(this host only) or 0.0.0.0:9464",
    ),
    (
        "metrics_port_as_text",
        "daemon:\n  metrics: '9100'\n" + JOB,
        "s.yaml:2:12: daemon.metrics: '9100' has no host: write HOST:PORT, e.g. 127.0.0.1:9100 "
        "(this host only) or 0.0.0.0:9100",
    ),
    (
        "metrics_a_url",
        "daemon:\n  metrics: http://127.0.0.1:9100/metrics\n" + JOB,
        "s.yaml:2:12: daemon.metrics: 'http://127.0.0.1:9100/metrics': a URL is not HOST:PORT: "
        "write 127.0.0.1:9100 (the paths are /metrics and /healthz)",
    ),
    (
        "metrics_a_path",
        "daemon:\n  metrics: localhost:9464/healthz\n" + JOB,
        "s.yaml:2:12: daemon.metrics: 'localhost:9464/healthz': a path is not part of it: "
        "write localhost:9464 (the paths are /metrics and /healthz)",
    ),
    (
        "metrics_no_port",
        "daemon:\n  metrics: localhost\n" + JOB,
        "s.yaml:2:12: daemon.metrics: 'localhost' has no port: write localhost:9464",
    ),
    (
        "header_name",
        notifier("webhook: https://h.example.com/x\nheaders: {'Bad Name': v}\n"),
        's.yaml:4:15: notifiers.ops.headers.Bad Name: "Bad Name" is not an HTTP header name '
        "(letters, digits and !#$%&'*+.^_`|~- only, no spaces or colons)",
    ),
    (
        "header_value_line_break",
        notifier(f'webhook: https://h.example.com/x\nheaders: {{A: "{SECRET}\\r\\nX: y"}}\n'),
        's.yaml:4:18: notifiers.ops.headers.A: the value of the header "A" holds a line break '
        "or a NUL character, which no HTTP header can carry (the value is not shown, it may "
        "be a secret)",
    ),
    (
        "header_value_a_number",
        notifier("webhook: https://h.example.com/x\nheaders: {A: 123456}\n"),
        "s.yaml:4:18: notifiers.ops.headers.A: a number is not text",
    ),
    (
        "header_value_bad_yaml_int",
        notifier("webhook: https://h.example.com/x\nheaders: {A: !!int 0x_}\n"),
        "s.yaml:4:18: notifiers.ops.headers.A: the value is not a valid !!int; remove the "
        "!!int tag or fix the value",
    ),
    (
        "notifier_name",
        "notifiers:\n  'my ops': {command: page}\n" + JOB,
        's.yaml:2:3: notifiers.my ops: "my ops" is not a valid notifier name (letters, digits, '
        '"_", "." and "-", starting with a letter or digit, at most 64 characters)',
    ),
    (
        "notifier_unknown_field",
        "notifiers:\n  ops: {comand: page}\n" + JOB,
        's.yaml:2:9: notifiers.ops.comand: unknown field (did you mean "command"?)',
    ),
    (
        "command_nul_item",
        'notifiers:\n  ops: {command: [page, "a\\0b"]}\n' + JOB,
        "s.yaml:2:25: notifiers.ops.command.1: this item of the command holds a NUL character "
        "(\\0), which no program can take (the command is not shown, it may hold a secret)",
    ),
    (
        "command_empty_list",
        "notifiers:\n  ops: {command: []}\n" + JOB,
        "s.yaml:2:18: notifiers.ops.command: an empty list has no program to run",
    ),
    (
        "notifiers_a_list",
        "notifiers: [ops]\n" + JOB,
        "s.yaml:1:12: notifiers: a list is not a mapping of notifier names to notifiers "
        "(docs/alerting.md)",
    ),
    (
        "apprise_unusable",
        f"notifiers:\n  ops: {{apprise: 'nonsense://host.example.com/{SECRET}'}}\n" + JOB,
        "s.yaml:2:18: notifiers.ops.apprise: nonsense://… is not a URL "
        "Apprise can use (see its list of services and their URLs: "
        "https://github.com/caronc/apprise/wiki)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_each_mistake_is_one_located_worded_problem(text: str, expected: str) -> None:
    said = one(text)
    assert said == expected
    assert SECRET not in said


def test_every_mistake_at_once_in_file_order() -> None:
    found = problems(
        """\
        notifiers:
          ops: {webhook: "ftp://x/y"}
          mail: {command: m, headers: {A: b}}
        jobs:
          a:
            every: 1m
            command: x
            notify: {opps: [failed], mail: [nope]}
            warn_after: 0s
        """
    )
    assert [(p.line, p.path) for p in found] == [
        (2, "notifiers.ops.webhook"),
        (3, "notifiers.mail.headers"),
        (8, "jobs.a.notify.opps"),
        (8, "jobs.a.notify.mail.0"),
        (9, "jobs.a.warn_after"),
    ]


# --- merging defaults.notify ------------------------------------------------------------

MERGE = """\
notifiers:
  ops: {command: ops}
  oncall: {command: page}
defaults:
  notify: {ops: [failed, missed]}
jobs:
  plain: {every: 1m, command: x}
  more: {every: 1m, command: x, notify: {oncall: [failed]}}
  other_events: {every: 1m, command: x, notify: {ops: [succeeded]}}
  unsubscribed: {every: 1m, command: x, notify: {ops: []}}
  twice: {every: 1m, command: x, notify: {ops: [lost, lost, started]}}
"""


def test_a_jobs_notify_is_merged_over_the_defaults_notifier_by_notifier() -> None:
    jobs = loader.loads(MERGE, environ={}).jobs
    failed, missed = NotifyEvent.FAILED, NotifyEvent.MISSED
    assert jobs["plain"].settings.notify == {"ops": [failed, missed]}
    assert jobs["more"].settings.notify == {"ops": [failed, missed], "oncall": [failed]}
    assert jobs["other_events"].settings.notify == {"ops": [NotifyEvent.SUCCEEDED]}
    assert jobs["unsubscribed"].settings.notify == {}
    assert jobs["twice"].settings.notify == {"ops": [NotifyEvent.LOST, NotifyEvent.STARTED]}


def test_a_job_without_notify_anywhere_tells_no_one() -> None:
    cfg = loader.loads(JOB, environ={})
    assert cfg.jobs["a"].settings.notify == {}
    assert cfg.notifiers == {}
    assert cfg.jobs["a"].ping is None
    assert cfg.daemon.metrics is None


def test_a_huge_defaults_notify_is_bounded_like_every_default() -> None:
    events = ", ".join(["failed"] * 2000)
    jobs = "".join(f"  j{i}: {{every: 1m, command: x}}\n" for i in range(600))
    text = f"notifiers:\n  ops: {{command: p}}\ndefaults:\n  notify: {{ops: [{events}]}}\njobs:\n"
    said = one(text + jobs)
    assert said.startswith("s.yaml:4:3: defaults.notify: copied into each of the 600 jobs")


# --- ${NAME} ----------------------------------------------------------------------------

EXPANDED = """\
notifiers:
  ops:
    webhook: https://hooks.example.com/${HOOK_PATH}
    headers: {Authorization: "Bearer ${OPS_TOKEN}", X-Price: "$$5 ${OPS_TOKEN}"}
    repeat: 0s
  oncall:
    command: [/usr/local/bin/page, --key, "${PAGE_KEY}", "$$HOME"]
  shell:
    command: "TOKEN=${PAGE_KEY} exec /opt/bin/notify-ops --to ${PAGE_KEY}"
  mail:
    apprise: "mailtos://${SMTP_USER}:${SMTP_PASS}@smtp.example.com?to=ops@example.com"
jobs:
  backup:
    cron: "30 2 * * *"
    command: echo ${NOT_EXPANDED} $$
    env: {A: "${NOT_EXPANDED_EITHER}"}
    ping: https://hc-ping.com/${PING_KEY}
    warn_after: 45m
    notify: {oncall: [failed, long_running]}
"""
ENV = {
    "HOOK_PATH": "T0/B1/" + SECRET,
    "OPS_TOKEN": SECRET,
    "PAGE_KEY": SECRET + "-page",
    "SMTP_USER": "crond",
    "SMTP_PASS": SECRET + "pw",
    "PING_KEY": SECRET + "-uuid",
}


def test_names_are_expanded_into_the_specs_and_the_ping() -> None:
    cfg = loader.loads(EXPANDED, "s.yaml", environ=ENV, strict=True)
    assert cfg.env_warnings == []
    ops, oncall, shell, mail = (cfg.notifiers[n] for n in ("ops", "oncall", "shell", "mail"))
    assert ops == NotifierSpec(
        "ops",
        "webhook",
        f"https://hooks.example.com/T0/B1/{SECRET}",
        (("Authorization", f"Bearer {SECRET}"), ("X-Price", f"$5 {SECRET}")),
        timedelta(0),
        "webhook https://hooks.example.com/…",
    )
    assert oncall.kind == "command"
    assert oncall.target == ("/usr/local/bin/page", "--key", f"{SECRET}-page", "$HOME")
    assert oncall.shown == "command page"
    assert oncall.repeat == timedelta(hours=1)
    assert shell.target == f"TOKEN={SECRET}-page exec /opt/bin/notify-ops --to {SECRET}-page"
    assert shell.shown == "command exec"  # the first word that is not an assignment
    assert mail.kind == "apprise"
    assert mail.target == f"mailtos://crond:{SECRET}pw@smtp.example.com?to=ops@example.com"
    assert mail.shown == "apprise mailtos://…"
    backup = cfg.jobs["backup"]
    assert backup.ping == f"https://hc-ping.com/{SECRET}-uuid"
    assert backup.settings.ping == "https://hc-ping.com/${PING_KEY}"  # as written
    assert backup.settings.warn_after == timedelta(minutes=45)
    # A job's command and env are the job's: its shell expands its own variables.
    assert backup.settings.command == "echo ${NOT_EXPANDED} $$"
    assert backup.settings.env == {"A": "${NOT_EXPANDED_EITHER}"}
    for spec in cfg.notifiers.values():
        assert SECRET not in repr(spec)
    assert SECRET not in repr(backup)


UNSET = [
    (3, 14, "notifiers.ops.webhook", "HOOK_PATH"),
    (4, 30, "notifiers.ops.headers.Authorization", "OPS_TOKEN"),
    (4, 62, "notifiers.ops.headers.X-Price", "OPS_TOKEN"),
    (7, 43, "notifiers.oncall.command.2", "PAGE_KEY"),
    (9, 14, "notifiers.shell.command", "PAGE_KEY"),
    (11, 14, "notifiers.mail.apprise", "SMTP_PASS"),
    (11, 14, "notifiers.mail.apprise", "SMTP_USER"),
    (17, 11, "jobs.backup.ping", "PING_KEY"),
]


def _unset_lines(found: list[Problem]) -> list[tuple[int, int, str, str]]:
    out = []
    for p in found:
        name = p.message.split("}", 1)[0].removeprefix("${")
        assert p.message == (
            f"${{{name}}} is not set in crond's environment (export it before crond "
            "starts; $$ is a literal $)"
        )
        out.append((p.line, p.column, p.path, name))
    return out


def test_an_unset_name_is_a_located_error_when_strict() -> None:
    assert _unset_lines(problems(EXPANDED, {}, strict=True)) == UNSET


def test_an_unset_name_is_a_located_warning_otherwise_and_the_text_is_kept() -> None:
    cfg = loader.loads(EXPANDED, "s.yaml", environ={})
    assert _unset_lines(cfg.env_warnings) == UNSET
    assert cfg.jobs["backup"].ping == "https://hc-ping.com/${PING_KEY}"
    assert cfg.notifiers["ops"].headers[1] == ("X-Price", "$5 ${OPS_TOKEN}")


def test_os_environ_is_the_default_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    cfg = loader.loads(EXPANDED, strict=True)
    assert cfg.jobs["backup"].ping == f"https://hc-ping.com/{SECRET}-uuid"


def test_load_file_passes_environ_and_strict(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(EXPANDED)
    with pytest.raises(ConfigError, match="PING_KEY"):
        loader.load_file(path, enforce=False, environ={}, strict=True)
    cfg, _ = loader.load_file(path, enforce=False, environ={})
    assert len(cfg.env_warnings) == len(UNSET)


def test_a_defaults_ping_is_reported_once_not_per_job() -> None:
    text = "defaults:\n  ping: https://hc-ping.com/${K}\njobs:\n"
    text += "".join(f"  j{i}: {{every: 1m, command: x}}\n" for i in range(3))
    found = problems(text, {}, strict=True)
    assert [(p.line, p.path) for p in found] == [(2, "defaults.ping")]
    cfg = loader.loads(text, environ={"K": "abc"})
    assert {j.ping for j in cfg.jobs.values()} == {"https://hc-ping.com/abc"}


def test_a_url_with_an_unset_name_is_not_checked_until_it_is_set() -> None:
    text = notifier("webhook: ${HOOK}\n")
    cfg = loader.loads(text, environ={})
    assert [p.path for p in cfg.env_warnings] == ["notifiers.ops.webhook"]
    said = one(text, {"HOOK": f"ftp://hooks.example.com/{SECRET}"})
    assert said == (
        "s.yaml:3:14: notifiers.ops.webhook: ${HOOK} is not an "
        "http(s) URL with a host: its scheme is not http or https (write e.g. "
        "https://hooks.example.com/crond)"
    )


def test_a_header_value_that_expands_to_a_line_break_is_refused_unshown() -> None:
    text = notifier("webhook: https://h.example.com/x\nheaders: {A: 'x ${T}'}\n")
    said = one(text, {"T": f"{SECRET}\r\nX-Forged: 1"})
    assert said == (
        's.yaml:4:18: notifiers.ops.headers.A: the value of the header "A" holds a line '
        "break or a NUL character once its ${NAME}s are expanded, which no HTTP header can "
        "carry (the value is not shown, it may be a secret)"
    )


def test_dollar_dollar_is_a_literal_dollar_and_not_a_name() -> None:
    cfg = loader.loads(notifier("webhook: https://h.example.com/$${X}?a=$$b&c=$d\n"), environ={})
    assert cfg.env_warnings == []
    assert cfg.notifiers["ops"].target == "https://h.example.com/${X}?a=$b&c=$d"


# --- secrets never shown -----------------------------------------------------------------

LEAKS = [
    notifier(f"webhook: 'https://user:{SECRET}@h.example.com/{SECRET}?k={SECRET}'\nrepeat: x\n"),
    notifier(f"webhook: 'ftp://user:{SECRET}@h.example.com/{SECRET}?k={SECRET}'\n"),
    notifier(f"webhook: [{SECRET}]\n"),
    notifier(f"webhook: https://h/x\nheaders: {{A: [{SECRET}]}}\n"),
    notifier(f"webhook: https://h/x\nheaders: {{A: !!int {SECRET}}}\n"),
    notifier(f"command: {SECRET}\nheaders: {{A: {SECRET}}}\n"),
    notifier(f"command: [page, !!bool {SECRET}]\n"),
    notifier(f"apprise: 'json://user:{SECRET}@/{SECRET}'\n"),
    notifier(f"apprise: [{SECRET}]\n"),
    job(f"ping: 'hc-ping.com/{SECRET}'\n"),
    job(f"ping: !!int {SECRET}\n"),
    job(f"ping: {{k: {SECRET}}}\n"),
    "defaults:\n" + f"  ping: 'ftp://x/{SECRET}'\n" + JOB,
]


@pytest.mark.parametrize("text", LEAKS)
def test_no_message_shows_a_secret(text: str) -> None:
    found = problems(text, {"T": SECRET})
    assert found
    for problem in found:
        assert SECRET not in str(problem)
        assert SECRET.lower() not in str(problem).lower()


@pytest.mark.parametrize(
    "environ",
    [
        {"HOOK_PATH": f"x y {SECRET}"},  # an expanded URL that is wrong
        {"HOOK_PATH": "x", "PING_KEY": f"\n{SECRET}"},
        {"SMTP_USER": SECRET, "SMTP_PASS": f"{SECRET}@@/"},  # Apprise cannot use it
    ],
)
def test_no_message_shows_an_expanded_value(environ: dict[str, str]) -> None:
    for strict in (True, False):
        with pytest.raises(ConfigError) as info:
            loader.loads(EXPANDED, "s.yaml", environ=environ, strict=strict)
        assert SECRET not in str(info.value)


# --- Apprise ------------------------------------------------------------------------------

APPRISE = f"notifiers:\n  mail: {{apprise: 'mailtos://crond:{SECRET}@smtp.example.com'}}\n" + JOB


def test_apprise_missing_is_a_located_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "apprise", None)  # `import apprise` raises ImportError
    assert one(APPRISE) == (
        "s.yaml:2:19: notifiers.mail.apprise: apprise notifiers need the optional Apprise "
        "library: pip install 'crond[apprise]' (or use a webhook or command notifier)"
    )
    # Without the library, whether a name is set or not: the notifier cannot work.
    assert "crond[apprise]" in one(notifier("apprise: 'mailtos://${X}@h'\n"))


def test_apprise_is_not_imported_for_a_file_without_an_apprise_notifier() -> None:
    code = (
        "import sys; from crond.config import loader; "
        f"loader.loads({EXPANDED.replace('apprise', 'webhook')!r}, environ={{}}); "
        "print('apprise' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("usable", [True, False])
def test_apprise_logs_nothing_while_crond_checks_a_url(
    usable: bool, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    text = APPRISE if usable else APPRISE.replace("mailtos:", "nonsense:")
    caplog.set_level(1)  # every level, Apprise's TRACE among them
    if usable:
        loader.loads(text, environ={})
    else:
        assert one(text).startswith("s.yaml:2:19: notifiers.mail.apprise: nonsense://… is")
    assert [r for r in caplog.records if r.name.startswith("apprise")] == []
    out, err = capsys.readouterr()
    assert (out, err) == ("", "")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # its plugins' imports
def test_apprise_does_log_secrets_when_not_silenced(caplog: pytest.LogCaptureFixture) -> None:
    # The control for the test above: Apprise's own logging says the URL it is given.
    import apprise  # noqa: PLC0415

    caplog.set_level(1)
    apprise.Apprise.instantiate(f"mailtos://crond:{SECRET}@smtp.example.com")
    assert any(SECRET in r.getMessage() for r in caplog.records)


def test_only_the_checking_threads_apprise_records_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    logger = logging.getLogger("apprise")
    with notifiers.apprise_silenced():
        logger.info("from the checking thread")
        other = threading.Thread(target=logger.info, args=("from another thread",))
        other.start()
        other.join()
    logger.info("after the check")
    said = [r.getMessage() for r in caplog.records if r.name == "apprise"]
    assert said == ["from another thread", "after the check"]


# --- the rest -------------------------------------------------------------------------------


def test_metrics_takes_host_and_port() -> None:
    for address in ("127.0.0.1:9464", "[::1]:0", "localhost:9464", "0.0.0.0:9464"):
        cfg = loader.loads(f"daemon:\n  metrics: '{address}'\n" + JOB)
        assert cfg.daemon.metrics == address


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("/usr/local/bin/page --service cron", "command page"),
        (["/opt/x/notify", "--token", "t"], "command notify"),
        ("A=1 B=2 /bin/page -k x", "command page"),
        ("'unclosed page", "command 'unclosed"),
        ("${PAGER} --to ops", "command ${PAGER}"),
    ],
)
def test_a_command_is_shown_by_its_programs_name_only(command: str | list[str], shown: str) -> None:
    assert notifiers.shown("command", command) == shown


def test_the_first_pass_suffices_unless_a_name_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    passes: list[object] = []
    parse = yamlsource.parse

    def counted(text: str, keep: frozenset[str] | None = None) -> places.Source:
        passes.append(keep)
        return parse(text, keep)

    monkeypatch.setattr(yamlsource, "parse", counted)
    loader.loads(EXPANDED, environ=ENV)
    assert len(passes) == 1
    loader.loads(EXPANDED, environ={})
    assert passes[1:] == [passes[0], None]  # then the located pass, for the warnings


def test_the_json_schema_describes_notifiers() -> None:
    schema = schema_json.json_schema()
    assert schema["properties"]["notifiers"]["additionalProperties"] == {"$ref": "#/$defs/Notifier"}
    notifier_schema = schema["$defs"]["Notifier"]
    assert set(notifier_schema["properties"]) == {
        "webhook",
        "command",
        "apprise",
        "headers",
        "repeat",
    }
    assert notifier_schema["additionalProperties"] is False
    assert {"notify", "ping", "warn_after"} <= set(schema["$defs"]["Job"]["properties"])


def test_enormous_headers_and_notify_maps_are_answered_at_once() -> None:
    # No bound of their own: the file's size (4 MiB) and the alias bound keep them small,
    # and each entry is checked once.
    headers = ", ".join(f"H{i}: v" for i in range(50_000))
    start = time.thread_time()  # the work, not the wait for a core on a busy machine
    cfg = loader.loads(notifier(f"webhook: https://h.example.com/x\nheaders: {{{headers}}}\n"))
    assert len(cfg.notifiers["ops"].headers) == 50_000
    named = "".join(f"  n{i}: {{command: p}}\n" for i in range(3000))
    notify = ", ".join(f"x{i}y: [failed]" for i in range(20_000))
    found = problems(
        f"notifiers:\n{named}jobs:\n  a: {{every: 1m, command: x, notify: {{{notify}}}}}\n"
    )
    assert len(found) == 1001  # the first 1,000, then one line that says so
    assert time.thread_time() - start < 3.0


def test_user_info_and_an_authorization_header_are_not_given_together() -> None:
    text = (
        "notifiers:\n  hook:\n    webhook: https://u:p@hooks.example.com/x\n"
        "    headers: {Authorization: Bearer t}\njobs:\n  j: {every: 1m, command: 'true'}\n"
    )
    with pytest.raises(ConfigError) as caught:
        loader.loads(text, "s.yaml")
    (problem,) = caught.value.problems
    assert "user info" in problem.message
    assert "u:p" not in str(problem)
    fine = text.replace("u:p@", "")
    assert loader.loads(fine, "s.yaml").notifiers["hook"].kind == "webhook"
