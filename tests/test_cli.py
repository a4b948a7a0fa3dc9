"""The command line: validate, schema, next and health through click, and the binary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from crond import __version__
from crond.cli import main

ROOT = Path(__file__).resolve().parent.parent
BROKEN = """\
jobs:
  cleanup:
    every: 15 mins
    command: x
  report:
    cron: "0 9 * * *"
    comand: y
"""


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_validate_ok() -> None:
    code, out, _ = invoke("validate", str(ROOT / "schedules.example.yaml"))
    assert code == 0
    assert out.strip() == f"{ROOT / 'schedules.example.yaml'}: 7 jobs OK"


def test_validate_reports_every_error_on_stderr(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(BROKEN)
    code, out, err = invoke("validate", str(f))
    assert code == 1
    assert out == ""
    assert err.splitlines() == [
        f'{f}:3:12: jobs.cleanup.every: "15 mins" is not a duration (try 15m)',
        f'{f}:7:5: jobs.report.comand: unknown field (did you mean "command"?)',
        f"{f}: 2 errors",
    ]


def test_validate_json(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(BROKEN)
    code, out, _ = invoke("validate", str(f), "--json")
    assert code == 1
    payload = json.loads(out)
    assert payload["ok"] is False
    assert payload["errors"][0] == {
        "file": str(f),
        "line": 3,
        "column": 12,
        "path": "jobs.cleanup.every",
        "message": '"15 mins" is not a duration (try 15m)',
    }
    code, out, _ = invoke("validate", str(ROOT / "schedules.example.yaml"), "--json")
    assert code == 0
    good = json.loads(out)
    assert (good["ok"], good["jobs"], good["errors"]) == (True, 7, [])


def test_validate_warns_about_dst_without_failing(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        "jobs:\n  b:\n    cron: '30 2 * * *'\n    timezone: Europe/Berlin\n    command: x\n"
    )
    code, out, err = invoke("validate", str(f))
    assert code == 0
    assert out.strip().endswith("1 job OK")
    assert f"{f}:3:11: warning: jobs.b.cron: 02:30 does not exist on " in err
    assert "Europe/Berlin" in err


def test_validate_missing_file(tmp_path: Path) -> None:
    code, _, err = invoke("validate", str(tmp_path / "nope.yaml"))
    assert code == 1
    assert "nope.yaml: no such file" in err


def test_schema_is_json_schema() -> None:
    code, out, _ = invoke("schema")
    assert code == 0
    schema = json.loads(out)
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert "jobs" in schema["required"]


def test_next_json_orders_by_instant_then_job(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        "jobs:\n"
        "  b: {cron: '30 2 * * *', timezone: America/New_York, command: x}\n"
        "  a: {every: 6h, command: x}\n"
    )
    code, out, _ = invoke("next", str(f), "-n", "2", "--from", "2026-03-08T00:00:00Z", "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["job"], r["at"]) for r in rows] == [
        ("a", "2026-03-08T06:00:00Z"),
        ("b", "2026-03-08T07:00:00Z"),
        ("a", "2026-03-08T12:00:00Z"),
        ("b", "2026-03-09T06:30:00Z"),
    ]
    assert rows[1]["local"] == "2026-03-08T03:00:00-04:00"
    assert rows[1]["note"]


def test_next_job_filter_and_bad_values(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  a: {every: 1h, command: x}\n  b: {every: 1h, command: y}\n")
    code, out, _ = invoke("next", str(f), "--job", "b", "-n", "1", "--json")
    assert code == 0
    assert [json.loads(line)["job"] for line in out.splitlines()] == ["b"]
    code, _, err = invoke("next", str(f), "--job", "nope")
    assert code == 2
    assert "no job named nope" in err
    code, _, err = invoke("next", str(f), "--from", "2026-03-08T00:00:00")
    assert code == 2
    assert "has no offset" in err


def test_health_fresh_and_stale(tmp_path: Path) -> None:
    live = tmp_path / "l.json"
    live.write_text(
        json.dumps(
            {
                "pid": 1,
                "updated_at": "2020-01-01T00:00:00Z",
                "jobs": 1,
                "running": 0,
                "next_fire": None,
                "heartbeat_s": 10,
            }
        )
    )
    code, _, err = invoke("health", "--liveness-file", str(live))
    assert code == 1
    assert "stale" in err


def test_installed_binary_and_module_entry_point(tmp_path: Path) -> None:
    crond = Path(sys.executable).parent / "crond"
    f = tmp_path / "s.yaml"
    f.write_text(BROKEN)
    result = subprocess.run(
        [str(crond), "validate", str(f)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert "try 15m" in result.stderr
    assert "Traceback" not in result.stderr
    version = subprocess.run(
        [sys.executable, "-m", "crond", "--version"], capture_output=True, text=True, check=False
    )
    assert version.stdout.strip() == f"crond, version {__version__}"


@pytest.mark.skipif(os.geteuid() != 0, reason="the ownership rule applies to root only")
def test_validate_as_root_refuses_a_file_others_can_write(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  a: {every: 1m, command: x}\n")
    f.chmod(0o666)
    code, _, err = invoke("validate", str(f))
    assert code == 1
    assert f"{f}: writable by its group and others (mode 0666)" in err
    assert "chmod go-w" in err
    code, _, _ = invoke("next", str(f), "-n", "1")
    assert code == 0  # a preview is not a deployment


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_directory_or_missing_file_is_a_located_error_not_a_usage_error(
    tmp_path: Path, as_json: bool
) -> None:
    for path, message in (
        (tmp_path, "is a directory, not a file"),
        (tmp_path / "no.yaml", "no such file"),
    ):
        code, out, err = invoke("validate", str(path), *(["--json"] if as_json else []))
        assert code == 1
        if as_json:
            assert json.loads(out)["errors"] == [
                {"file": str(path), "line": 0, "column": 0, "path": "", "message": message}
            ]
        else:
            assert err.splitlines()[0] == f"{path}: {message}"
        assert "Usage:" not in err


def test_validate_and_next_read_standard_input() -> None:
    result = CliRunner().invoke(
        main, ["validate", "-"], input="jobs:\n  a: {every: 1m, command: x}\n"
    )
    assert result.exit_code == 0
    assert result.stdout.strip() == "<stdin>: 1 job OK"
    result = CliRunner().invoke(
        main, ["validate", "-"], input="jobs:\n  a: {every: 15 mins, command: x}\n"
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("<stdin>:2:")
    assert result.stderr.splitlines()[-1] == "<stdin>: 1 error"
    result = CliRunner().invoke(
        main,
        ["next", "-", "-n", "1", "--json", "--from", "2026-01-01T00:00:00Z"],
        input="jobs:\n  a: {every: 1h, command: x}\n",
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["at"] == "2026-01-01T01:00:00Z"


@pytest.mark.parametrize("value", ["2026-03-08", "2026-03-08T10:00", "2026-03-08 10:00:30"])
def test_next_from_without_offset_suggests_a_value_that_parses(tmp_path: Path, value: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  a: {every: 1h, command: x}\n")
    code, _, err = invoke("next", str(f), "--from", value)
    assert code == 2
    suggested = err.split("(e.g. ")[1].split(")")[0]
    code, _, _ = invoke("next", str(f), "-n", "1", "--from", suggested)
    assert code == 0, suggested


@pytest.mark.parametrize("value", ["0s", "50ms", "99ms"])
def test_run_refuses_a_heartbeat_the_file_would_refuse(tmp_path: Path, value: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  a: {every: 1h, command: x}\n")
    code, _, err = invoke("run", str(f), "--heartbeat", value, "--state-dir", "none")
    assert code == 2
    assert "a heartbeat is at least 100ms" in err


def test_history_of_a_broken_file_still_shows_the_store(tmp_path: Path) -> None:
    from crond.store import sqlite as state  # noqa: PLC0415

    directory = tmp_path / "state"
    store = state.SqliteStore(directory)
    store.close()
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  a: {every: 1h, command: x, comand: y}\n")
    code, _, err = invoke("history", str(f), "--state-dir", str(directory))
    assert code == 1
    assert "jobs.a.comand: unknown field" in err
    assert f"crond: {f} has errors (above); its history follows" in err
    assert "no attempts recorded yet" in err
    code, _, err = invoke("history", str(f), "--state-dir", str(tmp_path / "none"))
    assert code == 1
    assert "jobs.a.comand: unknown field" in err


def test_a_file_with_more_problems_than_shown_says_so(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n" + "".join(f"  j{i}: {{every: x, command: y}}\n" for i in range(1200)))
    code, _, err = invoke("validate", str(f))
    assert code == 1
    lines = err.splitlines()
    assert lines[-1] == f"{f}: more than 1,000 errors"
    assert "more problems from here on, not shown" in lines[-2]


def test_only_validate_and_next_read_standard_input(tmp_path: Path) -> None:
    """`crond run -` would run jobs as root from a pipe, past the ownership rule: `-` is a
    file name there (and none exists), as `./-` is everywhere."""
    text = "jobs:\n  a: {every: 1m, command: x}\n"
    for args in (["run", "-", "--state-dir", "none"], ["run-job", "-", "a"], ["history", "-"]):
        result = CliRunner().invoke(main, args, input=text)
        assert result.exit_code == 1, args
        assert "-: no such file" in result.stderr, args
    result = CliRunner().invoke(main, ["validate", "./-"], input=text)
    assert result.exit_code == 1
    assert "no such file" in result.stderr


def test_next_shows_h_resolved_and_validate_warns_of_or(tmp_path: Path) -> None:
    """docs/schedules.md, "Richer cron fields": `crond next` says what H became; validate
    warns when R2's "or" stands beside an L, W or # form."""
    f = tmp_path / "s.yaml"
    f.write_text(
        "jobs:\n"
        "  nightly: {cron: 'H 2 * * *', command: x}\n"
        "  board: {cron: '0 9 L * mon', command: x}\n"
    )
    code, out, _ = invoke("next", str(f), "-n", "1", "--from", "2026-01-01T00:00:00Z")
    assert code == 0
    assert out.splitlines()[1].split()[:2] == ["nightly", "UTC"]
    assert "2026-01-01T02:07:00Z" in out.splitlines()[1]
    assert out.splitlines()[-1] == (
        'nightly: "H 2 * * *" runs as "7 2 * * *" (H is picked by the job\'s name)'
    )
    code, out, _ = invoke("next", str(f), "-n", "1", "--from", "2026-01-01T00:00:00Z", "--json")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0]["at"] == "2026-01-01T02:07:00Z"
    assert {"job": "nightly", "cron": "H 2 * * *", "runs_as": "7 2 * * *"} in lines
    assert not any(line.get("job") == "board" and "runs_as" in line for line in lines)
    code, out, err = invoke("validate", str(f))
    assert code == 0
    assert err.startswith(f"{f}:3:17: warning: jobs.board.cron: OR: this also fires on every day")
    assert out.strip() == f"{f}: 2 jobs OK"
