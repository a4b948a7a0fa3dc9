"""The schedules file: good files load, every mistake is reported where it stands."""

from __future__ import annotations

import gc
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import BaseModel

from crond.config import loaded, loader, model, schema_json
from crond.config.model import Output, Overlap
from crond.config.problems import ConfigError, Problem
from crond.when import timing

ROOT = Path(__file__).resolve().parents[2]


def problems(text: str) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        loader.loads(textwrap.dedent(text), "s.yaml")
    return info.value.problems


def one(text: str) -> str:
    found = problems(text)
    assert len(found) == 1, [str(p) for p in found]
    return str(found[0])


# (id, file, the one line crond must print)
BAD = [
    (
        "yaml_syntax",
        "jobs:\n  a: {cron: '* * * * *', command: x\n",
        "s.yaml:3:1: YAML syntax error",
    ),
    (
        "yaml_tab_indent",
        "jobs:\n  a:\n\tevery: 1m\n",
        "s.yaml:3:1: YAML syntax error: while scanning for the next token found character "
        "that cannot start any token (a tab: YAML indents with spaces only)",
    ),
    (
        "yaml_unquoted_colon",
        "jobs:\n  a:\n    every: 1m\n    command: echo a: b\n",
        "s.yaml:4:20: YAML syntax error: mapping values are not allowed in this context "
        '(a value with ": " in it must be quoted',
    ),
    (
        "retry_not_a_mapping",
        "jobs:\n  a:\n    every: 1m\n    command: x\n    retry: 3\n",
        "s.yaml:5:12: jobs.a.retry: 3 is not a mapping, e.g. retry: {attempts: 3, delay: 10s}",
    ),
    (
        "env_as_list",
        "jobs:\n  a:\n    every: 1m\n    command: x\n    env: [A=1]\n",
        "s.yaml:5:10: jobs.a.env: a list is not a mapping of names to strings",
    ),
    (
        "yaml_impossible_date",
        "jobs:\n  a:\n    every: 1m\n    command: x\n    description: 2026-02-30\n",
        's.yaml:5:18: jobs.a.description: "2026-02-30" reads as a YAML timestamp but is not a '
        "valid one (day is out of range for month); quote it to keep it as text",
    ),
    (
        "yaml_broken_hex",
        "jobs:\n  a:\n    every: 1m\n    command: x\n    env: {N: 0x_}\n",
        # (an env value is never shown: it may be a secret)
        "s.yaml:5:14: jobs.a.env.N: the value reads as a YAML int but is not a valid one; quote it",
    ),
    (
        "yaml_bad_tagged_bool",  # PyYAML raises KeyError for it: no traceback, located
        "jobs:\n  a: {every: 1m, command: !!bool foo}\n",
        's.yaml:2:27: jobs.a.command: "foo" is not a valid !!bool; remove the !!bool tag or '
        "fix the value",
    ),
    (
        "yaml_bad_tagged_key",
        "jobs:\n  !!timestamp foo: {every: 1m, command: x}\n",
        's.yaml:2:3: jobs: "foo" is not a valid !!timestamp; remove the !!timestamp tag',
    ),
    (
        "yaml_second_document",
        "jobs:\n  a: {every: 1m, command: x}\n---\njobs:\n  b: {every: 1m, command: y}\n",
        "s.yaml:3:1: a second YAML document starts here (after `---`); crond reads one "
        "document: put every job under the first one's `jobs:`",
    ),
    (
        "yaml_less_indented_later",
        "  jobs:\n    a: {every: 1m, command: x}\nb: {every: 1m, command: y}\n",
        "s.yaml:3:1: YAML syntax error: did not find expected <document start> (this line "
        "is indented less than the file's first line)",
    ),
    ("empty_file", "", "s.yaml:1:1: the file is empty"),
    ("only_comments", "# nothing\n", "s.yaml:1:1: the file is empty"),
    ("not_a_mapping", "- a\n- b\n", "s.yaml:1:1: the file is a list, not a mapping"),
    ("scalar_file", "hello\n", "s.yaml:1:1: the file is a str, not a mapping"),
    ("no_jobs_key", "timezone: UTC\n", "s.yaml:1:1: no jobs: add a `jobs:` mapping"),
    ("empty_jobs", "jobs: {}\n", "s.yaml:1:1: no jobs"),
    (
        "unknown_job_field",
        """\
        jobs:
          report:
            cron: "0 9 * * *"
            comand: echo hi
        """,
        's.yaml:4:5: jobs.report.comand: unknown field (did you mean "command"?)',
    ),
    (
        "unknown_top_field",
        "timezon: UTC\njobs:\n  a: {every: 1m, command: x}\n",
        's.yaml:1:1: timezon: unknown field (did you mean "timezone"?)',
    ),
    (
        "bad_duration_hint",
        """\
        jobs:
          cleanup:
            every: 15 mins
            command: x
        """,
        's.yaml:3:12: jobs.cleanup.every: "15 mins" is not a duration (try 15m)',
    ),
    (
        "fractional_duration_hint",
        "jobs:\n  a:\n    every: 1.5h\n    command: x\n",
        's.yaml:3:12: jobs.a.every: "1.5h" is not a duration (try 1h30m)',
    ),
    (
        "unknown_zone",
        """\
        jobs:
          sync:
            cron: "0 * * * *"
            timezone: Europe/Berln
            command: x
        """,
        's.yaml:4:15: jobs.sync.timezone: unknown time zone "Europe/Berln" '
        '(did you mean "Europe/Berlin"?)',
    ),
    (
        "zone_wrong_case",
        "timezone: europe/berlin\njobs:\n  a: {every: 1m, command: x}\n",
        's.yaml:1:11: timezone: unknown time zone "europe/berlin" (did you mean "Europe/Berlin"?)',
    ),
    (
        "duplicate_job",
        "jobs:\n  a: {every: 1m, command: x}\n  a: {every: 2m, command: y}\n",
        's.yaml:3:3: jobs.a: duplicate key "a" (first defined at line 2)',
    ),
    (
        "duplicate_field_deep",
        "jobs:\n  a:\n    every: 1m\n    env: {X: 1, X: 2}\n    command: x\n",
        's.yaml:4:17: jobs.a.env.X: duplicate key "X" (first defined at line 4)',
    ),
    (
        "bad_job_name",
        "jobs:\n  'my job':\n    every: 1m\n    command: x\n",
        's.yaml:2:3: jobs.my job: "my job" is not a valid job name',
    ),
    (
        "cron_minute_range",
        "jobs:\n  a:\n    cron: '61 * * * *'\n    command: x\n",
        's.yaml:3:11: jobs.a.cron: "61 * * * *": minute',
    ),
    (
        "cron_weekday_name",
        "jobs:\n  a:\n    cron: '0 9 * * fry'\n    command: x\n",
        's.yaml:3:11: jobs.a.cron: "0 9 * * fry": day-of-week',
    ),
    (
        "cron_six_fields",
        "jobs:\n  a:\n    cron: '0 0 9 * * *'\n    command: x\n",
        's.yaml:3:11: jobs.a.cron: "0 0 9 * * *"',
    ),
    (
        "both_cron_and_every",
        "jobs:\n  a:\n    cron: '0 9 * * *'\n    every: 1h\n    command: x\n",
        "s.yaml:4:5: jobs.a.every: give either cron or every, not both",
    ),
    (
        "neither_cron_nor_every",
        "jobs:\n  a:\n    command: x\n",
        "s.yaml:2:3: jobs.a: a schedule is missing: give cron, every or at (or after, to chain it)",
    ),
    (
        "both_command_and_python",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    python: m:f\n",
        "s.yaml:5:5: jobs.a.python: give either command or python, not both",
    ),
    (
        "nothing_to_run",
        "jobs:\n  a:\n    every: 1h\n",
        "s.yaml:2:3: jobs.a: something to run is missing: give command or python",
    ),
    (
        "max_running_without_overlap_allow",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    max_running: 2\n",
        "s.yaml:5:5: jobs.a.max_running: max_running applies to overlap: allow only "
        "(this job has overlap: skip, which runs one at a time already)",
    ),
    (
        "max_running_with_overlap_replace",
        "jobs:\n  a:\n    every: 1h\n    overlap: replace\n    command: x\n    max_running: 2\n",
        "s.yaml:6:5: jobs.a.max_running: max_running applies to overlap: allow only "
        "(this job has overlap: replace",
    ),
    (
        "max_running_zero",
        "jobs:\n  a:\n    every: 1h\n    overlap: allow\n    max_running: 0\n    command: x\n",
        "s.yaml:5:18: jobs.a.max_running: 0 is out of range (must be at least 1)",
    ),
    (
        "max_running_a_boolean",
        "jobs:\n  a:\n    every: 1h\n    overlap: allow\n    max_running: yes\n    command: x\n",
        "s.yaml:5:18: jobs.a.max_running: true is not a whole number",
    ),
    (
        "daemon_max_running_zero",
        "daemon:\n  max_running: 0\njobs:\n  a: {every: 1h, command: x}\n",
        "s.yaml:2:16: daemon.max_running: 0 is out of range (must be at least 1)",
    ),
    (
        "daemon_max_running_text",
        "daemon:\n  max_running: '4'\njobs:\n  a: {every: 1h, command: x}\n",
        's.yaml:2:16: daemon.max_running: "4" is not a whole number',
    ),
    (
        "args_on_command",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    args: [1]\n",
        "s.yaml:5:5: jobs.a.args: args applies to python jobs only",
    ),
    (
        "timezone_on_every",
        "jobs:\n  a:\n    every: 1h\n    timezone: UTC\n    command: x\n",
        "s.yaml:4:5: jobs.a.timezone: an every job runs in absolute time",
    ),
    (
        "malformed_python_ref",
        "jobs:\n  a:\n    every: 1h\n    python: myapp.tasks.cleanup\n",
        's.yaml:4:13: jobs.a.python: "myapp.tasks.cleanup" is not a python reference',
    ),
    (
        "enum_did_you_mean",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    overlap: skp\n",
        's.yaml:5:14: jobs.a.overlap: "skp" is not one of skip, allow, replace, queue '
        '(did you mean "skip"?)',
    ),
    (
        "bool_not_bool",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    enabled: perhaps\n",
        's.yaml:5:14: jobs.a.enabled: "perhaps" is not true or false',
    ),
    (
        "version_two",
        "version: 2\njobs:\n  a: {every: 1m, command: x}\n",
        "s.yaml:1:10: version: 2 is not a supported version (only 1 exists)",
    ),
    (
        "command_wrong_type",
        "jobs:\n  a:\n    every: 1h\n    command: {run: x}\n",
        "s.yaml:4:14: jobs.a.command: a mapping is not a string (run by /bin/sh -c)",
    ),
    (
        "retry_unknown_field",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    retry: {attempt: 3}\n",
        's.yaml:5:13: jobs.a.retry.attempt: unknown field (did you mean "attempts"?)',
    ),
    (
        "anchor_without_offset",
        "jobs:\n  a:\n    every: 1h\n    anchor: '2026-01-01T00:00:00'\n    command: x\n",
        "s.yaml:4:13: jobs.a.anchor:",
    ),
    (
        "env_value_bool",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    env: {DEBUG: yes}\n",
        "s.yaml:5:18: jobs.a.env.DEBUG: yes (YAML reads it as true) is not a string; "
        'quote it ("yes")',
    ),
    (
        "env_value_true_as_written",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    env: {DEBUG: true}\n",
        's.yaml:5:18: jobs.a.env.DEBUG: true is not a string; quote it ("true")',
    ),
    (
        "env_value_tilde",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    env: {DEBUG: ~}\n",
        's.yaml:5:18: jobs.a.env.DEBUG: ~ (YAML reads it as null) is not a string; quote it ("~")',
    ),
    (
        "env_value_empty",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    env: {DEBUG: }\n",
        "s.yaml:5:18: jobs.a.env.DEBUG: an empty value (YAML reads it as null) is not a string; "
        'write "" for empty text',
    ),
    (
        "command_off",
        "jobs:\n  a:\n    every: 1h\n    command: off\n",
        "s.yaml:4:14: jobs.a.command: off (YAML reads it as false) is not a string (run "
        "by /bin/sh -c) or a list of strings (run directly)",
    ),
    (
        "control_socket_off",  # quoting "off" would make a socket named off
        "daemon:\n  control_socket: off\njobs:\n  a: {every: 1h, command: x}\n",
        "s.yaml:2:19: daemon.control_socket: off (YAML reads it as false) is not a path: to "
        "turn the socket off, write none",
    ),
    (
        "control_socket_false",
        "daemon:\n  control_socket: false\njobs:\n  a: {every: 1h, command: x}\n",
        "s.yaml:2:19: daemon.control_socket: false is not a path: to turn the socket off, "
        "write none",
    ),
    (
        "control_socket_yes",
        "daemon:\n  control_socket: yes\njobs:\n  a: {every: 1h, command: x}\n",
        "s.yaml:2:19: daemon.control_socket: yes (YAML reads it as true) is not a path: the "
        "socket is on by default (crond.sock in the state directory): leave the field out, or "
        "give a path",
    ),
    (
        "state_dir_off",
        "daemon:\n  state_dir: off\njobs:\n  a: {every: 1h, command: x}\n",
        "s.yaml:2:14: daemon.state_dir: off (YAML reads it as false) is not a directory: to "
        "keep no state store, write none",
    ),
    (
        "liveness_file_off",
        "daemon:\n  liveness_file: off\njobs:\n  a: {every: 1h, command: x}\n",
        "s.yaml:2:18: daemon.liveness_file: off (YAML reads it as false) is not a path: to "
        "write no liveness file, leave the field out (none is written by default)",
    ),
    (
        "metrics_off",
        "daemon:\n  metrics: off\njobs:\n  a: {every: 1h, command: x}\n",
        "s.yaml:2:12: daemon.metrics: off (YAML reads it as false) is not HOST:PORT: to serve "
        "no metrics, leave the field out (they are off by default)",
    ),
    (
        "defaults_bad_duration",
        "defaults:\n  grace: soon\njobs:\n  a: {every: 1m, command: x}\n",
        's.yaml:2:10: defaults.grace: "soon" is not a duration',
    ),
    (
        "complex_key",  # a traceback before: the key's own events were read as its value
        "jobs:\n  ? [a, b]\n  : {every: 1m, command: x}\n",
        "s.yaml:2:5: jobs: a key must be a plain value",
    ),
    (
        "negative_retry",
        "jobs:\n  a:\n    every: 1h\n    command: x\n    retry: {attempts: -1}\n",
        "s.yaml:5:23: jobs.a.retry.attempts: -1 is out of range (must be at least 0)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_file_reports_one_located_problem(text: str, expected: str) -> None:
    assert one(text).startswith(expected)


def test_every_problem_at_once_in_file_order() -> None:
    found = problems(
        """\
        timezone: Mars/Olympus
        jobs:
          a:
            every: 15 mins
            command: x
          b:
            cron: "0 25 * * *"
            comand: y
        """
    )
    assert [(p.line, p.path) for p in found] == [
        (1, "timezone"),
        (4, "jobs.a.every"),
        (7, "jobs.b.cron"),
        (8, "jobs.b.comand"),
    ]


def test_defaults_error_reported_once_not_per_job() -> None:
    found = problems(
        "defaults:\n  timeout: forever\njobs:\n"
        + "".join(f"  j{i}: {{every: 1m, command: x}}\n" for i in range(5))
    )
    assert [p.path for p in found] == ["defaults.timeout"]


GOOD = """\
timezone: Europe/Berlin
defaults:
  grace: 2m
  timeout: 1h
  env: {LANG: C.UTF-8, A: "1"}
  interpreter: /usr/bin/python3
daemon:
  heartbeat: 5s
jobs:
  backup:
    cron: "30 2 * * *"
    command: pg_dump app
    timeout: 2h
    env: {A: "2", PORT: 8080}
  cleanup:
    every: 15m
    jitter: 2m
    command: [find, /tmp/app, -delete]
  report:
    cron: "0 9 * * mon-fri"
    timezone: America/New_York
    python: myapp.reports:send_daily
    args: [eu]
    kwargs: {limit: 100}
    retry: {attempts: 3, delay: 10s}
"""


def test_good_file_with_defaults_merged() -> None:
    cfg = loader.loads(GOOD, "g.yaml")
    backup, cleanup, report = cfg.jobs["backup"], cfg.jobs["cleanup"], cfg.jobs["report"]
    assert backup.name == "backup"
    assert backup.settings.timezone == "Europe/Berlin"
    assert backup.settings.timeout == timedelta(hours=2)
    assert backup.settings.grace == timedelta(minutes=2)
    assert backup.settings.env == {"LANG": "C.UTF-8", "A": "2", "PORT": "8080"}
    assert backup.settings.interpreter is None  # python-only defaults stay off command jobs
    assert cleanup.settings.timezone is None
    assert cleanup.settings.every == timedelta(minutes=15)
    assert cleanup.settings.command == ["find", "/tmp/app", "-delete"]
    assert cleanup.settings.overlap is Overlap.SKIP
    assert cleanup.settings.output is Output.LOG
    assert cleanup.settings.kill_after == timedelta(seconds=10)
    assert report.settings.timezone == "America/New_York"
    assert report.settings.interpreter == "/usr/bin/python3"
    assert report.settings.retry.attempts == 3
    assert report.settings.retry.backoff == 2.0
    assert cfg.daemon.heartbeat == timedelta(seconds=5)
    assert cfg.daemon.shutdown_timeout == timedelta(seconds=30)


def test_each_distinct_cron_is_parsed_once_per_load(monkeypatch: pytest.MonkeyPatch) -> None:
    # More distinct expressions than the parse cache holds: each is still parsed once,
    # and every job gets the parsed expression of its own text.
    parsed: list[str] = []

    def parse(text: str) -> timing.CronExpr:
        parsed.append(text)
        return timing.parse_cron(text)

    monkeypatch.setattr(model, "parse_cron", parse)
    crons = [f"{i % 60} {i // 60 % 24} {1 + i % 28} * *" for i in range(40)]
    lines = ["jobs:"]
    for i, cron in enumerate([*crons, *crons]):
        lines += [f"  j{i}:", f'    cron: "{cron}"', "    command: x"]
    cfg = loader.loads("\n".join(lines) + "\n")
    assert sorted(parsed) == sorted(crons)
    for job in cfg.jobs.values():
        assert job.cron_expr == timing.parse_cron(str(job.settings.cron or ""))


def test_models_are_frozen() -> None:
    cfg = loader.loads(GOOD)
    with pytest.raises(ValueError, match="frozen"):
        cfg.jobs["backup"].settings.command = "rm -rf /"  # type: ignore[misc]


def test_yaml_merge_keys_are_honoured() -> None:
    cfg = loader.loads(
        "jobs:\n"
        "  a: &common\n    every: 1m\n    command: echo\n"
        "  b:\n    <<: *common\n    command: echo b\n"
    )
    assert cfg.jobs["b"].settings.command == "echo b"
    assert cfg.jobs["b"].settings.every == timedelta(minutes=1)


def test_local_zone_is_accepted() -> None:
    cfg = loader.loads("timezone: local\njobs:\n  a: {cron: '@daily', command: x}\n")
    assert cfg.jobs["a"].zone is not None


def test_missing_file_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        loader.load_file(tmp_path / "nope.yaml")


def test_example_file_validates() -> None:
    cfg, _ = loader.load_file(ROOT / "schedules.example.yaml")
    assert len(cfg.jobs) >= 5
    assert {j.settings.output for j in cfg.jobs.values()} == {Output.LOG}


def test_every_model_field_is_documented() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    models: list[type[BaseModel]] = [
        model.Config,
        model.JobFields,
        model.Job,
        model.Daemon,
        model.Retry,
        model.Notifier,
    ]
    missing = [
        f"{model.__name__}.{name}"
        for model in models
        for name in model.model_fields
        if f"`{name}`" not in doc
    ]
    assert not missing


def test_json_schema_describes_jobs() -> None:
    schema = schema_json.json_schema()
    job = schema["$defs"]["Job"]
    assert {"cron", "every", "command", "python", "retry"} <= set(job["properties"])
    assert job["additionalProperties"] is False
    assert schema["properties"]["jobs"]["propertyNames"]["pattern"].startswith("^[A-Za-z0-9]")


@pytest.mark.parametrize("enabled", [True, False])
def test_loads_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    was, frozen = gc.isenabled(), gc.get_freeze_count()
    try:
        (gc.enable if enabled else gc.disable)()
        loader.loads(GOOD)
        with pytest.raises(ConfigError):
            loader.loads("jobs: {}\n")
        assert gc.isenabled() is enabled
        assert gc.get_freeze_count() == frozen  # nothing left out of the collector's reach
    finally:
        (gc.enable if was else gc.disable)()


def test_cli_offers_the_log_levels_logs_knows() -> None:
    # cli.py names them itself so that `crond validate` does not import structlog.
    from crond import cli, logs  # noqa: PLC0415  (the test is about these two only)

    assert cli._LOG_LEVELS == logs.LEVELS


def test_catchup_history_and_reboot_fields() -> None:
    cfg = loader.loads(
        "defaults: {history: 7}\n"
        "daemon: {state_dir: /srv/crond}\n"
        "jobs:\n"
        "  r: {cron: '0 6 * * *', catchup: latest, catchup_window: 2h, command: x}\n"
        "  b: {cron: '@REBOOT', command: x}\n"
    )
    r, b = cfg.jobs["r"], cfg.jobs["b"]
    assert (r.settings.catchup, r.settings.catchup_window, r.settings.history) == (
        model.Catchup.LATEST,
        timedelta(hours=2),
        7,
    )
    assert (b.settings.catchup, b.settings.catchup_window) == (
        model.Catchup.NONE,
        timedelta(days=1),
    )
    assert b.reboot
    assert not r.reboot
    assert b.schedule_text == "@reboot"
    assert cfg.daemon.state_dir == "/srv/crond"
    assert list(b.make_timing().fires(datetime(2026, 1, 1, tzinfo=UTC))) == []
    assert loaded.reboot_warnings(cfg) == []


def test_bad_catchup_values_are_located() -> None:
    with pytest.raises(ConfigError) as err:
        loader.loads(
            "jobs:\n  r:\n    every: 1m\n    catchup: every\n    catchup_window: 0s\n"
            "    history: 0\n    command: x\n"
        )
    text = "\n".join(str(p) for p in err.value.problems)
    assert "<string>:4:14: jobs.r.catchup:" in text
    assert "<string>:5:21: jobs.r.catchup_window:" in text
    assert "<string>:6:14: jobs.r.history:" in text


def test_keys_are_text_as_written_not_yaml_1_1_booleans() -> None:
    """`off:` as a job name, `on:`/`yes:` as env names: YAML 1.1 would read False/True."""
    cfg = loader.loads(
        "jobs:\n"
        "  off: {every: 1m, command: x, env: {on: '1', yes: '2', 0x10: '3'}}\n"
        "  null: {every: 1m, command: x}\n"
    )
    assert list(cfg.jobs) == ["off", "null"]
    assert cfg.jobs["off"].settings.env == {"on": "1", "yes": "2", "0x10": "3"}
    with pytest.raises(ConfigError) as err:  # the located second pass reads keys the same
        loader.loads("jobs:\n  off: {every: 1m, command: x}\n  on: {every: 1 min, command: x}\n")
    assert [p.path for p in err.value.problems] == ["jobs.on.every"]


# --- every field, given every wrong type: a located problem, never a traceback ---------

WRONG_VALUES = {
    "null": "",
    "int": "5",
    "bool": "true",
    "float": "1.5",
    "list": "[a, 1]",
    "mapping": "{a: 1}",
    "date": "2026-01-01",
    "timestamp": "2026-01-01T10:00:00Z",
}


def _job_base(field: str) -> list[str]:
    """The lines of a job that is valid without `field`, and that `field` applies to."""
    fields = {"every": "1m", "python": "m:f"}
    if field in ("cron", "timezone"):
        fields = {"cron": "'0 * * * *'", "python": "m:f"}
    elif field == "command":
        fields = {"every": "1m"}
    fields.pop(field, None)
    return [f"    {key}: {text}" for key, text in fields.items()]


_ONE_JOB = ["jobs:", "  j:", "    every: 1m", "    python: m:f"]


def _field_file(path: str, value: str) -> tuple[str, int]:
    """A file that sets the field at dotted `path` to `value`, and the value's line."""
    *parents, name = path.split(".")
    if not parents:
        lines = [f"{name}: {value}"] + ([] if name == "jobs" else _ONE_JOB)
    elif parents[0] in ("defaults", "daemon"):
        lines = [f"{parents[0]}:", f"  {name}: {value}", *_ONE_JOB]
    elif parents[-1] == "retry":
        lines = [*_ONE_JOB, "    retry:", f"      {name}: {value}"]
    else:
        lines = ["jobs:", "  j:", *_job_base(name), f"    {name}: {value}"]
    line = next(i for i, text in enumerate(lines, 1) if text.strip().startswith(f"{name}:"))
    return "\n".join(lines) + "\n", line


FIELD_PATHS = [
    *model.Config.model_fields,
    *(f"jobs.j.{name}" for name in model.Job.model_fields),
    *(f"defaults.{name}" for name in model.JobFields.model_fields),
    *(f"daemon.{name}" for name in model.Daemon.model_fields),
    *(f"jobs.j.retry.{name}" for name in model.Retry.model_fields),
]


@pytest.mark.parametrize("kind", list(WRONG_VALUES))
@pytest.mark.parametrize("path", FIELD_PATHS)
def test_every_field_given_every_type_is_read_or_refused_where_it_stands(
    path: str, kind: str
) -> None:
    text, line = _field_file(path, WRONG_VALUES[kind])
    try:
        loader.loads(text, "s.yaml")
    except ConfigError as exc:
        found = exc.problems
    else:
        return  # a value of another type that the field takes (`every: 5` is 5 s)
    for problem in found:
        assert len(str(problem).splitlines()) == 1
        assert problem.line >= 1
    parent = path.rsplit(".", 1)[0] if "." in path else ""
    assert any(
        (p.line == line and (p.path == path or p.path.startswith(f"{path}.")))
        or p.path == parent  # `cron:` (null): "a schedule is missing", at the job
        for p in found
    ), [str(p) for p in found]


def test_the_table_of_fields_refuses_what_it_should() -> None:
    # The test above passes a file that loads; these must not load.
    for path, kind in [("timezone", "int"), ("jobs.j.every", "list"), ("daemon.heartbeat", "bool")]:
        text, _ = _field_file(path, WRONG_VALUES[kind])
        with pytest.raises(ConfigError):
            loader.loads(text)
    text, _ = _field_file("jobs.j.every", "5")
    assert loader.loads(text).jobs["j"].settings.every == timedelta(seconds=5)


@pytest.mark.parametrize("value", ["", "5", "true", "1.5", "[UTC]", "{a: 1}", "2026-01-01"])
def test_a_top_level_timezone_that_is_not_text_is_a_located_problem(value: str) -> None:
    found = problems(f"timezone: {value}\njobs:\n  a: {{cron: '@daily', command: x}}\n")
    assert [(p.line, p.path) for p in found] == [(1, "timezone")]
    assert "is not a time zone name (an IANA name such as Europe/Berlin" in found[0].message


# --- a problem is one line, and never shows an env value --------------------------------


@pytest.mark.parametrize(
    "text",
    [
        'jobs:\n  j: {every: 1m, command: x}\n  "a\\nb.yaml:1:1: forged": 1\n',
        '"a\\nb.yaml:1:1: forged": 1\njobs:\n  j: {every: 1m, command: x}\n',
        'jobs:\n  j: {every: 1m, command: x, "a\\rb.yaml:1:1: forged": 1}\n',
        'jobs:\n  j: {cron: "0 9 * * *\\nb.yaml:1:1: forged", command: x}\n',
        'jobs:\n  j: {every: "1m\\u2028b.yaml:1:1: forged", command: x}\n',
        'jobs:\n  j: {every: 1m, command: x, overlap: "skip\\x85b.yaml:1:1: forged"}\n',
    ],
)
def test_keys_and_values_cannot_forge_problem_lines(text: str) -> None:
    found = problems(text)
    for problem in found:
        line = str(problem)
        assert len(line.splitlines()) == 1, line
        assert line.startswith("s.yaml:")
    assert any("b.yaml:1:1: forged" in str(p) for p in found)  # shown, escaped


def test_the_file_name_cannot_forge_problem_lines() -> None:
    with pytest.raises(ConfigError) as info:
        loader.loads("jobs: {}\n", "a\nb.yaml:1:1: forged")
    assert str(info.value) == (
        "a\\nb.yaml:1:1: forged:1:1: no jobs: add a `jobs:` mapping with at least one job"
    )


SECRET = "hunter2-secret"


@pytest.mark.parametrize(
    "env",
    [
        f"{{TOKEN: [{SECRET}]}}",
        f"{{TOKEN: {{k: {SECRET}}}}}",
        f"{{TOKEN: 2026-02-30{SECRET}}}",  # text after all: no problem, but still not shown
        "{TOKEN: 2026-02-30}",
        "{TOKEN: 0x_" + SECRET.replace("-", "_") + "}",
        f"TOKEN={SECRET}",
        f"[{SECRET}]",
        "{TOKEN: 2026-01-01}",
    ],
)
@pytest.mark.parametrize("where", ["job", "defaults"])
def test_an_env_value_is_never_shown(env: str, where: str) -> None:
    head, job = f"defaults: {{env: {env}}}\n", "{every: 1m, command: x}"
    if where == "job":
        head, job = "", f"{{every: 1m, command: x, env: {env}}}"
    try:
        loader.loads(f"{head}jobs:\n  a: {job}\n", "s.yaml")
    except ConfigError as exc:
        text = str(exc)
        assert "env" in text
        assert SECRET not in text
        assert "2026-02-30" not in text
        assert "0x_" not in text
        assert "2026-01-01" not in text


def test_an_env_value_of_the_wrong_type_names_the_variable_and_the_type() -> None:
    assert one("jobs:\n  a:\n    every: 1m\n    command: x\n    env: {TOKEN: [abc]}\n") == (
        "s.yaml:5:18: jobs.a.env.TOKEN: a list is not a string (env values are text; numbers "
        "are turned into text); the value is not shown, it may be a secret"
    )


# --- the defaults, copied into every job, are bounded ---------------------------------


def test_defaults_copied_into_many_jobs_are_bounded() -> None:
    big = ",".join(["1"] * 200)
    jobs = "".join(f"  j{i}: {{every: 1m, python: m:f}}\n" for i in range(5000))
    # 5,000 jobs x 201 values: over a million values to check
    found = problems(f"defaults:\n  args: [{big}]\njobs:\n{jobs}")
    assert [(p.line, p.path) for p in found] == [(2, "defaults.args")]
    assert "copied into each of the 5,000 jobs" in found[0].message
    small = ",".join(["1"] * 150)
    cfg = loader.loads(f"defaults:\n  args: [{small}]\njobs:\n{jobs}")
    assert len(cfg.jobs["j1"].settings.args or []) == 150


# --- a file with thousands of mistakes: the first 1,000, at once -----------------------


def test_thousands_of_mistakes_are_cut_to_the_first_thousand_in_file_order() -> None:
    jobs = "".join(f"  j{i}: {{every: 1m, command: x, comand: y}}\n" for i in range(1500))
    found = problems(f"jobs:\n{jobs}")
    assert len(found) == 1001
    assert [p.line for p in found[:1000]] == list(range(2, 1002))
    assert (found[-1].line, found[-1].path) == (1002, "")
    assert "more problems from here on, not shown" in found[-1].message


def test_a_hundred_thousand_bad_values_through_aliases_are_answered_at_once() -> None:
    dates = ",".join(["2026-01-01"] * 999)
    uses = ",".join(["*a"] * 99)
    text = f"jobs:\n  j:\n    every: 1m\n    python: m:f\n    args: [&a [{dates}], {uses}]\n"
    start = time.thread_time()  # the work, not the wait for a core on a busy machine
    found = problems(text)
    # ~0.6 s of CPU on a quiet core, over 1 s with the suite's 4 workers on 2 cores (the
    # hyperthread beside it busy): a bound a linear answer keeps, and an expansion of the
    # aliases' 100,000 values one by one (minutes) does not.
    assert time.thread_time() - start < 2.5
    assert len(found) == 1001
    assert found[0].message == "2026-01-01 is not a JSON value"


def test_top_level_x_keys_hold_anchors_and_are_ignored() -> None:
    cfg = loader.loads(
        "x-common: &common\n  every: 1m\n  timeout: 5m\n"
        "x-env: {A: '1'}\n"
        "jobs:\n  a:\n    <<: *common\n    command: x\n"
    )
    assert list(cfg.jobs) == ["a"]
    assert cfg.jobs["a"].settings.timeout == timedelta(minutes=5)
    assert "x-common" not in cfg.config.model_dump()
    # Only at the top level, and only `x-`: elsewhere a typo is still caught.
    assert one("xcommon: 1\njobs:\n  a: {every: 1m, command: x}\n").startswith(
        "s.yaml:1:1: xcommon: unknown field"
    )
    assert "x-extra: unknown field" in one("jobs:\n  a: {every: 1m, command: x, x-extra: 1}\n")
    assert schema_json.json_schema()["patternProperties"] == {"^x-": {}}


def test_the_empty_file_message_names_no_file_a_wheel_lacks() -> None:
    message = one("")
    assert "schedules.example.yaml" not in message
    assert "`jobs: {hello: {every: 1m, command: echo hello}}`" in message
    loader.loads("jobs: {hello: {every: 1m, command: echo hello}}\n")  # the example loads


def test_a_duplicated_jobs_own_mistakes_are_reported_in_the_same_pass() -> None:
    found = [
        str(p)
        for p in problems(
            "defaults: {timeout: 1h}\n"
            "jobs:\n"
            "  a: {every: 1m, command: x}\n"
            "  a:\n"
            "    every: 15 mins\n"
            "    comand: y\n"
            "    env: {K: [secret]}\n"
        )
    ]
    assert found == [
        's.yaml:4:3: jobs.a: duplicate key "a" (first defined at line 3); YAML would '
        "silently keep only the last one: remove or rename one",
        's.yaml:5:12: jobs.a.every: "15 mins" is not a duration (try 15m)',
        's.yaml:6:5: jobs.a.comand: unknown field (did you mean "command"?)',
        "s.yaml:7:14: jobs.a.env.K: a list is not a string (env values are text; numbers "
        "are turned into text); the value is not shown, it may be a secret",
    ]


def test_a_valid_duplicate_adds_only_the_duplicate_problem() -> None:
    assert one("jobs:\n  a: {every: 1m, command: x}\n  a: {every: 2m, command: y}\n").endswith(
        "remove or rename one"
    )


def test_a_loaded_job_keeps_its_name_through_copies_and_pickles() -> None:
    """The name used to be set on the pydantic model after validation, and a
    model_copy(), deepcopy or pickle lost it (the copy's jitter offset changed, yet it
    compared equal). A loaded job holds it as a plain field."""
    import copy  # noqa: PLC0415
    import pickle  # noqa: PLC0415

    job = loader.loads("jobs:\n  backup: {every: 1h, jitter: 10m, command: x}\n").jobs["backup"]
    for other in (copy.copy(job), copy.deepcopy(job), pickle.loads(pickle.dumps(job))):
        assert other == job
        assert other.name == "backup"
        assert other.make_timing().next_after(datetime(2026, 1, 1, tzinfo=UTC)) == (
            job.make_timing().next_after(datetime(2026, 1, 1, tzinfo=UTC))
        )
    renamed = loaded.LoadedJob("other", job.settings, job.cron_expr)
    assert renamed != job  # same settings, another name: another job
    assert "name" not in model.Job.model_fields


@pytest.mark.parametrize(
    ("job", "path"),
    [
        pytest.param('command: "echo \\0"', "jobs.j.command", id="command"),
        pytest.param('command: [x, "a\\0"]', "jobs.j.command", id="argv"),
        pytest.param('command: x, workdir: "/t\\0"', "jobs.j.workdir", id="workdir"),
        pytest.param('command: x, user: "a\\0"', "jobs.j.user", id="user"),
        pytest.param('command: x, env: {"A=B": "1"}', "jobs.j.env", id="env_name_equals"),
        pytest.param('command: x, env: {"": "1"}', "jobs.j.env", id="env_name_empty"),
        pytest.param('command: x, env: {K: "se\\0cret"}', "jobs.j.env", id="env_value_nul"),
    ],
)
def test_what_no_program_can_be_given_is_refused_at_validation(job: str, path: str) -> None:
    message = one(f"jobs:\n  j: {{every: 1m, {job}}}\n")
    assert f" {path}: " in message
    assert "secret" not in message or "se\\x00cret" not in message


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            "jobs:\n  j: {every: 1m, command: x}\n"
            "  j: {every: 1m, command: x, env: {PASS: !!int hunter2}}\n",
            id="in_a_duplicated_job",
        ),
        pytest.param(
            "x-pw: &pw hunter2\njobs:\n  j: {every: 1m, command: x, env: {<<: *pw}}\n",
            id="merged_into_env",
        ),
    ],
)
def test_an_env_value_is_never_shown_wherever_the_mistake_is(text: str) -> None:
    found = problems(text)
    assert found
    assert all("hunter2" not in str(p) for p in found)


def test_max_running_is_read_for_the_job_and_the_daemon() -> None:
    cfg = loader.loads(
        "daemon: {max_running: 8}\n"
        "jobs:\n  a: {every: 1h, overlap: allow, max_running: 3, command: x}\n"
        "  b: {every: 1h, command: x}\n"
    )
    assert cfg.config.daemon.max_running == 8
    assert (cfg.jobs["a"].settings.max_running, cfg.jobs["b"].settings.max_running) == (3, None)


def test_a_default_max_running_goes_to_the_overlap_allow_jobs_only() -> None:
    cfg = loader.loads(
        "defaults: {max_running: 2}\n"
        "jobs:\n  a: {every: 1h, overlap: allow, command: x}\n"
        "  s: {every: 1h, command: x}\n"
        "  r: {every: 1h, overlap: replace, command: x}\n"
        "  own: {every: 1h, overlap: allow, max_running: 5, command: x}\n"
    )
    limits = {name: job.settings.max_running for name, job in cfg.jobs.items()}
    assert limits == {"a": 2, "s": None, "r": None, "own": 5}
