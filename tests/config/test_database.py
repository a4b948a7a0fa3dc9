"""The schedules file's replica settings (docs/replicas.md): `daemon.database` checked as
libpq reads it, and never shown but as `show_url` shows a URL; the cluster's and the
replica's names; `replica_timeout` against the heartbeat; the warnings for settings that
change nothing without a database; and psycopg, an optional extra, imported only for a
file with a database, its absence a located error (`crond validate` and `crond run` in
real processes, with an import of psycopg that fails)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from crond.config import database, loader
from crond.config.model import Replicas
from crond.config.problems import ConfigError, Problem
from tests.e2e.harness import Crond

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hunter2-S3CRET"  # a password: must never reach a message
JOB = "jobs:\n  a: {every: 1m, command: x}\n"
NAME_RULE = "1 to 200 printable characters, without /"
UNUSED = (
    "applies with daemon.database only (or CROND_DATABASE_URL in crond's environment): "
    "without a database there is one daemon, and it changes nothing"
)
MISSING = (
    "a database needs the optional PostgreSQL driver, psycopg: pip install "
    "'crond[postgres]' (or remove database: one daemon on its own keeps its state in its "
    "state directory)"
)


def daemon(body: str, jobs: str = JOB) -> str:
    return "daemon:\n" + textwrap.indent(textwrap.dedent(body), "  ") + jobs


def problems(text: str, environ: dict[str, str] | None = None) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        loader.loads(text, "s.yaml", environ=environ or {})
    return info.value.problems


def one(text: str, environ: dict[str, str] | None = None) -> str:
    found = problems(text, environ)
    assert len(found) == 1, [str(p) for p in found]
    return str(found[0])


# --- database ------------------------------------------------------------------------

GOOD_DATABASES = [
    "postgresql://crond@db.internal/crond",
    "postgres://db.internal:5433/crond?sslmode=require&application_name=crond",
    "postgresql://crond@[::1]/crond?sslmode=verify-full&target_session_attrs=read-write",
    "postgresql://crond:@db1:5432,db2/crond?connect_timeout=10",  # an empty password
    "postgresql:///crond?host=/run/postgresql",
    "host=db.internal dbname=crond user=crond port=5432,5433 sslmode=verify-ca",
    "host=a,b port=,6432 target_session_attrs=prefer-standby connect_timeout=' 5'",
]
WITH_PASSWORD = [
    f"postgresql://crond:{SECRET}@[::1]/crond",
    f"host = db.internal  password = '{SECRET} with spaces'",
]
PASSWORD_WARNING = (
    "s.yaml:2:13: daemon.database: the connection string holds a password, which belongs "
    "outside the schedules file: put it in ~/.pgpass of the user crond runs as (mode 0600), "
    'or PGPASSWORD in the unit\'s environment (docs/replicas.md, "Deploying")'
)


@pytest.mark.parametrize("url", GOOD_DATABASES + WITH_PASSWORD)
def test_a_libpq_url_or_key_value_string_is_taken_as_written(url: str) -> None:
    text = daemon(f"database: {json.dumps(url)}\n")
    for strict in (False, True):  # validate; run
        cfg = loader.loads(text, "s.yaml", environ={}, strict=strict)
        assert cfg.daemon.database == url
        warned = [] if url in GOOD_DATABASES else [PASSWORD_WARNING]
        assert [str(w) for w in cfg.env_warnings] == warned
        assert all(SECRET not in str(w) for w in cfg.env_warnings)


# (id, database as written in YAML, the one line crond must print, exactly). Each holds
# the password somewhere; no line may show it.
BAD_DATABASES = [
    (
        "other_scheme",
        f'"mysql://crond:{SECRET}@db.internal/crond"',
        "s.yaml:2:13: daemon.database: mysql://db.internal/… is not a PostgreSQL URL: its "
        'scheme is "mysql"; libpq takes postgresql:// and postgres:// (lower case), e.g. '
        "postgresql://crond@db.internal/crond or host=db.internal dbname=crond",
    ),
    (
        "upper_case_scheme",
        f'"POSTGRESQL://crond:{SECRET}@db.internal"',
        "s.yaml:2:13: daemon.database: postgresql://db.internal is not a PostgreSQL URL: "
        'its scheme is "POSTGRESQL"; libpq takes postgresql:// and postgres:// (lower '
        "case), e.g. "
        "postgresql://crond@db.internal/crond or host=db.internal dbname=crond",
    ),
    (
        "unknown_query_parameter",
        f'"postgresql://crond:{SECRET}@db.internal/crond?sslmod=require"',
        "s.yaml:2:13: daemon.database: postgresql://db.internal/… is not a URL libpq can "
        'read: "sslmod" is not a libpq parameter',
    ),
    (
        "bad_percent",
        f'"postgresql://crond:{SECRET}@db.internal/%zz"',
        "s.yaml:2:13: daemon.database: postgresql://db.internal/… is not a URL libpq can "
        "read: a % is not followed by two hex digits (write %25 for %)",
    ),
    (
        "word_without_equals",
        f'"host=db.internal password={SECRET} oops"',
        'daemon.database: the key=value string is not valid: a word without "=" (write '
        "key=value pairs separated by spaces) (the value is not shown, it may hold a "
        "password)",
    ),
    (
        "unterminated_quote",
        f'"host=db.internal password=\'{SECRET}"',
        "s.yaml:2:13: daemon.database: the key=value string is not valid: a quoted value is "
        "not closed (with ') (the value is not shown, it may hold a password)",
    ),
    (
        "unknown_key",
        f'"host=db.internal passwrd={SECRET}"',
        's.yaml:2:13: daemon.database: the key=value string is not valid: "passwrd" is not '
        "a libpq parameter (the value is not shown, it may hold a password)",
    ),
    (
        "neither",
        f'"{SECRET}"',
        "s.yaml:2:13: daemon.database: the connection string is neither a libpq URL nor a "
        "key=value string (the value is not shown, it may hold a password): write one, "
        "e.g. postgresql://crond@db.internal/crond or host=db.internal dbname=crond",
    ),
    (
        "nul_in_key_value",
        f'"host=h password={SECRET}\\0"',
        "s.yaml:2:13: daemon.database: the connection string holds a NUL character (\\0), "
        "which libpq cannot take (the value is not shown, it may hold a password)",
    ),
    (
        "nul_in_url",
        f'"postgresql://u:{SECRET}@h/db\\0"',
        "s.yaml:2:13: daemon.database: postgresql://h/… holds a NUL character (\\0), which "
        "libpq cannot take (the value is not shown, it may hold a password)",
    ),
    (
        "blank",
        '"  "',
        "s.yaml:2:13: daemon.database: must not be empty: give a libpq URL or key=value "
        "string, e.g. postgresql://crond@db.internal/crond or host=db.internal dbname=crond",
    ),
    (
        "too_long",
        f'"host=h password={SECRET * 400}"',
        "s.yaml:2:13: daemon.database: a connection string of 5,616 characters is too long "
        "(at most 4,096) (the value is not shown, it may hold a password)",
    ),
    (
        "sslmode_typo",
        f'"postgresql://crond:{SECRET}@db.internal/crond?sslmode=verify_full"',
        's.yaml:2:13: daemon.database: sslmode "verify_full" is not one of disable, allow, '
        'prefer, require, verify-ca, verify-full (did you mean "verify-full"?)',
    ),
    (
        "sslmode_key_value",
        f'"host=db.internal password={SECRET} sslmode=Require"',
        's.yaml:2:13: daemon.database: sslmode "Require" is not one of disable, allow, '
        'prefer, require, verify-ca, verify-full (did you mean "require"?)',
    ),
    (
        "target_session_attrs",
        f'"postgresql://u:{SECRET}@h/db?target_session_attrs=readwrite"',
        's.yaml:2:13: daemon.database: target_session_attrs "readwrite" is not one of any, '
        'read-write, read-only, primary, standby, prefer-standby (did you mean "read-write"?)',
    ),
    (
        "port_in_url",
        f'"postgresql://u:{SECRET}@db.internal:5432x/crond"',
        's.yaml:2:13: daemon.database: the port "5432x" is not a number from 1 to 65535',
    ),
    (
        "second_port_in_url",
        f'"postgresql://u:{SECRET}@db1:5432,db2:70000/crond"',
        's.yaml:2:13: daemon.database: the port "70000" is not a number from 1 to 65535',
    ),
    (
        "port_key_value",
        f'"host=db.internal password={SECRET} port=abc"',
        's.yaml:2:13: daemon.database: the port "abc" is not a number from 1 to 65535',
    ),
    (
        "port_query",
        f'"postgresql://u:{SECRET}@db.internal/crond?port=0"',
        's.yaml:2:13: daemon.database: the port "0" is not a number from 1 to 65535',
    ),
    (
        "connect_timeout",
        f'"postgresql://u:{SECRET}@db.internal/crond?connect_timeout=10s"',
        's.yaml:2:13: daemon.database: connect_timeout "10s" is not a whole number of '
        "seconds (e.g. connect_timeout=10)",
    ),
    (
        "not_text",
        f"[{SECRET}]",
        "s.yaml:2:13: daemon.database: a list is not text",
    ),
]


@pytest.mark.parametrize(
    ("written", "expected"), [case[1:] for case in BAD_DATABASES], ids=[c[0] for c in BAD_DATABASES]
)
def test_a_bad_database_is_located_and_worded_without_its_password(
    written: str, expected: str
) -> None:
    said = one(daemon(f"database: {written}\n"))
    assert said.endswith(expected)
    assert said.startswith("s.yaml:2:13: daemon.database: ")
    assert SECRET not in said
    assert "hunter2" not in said


def test_libpq_errors_that_quote_the_string_are_never_passed_on() -> None:
    # libpq's own message would be: invalid percent-encoded token: "%zz<the password>"
    for written in (
        f"postgresql://h/db?x=%zz{SECRET}",
        f"postgresql://h/db?{SECRET}",
        f"postgresql://h/db?a={SECRET}={SECRET}",
        f"postgresql://u:p@[{SECRET}/db",
        f"postgresql://{SECRET}:x@[]/db",
        f"host=h password={SECRET}%00 x",
    ):
        said = one(daemon(f"database: {json.dumps(written)}\n"))
        assert SECRET not in said, said
        assert "daemon.database" in said


# --- cluster and replica -------------------------------------------------------------


@pytest.mark.parametrize("field", ["cluster", "replica"])
@pytest.mark.parametrize("name", ["blue", "eu-west-1", "crond@host.example", "a b", "x" * 200, "é"])
def test_a_good_cluster_or_replica_name_is_taken(field: str, name: str) -> None:
    cfg = loader.loads(daemon(f"{field}: {json.dumps(name)}\ndatabase: host=h\n"), environ={})
    assert getattr(cfg.daemon, field) == name


BAD_NAMES = [
    ("empty", '""', "must not be empty (a {field} name is " + NAME_RULE + ")"),
    ("too_long", '"' + "x" * 201 + '"', '"' + "x" * 60 + '..." (201 characters) is 201'),
    ("slash", '"eu/west"', '"eu/west" holds a / (a {field} name is ' + NAME_RULE + ")"),
    ("leading_space", '" blue"', '" blue" starts or ends with a space; remove it'),
    ("trailing_space", '"blue "', '"blue " starts or ends with a space; remove it'),
    ("tab", '"blue\\t"', '"blue\\t" holds a control or other non-printable character'),
    ("control", '"bl\\x01ue"', '"bl\\x01ue" holds a control or other non-printable character'),
    ("nul", '"blue\\0"', '"blue\\x00" holds a NUL character (\\0)'),
    ("not_text", "[blue]", "a list is not text"),
]


@pytest.mark.parametrize("field", ["cluster", "replica"])
@pytest.mark.parametrize(
    ("written", "expected"), [case[1:] for case in BAD_NAMES], ids=[c[0] for c in BAD_NAMES]
)
def test_a_bad_cluster_or_replica_name_is_located_and_worded(
    field: str, written: str, expected: str
) -> None:
    said = one(daemon(f"database: host=h\n{field}: {written}\n"))
    column = len(f"  {field}: ") + 1
    assert said.startswith(f"s.yaml:3:{column}: daemon.{field}: ")
    assert expected.format(field=field) in said


# --- replica_timeout -----------------------------------------------------------------


def test_the_defaults_make_a_replica_timeout_of_three_heartbeats() -> None:
    cfg = loader.loads(daemon("database: host=h\n"), environ={})
    assert cfg.daemon.replica_timeout == 3 * cfg.daemon.heartbeat == timedelta(seconds=30)
    cfg = loader.loads(daemon("database: host=h\nheartbeat: 1s\nreplica_timeout: 3s\n"))
    assert cfg.daemon.replica_timeout == timedelta(seconds=3)


def test_a_replica_timeout_under_a_second_is_refused() -> None:
    said = one(daemon("database: host=h\nheartbeat: 100ms\nreplica_timeout: 500ms\n"))
    assert said == (
        "s.yaml:4:20: daemon.replica_timeout: replica_timeout must be at least 1s (and at "
        "least 3 heartbeats: how long a replica may go silent before the others take it "
        "for dead)"
    )


def test_a_replica_timeout_under_three_heartbeats_is_refused_at_its_value() -> None:
    said = one(daemon("database: host=h\nheartbeat: 20s\nreplica_timeout: 59s\n"))
    assert said == (
        "s.yaml:4:20: daemon.replica_timeout: replica_timeout (59s) must be at least 3 x "
        "heartbeat (20s): a replica is taken for dead after missing 3 heartbeats; set "
        "replica_timeout: 1m or more, or a shorter heartbeat"
    )


def test_a_heartbeat_beyond_the_default_timeout_is_refused_at_the_heartbeat() -> None:
    expected = (
        "s.yaml:3:14: daemon.heartbeat: replica_timeout (30s by default) must be at least "
        "3 x heartbeat (15s): a replica is taken for dead after missing 3 heartbeats; set "
        "replica_timeout: 45s or more, or a shorter heartbeat"
    )
    assert one(daemon("database: host=h\nheartbeat: 15s\n")) == expected
    # The database given by the environment instead: the same.
    environ = {"CROND_DATABASE_URL": "postgresql://h/db"}
    said = one(daemon("liveness_file: /l\nheartbeat: 15s\n"), environ)
    assert said == expected


def test_a_single_daemon_with_a_slow_heartbeat_is_not_told_about_replicas() -> None:
    cfg = loader.loads(daemon("heartbeat: 1m\n"), environ={})
    assert cfg.daemon.heartbeat == timedelta(minutes=1)
    assert cfg.env_warnings == []


# --- warnings: replica settings without a database -----------------------------------

UNUSED_FILE = """\
daemon:
  cluster: blue
  replica: r1
  replica_timeout: 1m
  fencing: stop
defaults:
  replicas: all
jobs:
  a: {every: 1m, command: x, replicas: one}
  b: {every: 1m, command: x}
"""
UNUSED_LINES = [
    f"s.yaml:2:3: daemon.cluster: cluster {UNUSED}",
    f"s.yaml:3:3: daemon.replica: replica {UNUSED}",
    f"s.yaml:4:3: daemon.replica_timeout: replica_timeout {UNUSED}",
    f"s.yaml:5:3: daemon.fencing: fencing {UNUSED}",
    f"s.yaml:7:3: defaults.replicas: replicas {UNUSED}",
    f"s.yaml:9:30: jobs.a.replicas: replicas {UNUSED}",
]


def test_a_fencing_that_is_neither_stop_nor_keep_is_located_with_a_hint() -> None:
    assert one(daemon("database: host=h\nfencing: stpo\n")) == (
        's.yaml:3:12: daemon.fencing: "stpo" is not one of stop, keep (did you mean "stop"?)'
    )


@pytest.mark.parametrize("strict", [False, True])
def test_replica_settings_without_a_database_are_taken_with_warnings(strict: bool) -> None:
    cfg = loader.loads(UNUSED_FILE, "s.yaml", environ={}, strict=strict)
    assert [str(p) for p in cfg.env_warnings] == UNUSED_LINES
    assert cfg.jobs["a"].settings.replicas is Replicas.ONE
    assert cfg.jobs["b"].settings.replicas is Replicas.ALL


@pytest.mark.parametrize(
    ("text", "environ"),
    [
        (UNUSED_FILE.replace("daemon:\n", "daemon:\n  database: host=h\n"), {}),
        (UNUSED_FILE, {"CROND_DATABASE_URL": "postgresql://h/db"}),
        (daemon("liveness_file: /l\n"), {}),
    ],
    ids=["database", "environment", "none_set"],
)
def test_no_warning_with_a_database_or_without_replica_settings(
    text: str, environ: dict[str, str]
) -> None:
    assert loader.loads(text, "s.yaml", environ=environ).env_warnings == []


# --- crond validate and crond run, in real processes ---------------------------------


def crond(*args: str, hide_psycopg: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`crond ARGS` in a child process; with `hide_psycopg`, a directory first on its
    path whose psycopg.py fails to import, as when the extra is not installed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CROND_", "PYTHON"))}
    if hide_psycopg is not None:
        hide_psycopg.mkdir(exist_ok=True)
        (hide_psycopg / "psycopg.py").write_text(
            'raise ImportError("psycopg is hidden by the test")\n'
        )
        env["PYTHONPATH"] = str(hide_psycopg)
    return subprocess.run(
        [sys.executable, "-m", "crond", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=env,
        timeout=60,  # `run` that did not refuse the file would run on: fail, not hang
    )


def schedules(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(text)
    path.chmod(0o644)
    return path


def test_validate_prints_a_bad_database_located_without_its_password(tmp_path: Path) -> None:
    path = schedules(tmp_path, daemon(f'database: "host=h password={SECRET} oops"\n'))
    done = crond("validate", str(path))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f'{path}:2:13: daemon.database: the key=value string is not valid: a word without "=" '
        "(write key=value pairs separated by spaces) (the value is not shown, it may hold a "
        "password)",
        f"{path}: 1 error",
    ]
    assert SECRET not in done.stdout + done.stderr


def test_validate_prints_the_warnings_and_passes(tmp_path: Path) -> None:
    path = schedules(tmp_path, UNUSED_FILE)
    done = crond("validate", str(path))
    assert done.returncode == 0, done.stderr
    expected = [line.replace("s.yaml", str(path), 1) for line in UNUSED_LINES]
    assert done.stderr.splitlines() == [line.replace(": ", ": warning: ", 1) for line in expected]
    assert done.stdout == f"{path}: 2 jobs OK\n"


def test_validate_checks_libpq_values_and_warns_of_a_password(tmp_path: Path) -> None:
    url = f"postgresql://crond:{SECRET}@db.internal/crond"
    typo = schedules(tmp_path, daemon(f"database: {url}?sslmode=verify_full\n"))
    done = crond("validate", str(typo))
    assert done.returncode == 1
    assert done.stderr.splitlines()[0].startswith(f'{typo}:2:13: daemon.database: sslmode "ver')
    warned = schedules(tmp_path, daemon(f"database: {url}\n"))
    done = crond("validate", str(warned))
    assert done.returncode == 0, done.stderr
    warning = PASSWORD_WARNING.replace("s.yaml", str(warned), 1)
    assert done.stderr.splitlines() == [warning.replace(": ", ": warning: ", 1)]
    assert SECRET not in done.stdout + done.stderr


def test_run_warns_once_of_a_replica_name_given_without_a_database(tmp_path: Path) -> None:
    path = schedules(tmp_path, JOB)
    env = {"CROND_REPLICA": "r8", "CROND_DATABASE_URL": ""}
    daemon = Crond([str(path), "--replica", "r9", "--state-dir", str(tmp_path / "st")], env)
    try:
        daemon.wait_for("daemon.started")
        daemon.signal(signal.SIGHUP)
        daemon.wait_for("config.reloaded")
    finally:
        assert daemon.stop() == 0
    warned = [e for e in daemon.events if e["event"] == "config.warning"]
    assert [(e["level"], e["warning"]) for e in warned] == [
        ("warning", f"--replica {UNUSED}"),
        ("warning", f"CROND_REPLICA {UNUSED}"),
    ]
    assert daemon.names().index("config.warning") < daemon.names().index("daemon.started")


REPLICA = "CROND_REPLICA"


@pytest.mark.parametrize(
    ("written", "flag", "environ", "said"),
    [
        (None, "r9", {}, ["--replica"]),
        (None, None, {"CROND_REPLICA": "r8"}, [REPLICA]),
        (None, "r9", {"CROND_REPLICA": "r8", "CROND_DATABASE_URL": ""}, ["--replica", REPLICA]),
        ("host=h", "r9", {"CROND_REPLICA": "r8"}, []),
        (None, "r9", {"CROND_DATABASE_URL": "host=h"}, []),
        (None, None, {"CROND_REPLICA": ""}, []),
    ],
)  # fmt: skip
def test_a_replica_name_given_outside_the_file_is_unused_without_a_database(
    written: object, flag: str | None, environ: dict[str, str], said: list[str]
) -> None:
    found = database.replica_given_unused(written, flag, environ)
    assert found == [f"{where} {UNUSED}" for where in said]


def test_the_files_database_is_read_without_a_load(tmp_path: Path) -> None:
    path = schedules(tmp_path, daemon("database: host=h\n"))
    assert database.written_database(path) == "host=h"
    assert database.written_database(schedules(tmp_path, JOB)) is None
    assert database.written_database(tmp_path / "missing.yaml") is ...


@pytest.mark.parametrize("command", [["validate"], ["run", "--state-dir", "none"]])
def test_without_psycopg_a_database_is_a_located_error_saying_what_to_install(
    tmp_path: Path, command: list[str]
) -> None:
    path = schedules(tmp_path, daemon(f'database: "postgresql://crond:{SECRET}@db/crond"\n'))
    done = crond(command[0], str(path), *command[1:], hide_psycopg=tmp_path / "hidden")
    assert done.returncode == 1
    assert f"{path}:2:13: daemon.database: {MISSING}" in done.stderr.splitlines()
    assert SECRET not in done.stdout + done.stderr


def test_without_psycopg_a_file_without_a_database_validates(tmp_path: Path) -> None:
    path = schedules(tmp_path, daemon("cluster: blue\n"))
    done = crond("validate", str(path), hide_psycopg=tmp_path / "hidden")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{path}: 1 job OK\n"


@pytest.mark.parametrize("with_database", [False, True])
def test_psycopg_is_imported_only_for_a_file_with_a_database(with_database: bool) -> None:
    text = daemon("database: host=h\n" if with_database else "cluster: blue\n")
    code = (
        "import sys; from crond.config import loader; "
        f"loader.loads({text!r}, environ={{}}); print('psycopg' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == str(with_database)
