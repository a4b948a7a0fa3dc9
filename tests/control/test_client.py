"""`crond ps`, `trigger`, `kill`, `pause` and `resume` against a real control server
(crond.control.server on a Unix socket, its own asyncio loop in a thread) with a test
handler that answers what each test tells it to and records what it was asked. The
commands run through click's runner, and as real processes where the process matters
(another user, exit statuses, the two output streams)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from crond.cli import main
from crond.control import protocol, server
from crond.control.callers import Caller
from crond.control.server import Send
from tests.control.test_server import capturing, nobody_python

CROND = str(Path(sys.executable).parent / "crond")
Answer = Callable[[dict[str, Any], Send], Any]


@dataclass
class Handler:
    """Answers each command with `answers[cmd]`: a result dict, a ControlError, or an
    async function of (args, send)."""

    answers: dict[str, Any] = field(default_factory=dict)
    asked: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def handle(
        self, cmd: str, args: dict[str, Any], caller: Caller, send: Send
    ) -> dict[str, Any]:
        self.asked.append((cmd, args))
        answer = self.answers[cmd]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return protocol.ok(await answer(args, send))
        return protocol.ok(answer)


class Daemon:
    """A control server on its own loop, in a thread, until `stop`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handler = Handler()
        self.ready = threading.Event()
        self.failed: list[BaseException] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        try:
            control = await server.serve(self.path, self.handler, log=capturing()[0])
        except BaseException as exc:
            self.failed.append(exc)
            self.ready.set()
            raise
        self.ready.set()
        await self._stop.wait()
        await control.aclose()

    def start(self) -> None:
        self._thread.start()
        assert self.ready.wait(10)
        assert not self.failed

    def stop(self) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "run" / "crond.sock"


@pytest.fixture
def daemon(sock: Path) -> Iterator[Daemon]:
    d = Daemon(sock)
    d.start()
    yield d
    d.stop()


@pytest.fixture
def file(tmp_path: Path, sock: Path) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(
        f"daemon:\n  control_socket: {sock}\njobs:\n  backup:\n    every: 1h\n    command: 'true'\n"
    )
    return path


def crond(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


RUN = {
    "job": "backup",
    "run_id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
    "attempt": 1,
    "pid": 4242,
    "slot": "2026-03-08T07:00:00Z",
    "started": "2026-03-08T07:00:00.001234Z",
    "elapsed": 75.25,
}


# --- finding the daemon ----------------------------------------------------------------


def test_no_daemon_exits_2_with_the_path(file: Path, sock: Path) -> None:
    result = crond("ps", file)
    assert result.exit_code == 2
    assert result.stderr == f"crond: no crond is running for {file} (no socket at {sock})\n"


def test_the_socket_is_found_from_state_dir_and_socket_flags(
    tmp_path: Path, daemon: Daemon
) -> None:
    daemon.handler.answers["ps"] = {"runs": []}
    plain = tmp_path / "plain.yaml"
    plain.write_text("jobs:\n  backup:\n    every: 1h\n    command: 'true'\n")
    result = crond("ps", plain, "--state-dir", daemon.path.parent)
    assert result.exit_code == 0, result.output
    assert result.stderr == "nothing running\n"
    result = crond("ps", plain, "--socket", daemon.path)
    assert result.exit_code == 0, result.output
    assert len(daemon.handler.asked) == 2
    nowhere = tmp_path / "nowhere"
    result = crond("ps", plain, "--state-dir", nowhere)
    assert result.exit_code == 2
    assert f"(no socket at {nowhere / 'crond.sock'})" in result.stderr
    result = crond("ps", plain)  # a daemon started with --state-dir, asked without
    assert result.exit_code == 2
    default = Path(os.environ["STATE_DIRECTORY"]) / "crond.sock"
    assert result.stderr == (
        f"crond: no crond is running for {plain} (no socket at {default}; if it was started "
        "with --state-dir, give the same --state-dir, or --socket)\n"
    )


def test_a_file_that_turns_the_socket_off(tmp_path: Path) -> None:
    off = tmp_path / "off.yaml"
    off.write_text("daemon:\n  control_socket: none\njobs: {}\n")
    result = crond("ps", off)
    assert result.exit_code == 2
    assert "turns the control socket off" in result.stderr


def test_a_missing_file(tmp_path: Path) -> None:
    result = crond("ps", tmp_path / "gone.yaml")
    assert result.exit_code == 1
    assert "no such file" in result.stderr


# --- ps --------------------------------------------------------------------------------


def test_ps_table_and_json(file: Path, daemon: Daemon) -> None:
    daemon.handler.answers["ps"] = {"runs": [RUN, {**RUN, "job": "report", "pid": None}]}
    result = crond("ps", file)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "JOB     RUN_ID                                ATTEMPT  PID   SLOT                  "
        "STARTED               ELAPSED",
        "backup  0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b  1        4242  2026-03-08T07:00:00Z  "
        "2026-03-08T07:00:00Z  1m15s",
        "report  0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b  1        -     2026-03-08T07:00:00Z  "
        "2026-03-08T07:00:00Z  1m15s",
    ]
    result = crond("ps", file, "--json")
    assert result.exit_code == 0
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        RUN,
        {**RUN, "job": "report", "pid": None},
    ]
    assert daemon.handler.asked == [("ps", {}), ("ps", {})]


def test_ps_says_the_daemons_pid_and_replica_first(file: Path, daemon: Daemon) -> None:
    daemon.handler.answers["ps"] = {"runs": [RUN], "pid": 31337, "replica": "r1"}
    result = crond("ps", file)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "daemon pid 31337, replica r1"
    assert result.stdout.splitlines()[1].startswith("JOB ")
    result = crond("ps", file, "--json")
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {**RUN, "daemon_pid": 31337}
    ]


def test_reload_prints_the_counts_or_the_errors(file: Path, daemon: Daemon) -> None:
    daemon.handler.answers["reload"] = {
        "reloaded": True, "jobs": 1, "added": [], "removed": ["old"], "changed": []
    }  # fmt: skip
    result = crond("reload", file)
    assert (result.exit_code, result.stdout) == (
        0,
        "reloaded: 1 job (0 added; 1 removed: old; 0 changed)\n",
    )
    daemon.handler.answers["reload"] = {
        "reloaded": False, "jobs": 3, "errors": ["s.yaml:2:5: jobs.a.cron: bad"]
    }  # fmt: skip
    result = crond("reload", file)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "s.yaml:2:5: jobs.a.cron: bad",
        f"crond: {file} was not reloaded (errors above); the daemon keeps the 3 jobs it had",
    ]


# --- trigger ---------------------------------------------------------------------------


def test_trigger_prints_the_run_id(file: Path, daemon: Daemon) -> None:
    daemon.handler.answers["trigger"] = {"run_id": RUN["run_id"]}
    result = crond("trigger", file, "backup")
    assert result.exit_code == 0
    assert result.stdout == f"{RUN['run_id']}\n"
    assert daemon.handler.asked == [("trigger", {"job": "backup", "wait": False})]


def test_trigger_refused_and_unknown_exit_1_with_the_daemons_words(
    file: Path, daemon: Daemon
) -> None:
    daemon.handler.answers["trigger"] = protocol.ControlError(
        "not_found", 'no job named "bakup" (did you mean "backup"?)'
    )
    result = crond("trigger", file, "bakup")
    assert result.exit_code == 1
    assert result.stderr == 'crond: no job named "bakup" (did you mean "backup"?)\n'
    daemon.handler.answers["trigger"] = protocol.ControlError(
        "refused", "backup is paused until 2026-03-08T09:00:00Z"
    )
    result = crond("trigger", file, "backup")
    assert result.exit_code == 1
    assert result.stderr == "crond: backup is paused until 2026-03-08T09:00:00Z\n"
    daemon.handler.answers["trigger"] = protocol.ControlError("forbidden", "uid 7 may not")
    assert crond("trigger", file, "backup").exit_code == 2


def waiting_run(lines: list[tuple[str, str]], end: dict[str, Any]) -> Answer:
    async def run(_args: dict[str, Any], send: Send) -> dict[str, Any]:
        for name, line in lines:
            await send(protocol.stream(name, line))
        return {"run_id": RUN["run_id"], **end}

    return run


@pytest.mark.parametrize(
    ("end", "status", "said"),
    [
        ({"outcome": "success", "exit_code": 0}, 0, "success (exit 0)"),
        ({"outcome": "failed", "exit_code": 3}, 3, "failed (exit 3)"),
        ({"outcome": "killed", "exit_code": -9}, 137, "killed (signal 9)"),
        ({"outcome": "timeout", "exit_code": -15}, 143, "timeout (signal 15)"),
        ({"outcome": "killed", "exit_code": None}, 1, "killed"),
        ({"outcome": "timeout", "exit_code": 0}, 1, "timeout (exit 0)"),
    ],
)
def test_trigger_wait_streams_and_exits_with_the_runs_status(
    file: Path, daemon: Daemon, end: dict[str, Any], status: int, said: str
) -> None:
    lines = [("stdout", "one"), ("stderr", "oops"), ("stdout", "two ✓")]
    daemon.handler.answers["trigger"] = waiting_run(lines, end)
    result = crond("trigger", file, "backup", "--wait")
    assert result.exit_code == status
    assert result.stdout == "one\ntwo ✓\n"
    assert result.stderr == f"oops\ncrond: backup run {RUN['run_id']}: {said}\n"
    assert daemon.handler.asked == [("trigger", {"job": "backup", "wait": True})]


def test_trigger_wait_as_a_process(file: Path, daemon: Daemon) -> None:
    lines = [("stdout", f"out {i}") for i in range(500)] + [("stderr", "err")]
    daemon.handler.answers["trigger"] = waiting_run(lines, {"outcome": "failed", "exit_code": 7})
    done = subprocess.run(
        [CROND, "trigger", str(file), "backup", "--wait"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 7
    assert done.stdout.splitlines() == [f"out {i}" for i in range(500)]
    assert done.stderr.splitlines() == [
        "err",
        f"crond: backup run {RUN['run_id']}: failed (exit 7)",
    ]


# --- kill ------------------------------------------------------------------------------


def test_kill(file: Path, daemon: Daemon) -> None:
    stopped = [{"job": "backup", "run_id": RUN["run_id"], "pid": 4242}]
    daemon.handler.answers["kill"] = {"stopped": stopped}
    result = crond("kill", file, "backup")
    assert result.exit_code == 0
    assert result.stdout == f"stopped backup run {RUN['run_id']} (pid 4242)\n"
    daemon.handler.answers["kill"] = {"stopped": []}
    result = crond("kill", file, str(RUN["run_id"]))
    assert result.exit_code == 1
    assert result.stderr == f"crond: nothing running for {RUN['run_id']}\n"
    assert daemon.handler.asked == [
        ("kill", {"target": "backup"}),
        ("kill", {"target": RUN["run_id"]}),
    ]


# --- pause and resume ------------------------------------------------------------------


def test_pause_for_until_and_note(file: Path, daemon: Daemon) -> None:
    daemon.handler.answers["pause"] = {
        "jobs": ["backup"],
        "until": "2030-01-01T00:00:00Z",
        "stored": True,
    }
    before = datetime.now(UTC)
    result = crond("pause", file, "backup", "--for", "1h30m", "--note", "disk swap")
    after = datetime.now(UTC)
    assert result.exit_code == 0, result.output
    assert result.stdout == "paused backup until 2030-01-01T00:00:00Z\n"
    ((cmd, args),) = daemon.handler.asked
    assert cmd == "pause"
    assert args["jobs"] == ["backup"]
    assert args["note"] == "disk swap"
    until = datetime.fromisoformat(args["until"])
    assert before + timedelta(minutes=90) <= until <= after + timedelta(minutes=90)
    result = crond("pause", file, "--all", "--until", "2030-01-01T01:00:00+01:00")
    assert result.exit_code == 0
    assert daemon.handler.asked[-1] == (
        "pause",
        {"all": True, "until": "2030-01-01T00:00:00Z", "note": None},
    )


def test_pause_without_a_store_says_until_the_daemon_stops(file: Path, daemon: Daemon) -> None:
    daemon.handler.answers["pause"] = {"jobs": ["a", "b"], "until": None, "stored": False}
    result = crond("pause", file, "a", "b")
    assert result.exit_code == 0
    assert result.stdout == (
        "paused a, b until resumed; the daemon has no state store: the pause lasts until it stops\n"
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "name the jobs, or give --all"),
        (["backup", "--all"], "name the jobs, or give --all"),
        (["backup", "--for", "1h", "--until", "2030-01-01T00:00:00Z"], "not both"),
        (["backup", "--for", "soon"], "not a duration"),
        (["backup", "--until", "2030-01-01T00:00:00"], "has no offset"),
        (["backup", "--until", "2001-01-01T00:00:00Z"], "--until 2001-01-01T00:00:00Z has passed"),
        (["backup", "--note", "x" * 2000], "at most 500 characters"),
    ],
)
def test_pause_usage_errors(file: Path, daemon: Daemon, args: list[str], said: str) -> None:
    result = crond("pause", file, *args)
    assert result.exit_code == 2
    assert said in result.stderr
    assert daemon.handler.asked == []


def test_resume(file: Path, daemon: Daemon) -> None:
    daemon.handler.answers["resume"] = {
        "resumed": [{"job": "backup", "skipped": 3}, {"job": "report", "skipped": 1}]
    }
    result = crond("resume", file, "--all")
    assert result.exit_code == 0
    assert result.stdout == (
        "resumed backup (3 slots skipped while paused)\n"
        "resumed report (1 slot skipped while paused)\n"
    )
    assert daemon.handler.asked == [("resume", {"all": True})]
    assert crond("resume", file).exit_code == 2


# --- another user ----------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to be another user)")
def test_another_user_is_told_who_may() -> None:
    python, env = nobody_python()
    with tempfile.TemporaryDirectory(prefix="crond-control-") as name:
        directory = Path(name)
        directory.chmod(0o755)
        sock = directory / "crond.sock"
        schedules = directory / "schedules.yaml"
        schedules.write_text(f"daemon:\n  control_socket: {sock}\njobs: {{}}\n")
        d = Daemon(sock)
        d.start()
        try:
            done = subprocess.run(
                [*python, "-m", "crond", "ps", str(schedules)],
                env=env,
                user=65534,
                group=65534,
                extra_groups=[],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        finally:
            d.stop()
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"crond: permission denied connecting to {sock}: only root may steer this crond; to "
        "let a group in, see docs/control.md 'Letting operators use it'\n"
    )


def test_the_refusal_while_the_database_is_away_reads_as_the_docs_quote_it() -> None:
    """One wording, in the code and in both pages, naming what every replica has with no
    setting: the event in its log."""
    from crond.daemon.pausing import DATABASE_AWAY  # noqa: PLC0415

    said = "crond: " + DATABASE_AWAY.format(what="pause")
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in ("control.md", "replicas.md"):
        assert said in " ".join((docs / page).read_text().split()), page
    assert "`database.available`" in (docs / "running.md").read_text()
