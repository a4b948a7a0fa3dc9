"""The runner with real children that misbehave on purpose.

Every test waits on events (a line logged, a run's end), never on a fixed sleep; the few
timeouts below are the jobs' own `timeout`/`kill_after`, kept short.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
import structlog
import yaml
from structlog.typing import FilteringBoundLogger

from crond.clock import FakeClock, SystemClock
from crond.config.loaded import LoadedJob
from crond.config.loader import loads
from crond.daemon import reaper, runjob
from crond.run import process, procfs, runner
from crond.run.output import LINE_LIMIT, RUN_LIMIT
from crond.run.runner import Outcome, Run, RunResult, RunSpec
from crond.run.watch import Watch

T = TypeVar("T")
SLOT = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
PY = sys.executable
# Waits on events are bounded so a bug fails the test instead of hanging it.
EVENT_WAIT = 20.0

STARTED_KEYS = {"event", "level", "job", "run_id", "slot", "attempt", "pid", "lag_ms"}
FINISHED_KEYS = {"event", "level", "job", "run_id", "attempt", "outcome", "exit_code", "duration_s"}
OUTPUT_KEYS = {"event", "level", "job", "run_id", "stream", "line"}


class Recorder:
    """A structlog logger that keeps every event with its level, and lets a test wait for
    one to appear."""

    def __init__(self, hook: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.hook = hook  # told every event as it is logged
        self._waiters: list[tuple[Callable[[dict[str, Any]], bool], asyncio.Future[None]]] = []
        wrapper = structlog.make_filtering_bound_logger(logging.NOTSET)
        self.log = cast(
            FilteringBoundLogger,
            structlog.wrap_logger(self, processors=[], wrapper_class=wrapper),
        )

    def _record(self, level: str, event: dict[str, Any]) -> None:
        self.events.append({"level": level, **event})
        if self.hook is not None:
            self.hook(self.events[-1])
        for match, future in self._waiters:
            if not future.done() and match(self.events[-1]):
                future.set_result(None)

    def info(self, **event: Any) -> None:
        self._record("info", event)

    def warning(self, **event: Any) -> None:
        self._record("warning", event)

    def error(self, **event: Any) -> None:
        self._record("error", event)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == name]

    def lines(self, stream: str = "stdout") -> list[str]:
        return [e["line"] for e in self.named("job.output") if e["stream"] == stream]

    async def wait_line(self, text: str) -> None:
        await self.wait_for(lambda e: e["event"] == "job.output" and e["line"] == text)

    async def wait_for(self, match: Callable[[dict[str, Any]], bool]) -> None:
        if any(match(e) for e in self.events):
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((match, future))
        await asyncio.wait_for(future, EVENT_WAIT)


def make_job(**fields: Any) -> LoadedJob:
    text = yaml.safe_dump({"jobs": {"t": {"every": "1h", **fields}}})
    return loads(text).jobs["t"]


def spec(base_env: dict[str, str] | None = None, **fields: Any) -> RunSpec:
    return runner.spec_for(make_job(**fields), base_env)


def go(main: Callable[[asyncio.TaskGroup], Coroutine[Any, Any, T]]) -> T:
    """Run `main` with a TaskGroup that owns the runs it starts, as the daemon's loop
    does; bounded, so that a bug fails the test instead of hanging it."""

    async def owner() -> T:
        async with asyncio.timeout(EVENT_WAIT * 2), asyncio.TaskGroup() as tasks:
            return await main(tasks)

    return asyncio.run(owner())


def start(the_spec: RunSpec, rec: Recorder, tasks: asyncio.TaskGroup, **kwargs: Any) -> Run:
    kwargs.setdefault("clock", SystemClock())
    return runner.start_run(the_spec, SLOT, tasks=tasks, log=rec.log, **kwargs)


async def finish(run: Run) -> RunResult:
    return await asyncio.wait_for(run.wait(), EVENT_WAIT)


def run_once(the_spec: RunSpec, **kwargs: Any) -> tuple[RunResult, Recorder]:
    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> RunResult:
        return await finish(start(the_spec, rec, tasks, **kwargs))

    return go(main), rec


def live_members(pgid: int) -> list[int]:
    """Pids of non-zombie processes in group `pgid`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def is_live(pid: int) -> bool:
    """Is `pid` a process that is not a zombie? (Killed orphans wait for init to reap.)"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def wait_exit(pid: int) -> None:
    """Wait until `pid` (any process, not only a child) has exited."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([pidfd], [], [], EVENT_WAIT)
    finally:
        os.close(pidfd)


def zombie(pid: int) -> bool:
    stat = procfs.stat(pid)
    return stat is not None and stat.state == "Z"


def until(condition: Callable[[], bool]) -> None:
    """Wait until `condition` holds (a state the kernel reaches a moment after an event)."""
    deadline = time.monotonic() + EVENT_WAIT
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.001)


def python_job(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


IGNORE_TERM = python_job(
    """
    import signal, time
    signal.signal(signal.SIGTERM, lambda *_: print("got TERM", flush=True))
    print("ready", flush=True)
    while True:
        time.sleep(1)
    """
)


# --- plain runs ------------------------------------------------------------------------


def test_success_logs_started_output_finished_with_their_keys() -> None:
    result, rec = run_once(spec(command="echo hello; echo oops >&2"))
    assert result.outcome is Outcome.SUCCESS
    assert (result.exit_code, result.attempt) == (0, 1)
    started, finished = rec.named("job.started"), rec.named("job.finished")
    assert len(started) == len(finished) == 1
    assert set(started[0]) == STARTED_KEYS
    assert set(finished[0]) == FINISHED_KEYS
    assert all(set(e) == OUTPUT_KEYS for e in rec.named("job.output"))
    assert started[0]["slot"] == "2026-03-08T07:00:00Z"
    assert isinstance(started[0]["pid"], int)
    assert (started[0]["level"], finished[0]["level"]) == ("info", "info")
    assert finished[0]["outcome"] == "success"
    assert rec.lines("stdout") == ["hello"]
    assert rec.lines("stderr") == ["oops"]
    assert [e["event"] for e in rec.events][-1] == "job.finished"


def test_lag_ms_is_clock_now_at_spawn_minus_slot() -> None:
    clock = FakeClock(SLOT + timedelta(seconds=1, microseconds=234_567))
    _, rec = run_once(spec(command="true"), clock=clock)
    assert rec.named("job.started")[0]["lag_ms"] == 1234.6


@pytest.mark.parametrize("workdir", [None, "/"])
def test_the_gate_is_passed_just_before_the_spawn_of_the_first_attempt_only(
    workdir: str | None,
) -> None:
    """The loop hands a run a gate that blocks until the slot: the run is built and its
    pipes made before, the process spawned after; a retry does not wait at it again, and
    the wait is not part of the run's duration."""
    passed: list[float] = []
    passed_mono: list[float] = []
    finished_mono: list[float] = []

    def gate() -> None:
        time.sleep(0.3)
        passed.append(time.time())
        passed_mono.append(time.monotonic())

    def hook(event: dict[str, Any]) -> None:
        if event["event"] == "job.finished":
            finished_mono.append(time.monotonic())

    command = "python3 -c 'import time; print(repr(time.time()))'; exit 1"
    the_spec = spec(command=command, workdir=workdir, retry={"attempts": 1, "delay": "0s"})
    rec = Recorder(hook)

    async def main(tasks: asyncio.TaskGroup) -> RunResult:
        return await finish(start(the_spec, rec, tasks, gate=gate))

    result = go(main)
    assert len(passed) == 1
    starts = [float(line) for line in rec.lines()]
    assert len(starts) == 2  # both attempts ran
    assert starts[0] >= passed[0]  # the job started after the gate, never before
    assert result.attempt == 2
    first = rec.named("job.finished")[0]
    # From the spawn, not from when the run was built: at most the time from the gate's
    # end to the job.finished event, where a duration counted from before the gate would
    # be 0.3 s (its sleep) more. Measured, not a fixed bound: a slow spawn on a busy
    # machine (the suite runs on several workers) does not fail it.
    assert first["duration_s"] < finished_mono[0] - passed_mono[0] + 0.15


def test_nonzero_exit_is_failed_at_level_error() -> None:
    result, rec = run_once(spec(command="exit 3"))
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, 3)
    finished = rec.named("job.finished")[0]
    assert (finished["level"], finished["outcome"], finished["exit_code"]) == ("error", "failed", 3)


def test_shell_string_expands_but_argv_list_does_not() -> None:
    env = {"PATH": os.environ["PATH"], "HOME": "/home/somebody"}
    _, shell = run_once(spec(env, command='echo "$HOME"'))
    _, argv = run_once(spec(env, command=["echo", "$HOME"]))
    assert shell.lines() == ["/home/somebody"]
    assert argv.lines() == ["$HOME"]


def test_argv_program_is_resolved_once_and_keeps_its_argv0() -> None:
    the_spec = spec(command=["cat", "/proc/self/cmdline"])
    assert the_spec.executable is not None
    assert Path(the_spec.executable).is_absolute()
    _, rec = run_once(the_spec)
    assert rec.lines()[0].split("\0")[:2] == ["cat", "/proc/self/cmdline"]


def test_program_not_found_fails_like_a_shell() -> None:
    the_spec = spec(command=["no-such-program-crond-test", "x"])
    assert the_spec.executable is None
    result, rec = run_once(the_spec)
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, 127)
    assert rec.named("job.started")[0]["pid"] is None
    [line] = rec.lines("stderr")
    assert line.startswith("crond: program not found: no-such-program-crond-test")
    assert rec.named("job.finished")[0]["exit_code"] == 127


def test_program_installed_after_the_spec_is_found_at_spawn(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    the_spec = spec({"PATH": str(bindir)}, command=["late-tool"])
    assert the_spec.executable is None
    tool = bindir / "late-tool"
    tool.write_text("#!/bin/sh\necho late\n")
    tool.chmod(0o755)
    result, rec = run_once(the_spec)
    assert result.outcome is Outcome.SUCCESS
    assert rec.lines() == ["late"]


def test_workdir(tmp_path: Path) -> None:
    _, rec = run_once(spec(command="pwd", workdir=str(tmp_path)))
    assert rec.lines() == [str(tmp_path)]


def test_missing_workdir_fails_with_a_clear_message(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone")
    result, rec = run_once(spec(command=["true"], workdir=missing))
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, 126)
    assert rec.lines("stderr") == [
        f"crond: cannot enter workdir {missing}: No such file or directory"
    ]


def test_env_merges_job_env_over_base_and_adds_crond_vars() -> None:
    base = {"PATH": os.environ["PATH"], "A": "base-a", "B": "base-b"}
    the_spec = spec(base, command="env", env={"B": "job-b"})
    assert "CROND_JOB" not in the_spec.env
    result, rec = run_once(the_spec, run_id="run123")
    assert result.outcome is Outcome.SUCCESS
    env = dict(line.split("=", 1) for line in rec.lines())
    assert env["A"] == "base-a"
    assert env["B"] == "job-b"
    assert env["CROND_JOB"] == "t"
    assert env["CROND_RUN_ID"] == "run123"
    assert env["CROND_SLOT"] == "2026-03-08T07:00:00Z"
    assert env["CROND_ATTEMPT"] == "1"
    assert "HOME" not in env  # nothing from the daemon's own environ sneaks in


# Jobs without workdir/user are spawned with posix_spawn, the others with Popen: both
# paths must give a job the same process state.
BOTH_PATHS = pytest.mark.parametrize("workdir", [None, "/"], ids=["posix_spawn", "popen"])


@BOTH_PATHS
def test_sigpipe_is_default_in_the_job(workdir: str | None) -> None:
    # Python ignores SIGPIPE; a job must not inherit that (yes would report EPIPE).
    result, rec = run_once(spec(command="yes | head -n 1", workdir=workdir))
    assert result.outcome is Outcome.SUCCESS
    assert (rec.lines(), rec.lines("stderr")) == (["y"], [])


@BOTH_PATHS
def test_job_gets_only_stdin_stdout_stderr(workdir: str | None) -> None:
    # No pipe, pidfd or file of the daemon leaks into a job (3 is ls's own listing).
    _, rec = run_once(spec(command=["ls", "/proc/self/fd"], workdir=workdir))
    assert rec.lines() == ["0", "1", "2", "3"]


def test_descriptors_the_daemon_inherited_are_not_passed_on() -> None:
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)  # like a descriptor crond's parent left open
    process._seal_inherited_fds.cache_clear()
    try:
        _, rec = run_once(spec(command=["ls", "/proc/self/fd"]))
    finally:
        os.close(read_end)
        os.close(write_end)
    assert str(write_end) not in rec.lines()


@BOTH_PATHS
def test_stdin_is_dev_null(workdir: str | None) -> None:
    _, rec = run_once(spec(command="cat; echo end", workdir=workdir))
    assert rec.lines() == ["end"]


# --- output --------------------------------------------------------------------------


def test_long_line_is_cut_at_8_kib_on_a_character_boundary() -> None:
    code = """
        import sys
        sys.stdout.write("a" * 10000 + "\\n" + "x" + "é" * 5000 + "\\nnext\\nno newline")
    """
    _, rec = run_once(spec(command=python_job(code)))
    first, second, third, fourth = rec.lines()
    assert first == "a" * LINE_LIMIT
    assert second == "x" + "é" * 4095  # 8191 bytes: the 8192nd would split an é
    assert (third, fourth) == ("next", "no newline")


def test_invalid_utf8_is_replaced_and_crlf_stripped() -> None:
    _, rec = run_once(spec(command=r"printf '\377\376abc\r\nok\n'"))
    assert rec.lines() == ["\ufffd\ufffdabc", "ok"]


def test_output_flood_truncates_once_and_memory_stays_bounded() -> None:
    code = """
        import sys
        sys.stdout.write(("x" * 1023 + "\\n") * 5 * 1024)  # 5 MiB
        sys.stderr.write("after\\n")
    """
    tracemalloc.start()
    try:
        result, rec = run_once(spec(command=python_job(code)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.outcome is Outcome.SUCCESS  # the child was never blocked on a full pipe
    assert len(rec.named("job.output_truncated")) == 1
    assert set(rec.named("job.output_truncated")[0]) == {"event", "level", "job", "run_id"}
    assert rec.named("job.output_truncated")[0]["level"] == "warning"
    assert len(rec.lines()) == RUN_LIMIT // 1024
    assert rec.lines("stderr") == []  # dropped: the run's budget is spent
    # The recorder itself keeps the 1 MiB of logged lines; the runner adds little.
    assert peak < RUN_LIMIT + 2 * 1024 * 1024


def test_endless_line_does_not_grow_memory() -> None:
    tracemalloc.start()
    try:
        result, rec = run_once(spec(command="head -c 3000000 /dev/zero"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.outcome is Outcome.SUCCESS
    assert [len(line) for line in rec.lines()] == [LINE_LIMIT]
    assert len(rec.named("job.output_truncated")) == 1
    assert peak < 1024 * 1024


def test_exactly_one_mib_is_not_truncated() -> None:
    code = 'import sys; sys.stdout.write(("y" * 1023 + "\\n") * 1024)'
    _, rec = run_once(spec(command=python_job(code)))
    assert len(rec.lines()) == 1024
    assert rec.named("job.output_truncated") == []


def test_output_budget_is_per_run_across_attempts() -> None:
    code = 'import sys; sys.stdout.write(("z" * 1023 + "\\n") * 700); sys.exit(1)'
    result, rec = run_once(spec(command=python_job(code), retry={"attempts": 1, "delay": "10ms"}))
    assert result.attempt == 2
    assert len(rec.lines()) == 1024
    assert len(rec.named("job.output_truncated")) == 1


def test_output_inherit(capfd: pytest.CaptureFixture[str]) -> None:
    result, rec = run_once(spec(command="echo to-out; echo to-err >&2", output="inherit"))
    assert result.outcome is Outcome.SUCCESS
    captured = capfd.readouterr()
    assert "to-out" in captured.out
    assert "to-err" in captured.err
    assert rec.named("job.output") == []


def test_output_discard(capfd: pytest.CaptureFixture[str]) -> None:
    result, rec = run_once(spec(command="echo to-out; echo to-err >&2", output="discard"))
    assert result.outcome is Outcome.SUCCESS
    captured = capfd.readouterr()
    assert "to-out" not in captured.out
    assert "to-err" not in captured.err
    assert rec.named("job.output") == []


# --- timeouts, signals, process groups -----------------------------------------------


def test_timeout_with_a_child_that_ignores_term_needs_kill() -> None:
    result, rec = run_once(spec(command=IGNORE_TERM, timeout="1s", kill_after="300ms"))
    assert (result.outcome, result.exit_code) == (Outcome.TIMEOUT, -signal.SIGKILL)
    assert "got TERM" in rec.lines()
    assert result.duration_s >= 1.3
    finished = rec.named("job.finished")[0]
    assert (finished["level"], finished["outcome"]) == ("error", "timeout")


def test_timeout_stops_grandchildren_too() -> None:
    command = "sleep 300 & echo ready; sleep 300"
    result, rec = run_once(spec(command=command, timeout="500ms", kill_after="5s"))
    assert result.outcome is Outcome.TIMEOUT
    assert result.exit_code == -signal.SIGTERM
    assert rec.lines() == ["ready"]
    assert live_members(rec.named("job.started")[0]["pid"]) == []


def test_grandchild_holding_stdout_does_not_hold_the_run() -> None:
    # The shell exits at once; its background subshell keeps stdout open for 300 s.
    result, rec = run_once(spec(command="(sleep 300; echo late) & echo parent-done"))
    assert (result.outcome, result.exit_code) == (Outcome.SUCCESS, 0)
    assert result.duration_s < 5
    assert rec.lines() == ["parent-done"]
    assert live_members(rec.named("job.started")[0]["pid"]) == []


def test_leftover_that_ignores_term_is_killed_after_kill_after() -> None:
    command = "trap '' TERM; sleep 300 & echo $!"
    result, rec = run_once(spec(command=command, kill_after="300ms"))
    assert result.outcome is Outcome.SUCCESS
    pgid = rec.named("job.started")[0]["pid"]
    assert live_members(pgid) == []
    assert not is_live(int(rec.lines()[0]))


def test_process_that_left_the_group_does_not_hang_the_pump(tmp_path: Path) -> None:
    # setsid: the sleeper is in its own session, not ours to kill, and holds stdout.
    # The job waits until it has left the group, then prints its pid and exits.
    command = (
        "setsid sh -c 'echo $$ > pidfile; exec sleep 300' & "
        "while [ ! -s pidfile ]; do sleep 0.01; done; cat pidfile"
    )
    result, rec = run_once(spec(command=command, workdir=str(tmp_path)))
    escaped = int((tmp_path / "pidfile").read_text())
    try:
        assert result.outcome is Outcome.SUCCESS
        assert result.duration_s < 5
        assert rec.lines() == [str(escaped)]
        assert is_live(escaped)  # still there: crond only kills its own group
    finally:
        os.kill(escaped, signal.SIGKILL)


def test_signal_from_outside_is_killed_and_not_retried() -> None:
    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> RunResult:
        run = start(spec(command="echo ready; sleep 300", retry={"attempts": 2}), rec, tasks)
        await rec.wait_line("ready")
        assert run.pid is not None
        os.killpg(run.pid, signal.SIGKILL)
        return await finish(run)

    result = go(main)
    assert (result.outcome, result.exit_code, result.attempt) == (Outcome.KILLED, -9, 1)
    assert rec.named("job.finished")[0]["level"] == "warning"
    assert rec.named("job.retrying") == []


def test_crash_signal_is_a_failure() -> None:
    result, _ = run_once(spec(command="kill -SEGV $$"))
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, -signal.SIGSEGV)


def test_stop_sends_term_then_kill_and_is_killed() -> None:
    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> RunResult:
        run = start(spec(command=IGNORE_TERM, kill_after="300ms"), rec, tasks)
        await rec.wait_line("ready")
        run.stop()
        run.stop()  # idempotent
        await rec.wait_line("got TERM")
        return await finish(run)

    result = go(main)
    assert (result.outcome, result.exit_code) == (Outcome.KILLED, -signal.SIGKILL)
    assert result.duration_s >= 0.3
    assert len(rec.named("job.finished")) == 1


def test_stop_of_a_well_behaved_child_is_killed_by_term() -> None:
    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> RunResult:
        run = start(spec(command="echo ready; exec sleep 300"), rec, tasks)
        await rec.wait_line("ready")
        run.stop()
        return await finish(run)

    result = go(main)
    assert (result.outcome, result.exit_code) == (Outcome.KILLED, -signal.SIGTERM)


def test_kill_is_immediate() -> None:
    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> RunResult:
        run = start(spec(command=IGNORE_TERM, kill_after="1h"), rec, tasks)
        await rec.wait_line("ready")
        run.stop()
        await rec.wait_line("got TERM")
        run.kill()
        return await finish(run)

    result = go(main)
    assert (result.outcome, result.exit_code) == (Outcome.KILLED, -signal.SIGKILL)


def test_stop_and_kill_before_the_loop_turns() -> None:
    # The spawn is synchronous; the pipes, the exit and the timeout are watched from the
    # loop's next turn. A stop or kill in between still works, and is logged in order.
    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> list[RunResult]:
        stopped = start(spec(command="exec sleep 300"), rec, tasks)
        stopped.stop()
        killed = start(spec(command=IGNORE_TERM, kill_after="1h"), rec, tasks)
        killed.kill()
        return [await finish(stopped), await finish(killed)]

    results = go(main)
    assert [(r.outcome, r.exit_code) for r in results] == [
        (Outcome.KILLED, -signal.SIGTERM),
        (Outcome.KILLED, -signal.SIGKILL),
    ]
    for run_id in {e["run_id"] for e in rec.events}:
        events = [e["event"] for e in rec.events if e["run_id"] == run_id]
        assert events == ["job.started", "job.finished"]
    assert not any(is_live(e["pid"]) for e in rec.named("job.started"))


def test_pid_and_owned_pids_track_the_child() -> None:
    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> None:
        run = start(spec(command="echo ready; exec sleep 300"), rec, tasks)
        pid = run.pid
        assert pid is not None
        assert pid in runner.owned_pids()
        await rec.wait_line("ready")
        run.stop()
        await finish(run)
        assert run.pid is None
        assert pid not in runner.owned_pids()
        assert run.done()

    go(main)


def shut_down_under(main: Callable[[asyncio.TaskGroup], Awaitable[None]]) -> None:
    """Run `main`, which starts runs and returns while they go on, then shut down under
    them: the runs' TaskGroup is the daemon loop's, and the task that holds it is
    cancelled. No task may be left after that."""

    async def daemon(returned: asyncio.Event) -> None:
        async with asyncio.TaskGroup() as tasks:
            await main(tasks)
            returned.set()
            await asyncio.get_running_loop().create_future()  # serves until cancelled

    async def shutdown() -> None:
        returned = asyncio.Event()
        task = asyncio.create_task(daemon(returned))
        await asyncio.wait_for(returned.wait(), EVENT_WAIT)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert asyncio.all_tasks() == {asyncio.current_task()}  # no run outlived its owner

    asyncio.run(shutdown())


def test_a_child_is_reaped_even_when_the_loop_shuts_down_under_it() -> None:
    rec = Recorder()
    pids: list[int] = []

    async def main(tasks: asyncio.TaskGroup) -> None:
        run = start(spec(command="echo ready; exec sleep 300"), rec, tasks)
        assert run.pid is not None
        pids.append(run.pid)
        await rec.wait_line("ready")

    shut_down_under(main)
    with pytest.raises(ChildProcessError):
        os.waitpid(pids[0], os.WNOHANG)
    assert not Path(f"/proc/{pids[0]}").exists()
    assert pids[0] not in runner.owned_pids()


def test_leftovers_are_killed_when_the_loop_shuts_down_while_clearing_them() -> None:
    rec = Recorder()
    leftover: list[int] = []

    async def main(tasks: asyncio.TaskGroup) -> None:
        run = start(spec(command="trap '' TERM; sleep 300 & echo $!", kill_after="1h"), rec, tasks)
        await rec.wait_for(lambda e: e["event"] == "job.output")
        leftover.append(int(rec.lines()[0]))
        async with asyncio.timeout(EVENT_WAIT):
            while run.pid is not None:  # until the shell is reaped: then it is clearing
                await asyncio.sleep(0.005)
        assert is_live(leftover[0])
        # The shutdown cancels the run's task, which must kill the leftover.

    shut_down_under(main)
    wait_exit(leftover[0])  # SIGKILL is sent; its delivery takes a moment
    assert not is_live(leftover[0])
    assert rec.named("job.finished") == []


def test_cancelling_a_waiter_does_not_cancel_the_run(tmp_path: Path) -> None:
    rec = Recorder()
    go_on = tmp_path / "go-on"

    async def main(tasks: asyncio.TaskGroup) -> RunResult:
        command = f"echo ready; while [ ! -e {go_on} ]; do sleep 0.01; done; echo done"
        run = start(spec(command=command), rec, tasks)
        waiter = asyncio.create_task(run.wait())
        await rec.wait_line("ready")
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
        go_on.touch()
        return await finish(run)

    result = go(main)
    assert result.outcome is Outcome.SUCCESS
    assert rec.lines() == ["ready", "done"]


def test_works_without_pidfd(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    result, rec = run_once(spec(command="echo polled; exit 4"))
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, 4)
    assert rec.lines() == ["polled"]


def test_children_share_one_epoll_that_is_gone_when_idle() -> None:
    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> None:
        event_loop = asyncio.get_running_loop()
        runs = [start(spec(command="echo hi"), rec, tasks) for _ in range(3)]
        assert event_loop not in Watch._of  # spawned; watched from the next turn
        await asyncio.sleep(0)
        assert len(Watch._of[event_loop].callbacks) == 9  # two pipes and a pidfd each
        await asyncio.gather(*(finish(run) for run in runs))
        assert event_loop not in Watch._of

    go(main)


def test_many_runs_at_once() -> None:
    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> list[RunResult]:
        runs = [start(spec(command="echo $CROND_RUN_ID"), rec, tasks) for _ in range(50)]
        return list(await asyncio.gather(*(finish(run) for run in runs)))

    results = go(main)
    assert all(r.outcome is Outcome.SUCCESS for r in results)
    ids = {e["run_id"] for e in rec.named("job.started")}
    assert len(ids) == 50
    assert set(rec.lines()) == ids


def test_run_job_drives_its_run_in_a_task_group_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """`crond run-job` (runjob.run_once): while the job runs, every task but the main
    one was made by a TaskGroup; SIGINT stops the job as for a timeout (128 + SIGTERM)."""
    made: set[asyncio.Task[Any]] = set()
    seen: list[set[asyncio.Task[Any]]] = []
    create_task = asyncio.TaskGroup.create_task

    def recorded(group: asyncio.TaskGroup, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        task = create_task(group, coro, **kw)
        made.add(task)
        return task

    def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "job.output" and event["line"] == "ready":
            seen.append(asyncio.all_tasks())
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C

    monkeypatch.setattr(asyncio.TaskGroup, "create_task", recorded)
    rec = Recorder(on_event)
    code = runjob.run_once(make_job(command="echo ready; exec sleep 300"), rec.log)
    assert code == 128 + signal.SIGTERM
    [tasks] = seen
    assert len(tasks - made) == 1  # the main task alone is no TaskGroup's
    assert tasks & made  # the run's
    assert all(task.done() for task in made)


# --- the process mechanism and /proc -------------------------------------------------

# A program name (comm) built to fool a naive /proc/PID/stat parser: a ")" and fields.
TRICKY_COMM = "a) Z 1 2 (b"
GROUP_LEADER = python_job(
    f"""
    import subprocess, sys
    with open("/proc/self/comm", "w") as comm:
        comm.write({TRICKY_COMM!r})
    member = subprocess.Popen(["sleep", "300"])
    print(member.pid, flush=True)
    sys.stdin.read()  # until the test closes our stdin; never reaps the member
    """
)


def test_procfs_reads_state_parent_and_group_of_a_real_process_group() -> None:
    pipe = subprocess.PIPE
    with subprocess.Popen(GROUP_LEADER, stdin=pipe, stdout=pipe, start_new_session=True) as leader:
        assert leader.stdout is not None
        assert leader.stdin is not None
        try:
            member = int(leader.stdout.readline())
            assert Path(f"/proc/{leader.pid}/comm").read_text().strip() == TRICKY_COMM
            stat = procfs.stat(leader.pid)
            assert stat is not None
            assert (stat.ppid, stat.pgrp, stat.live) == (os.getpid(), leader.pid, True)
            stat = procfs.stat(member)
            assert stat is not None
            assert (stat.ppid, stat.pgrp, stat.live) == (leader.pid, leader.pid, True)
            assert {member, leader.pid} <= set(procfs.pids())
            assert process.group_alive(leader.pid)
            os.kill(member, signal.SIGKILL)  # a zombie then: its parent never reaps it
            until(lambda: zombie(member))
            assert not procfs.stat(member).live  # type: ignore[union-attr]
            assert process.group_alive(leader.pid)  # the leader still lives
            leader.stdin.close()
            until(lambda: zombie(leader.pid))  # its member: gone, or a zombie of init's
            assert not process.group_alive(leader.pid)
        finally:
            leader.kill()
    assert procfs.stat(leader.pid) is None


def test_the_pid_1_reaper_reaps_zombie_children_it_does_not_own() -> None:
    child = subprocess.Popen(["true"])
    until(lambda: zombie(child.pid))
    assert procfs.stat(child.pid).ppid == os.getpid()  # type: ignore[union-attr]
    others = set(reaper._children()) - {child.pid}  # other tests' children: left alone
    assert reaper.reap_orphans(others | {child.pid}) == 0  # owned: not ours to reap
    assert procfs.stat(child.pid) is not None
    assert reaper.reap_orphans(others) == 1
    assert procfs.stat(child.pid) is None
    child.returncode = 0  # reaped behind Popen's back: tell it


# --- retries -------------------------------------------------------------------------


def test_retries_keep_run_id_count_attempts_and_back_off() -> None:
    retry = {"attempts": 2, "delay": "10ms", "backoff": 2.0}
    result, rec = run_once(spec(command="echo attempt $CROND_ATTEMPT; exit 1", retry=retry))
    assert (result.outcome, result.attempt) == (Outcome.FAILED, 3)
    started = rec.named("job.started")
    assert [e["attempt"] for e in started] == [1, 2, 3]
    assert len({e["run_id"] for e in rec.events}) == 1
    assert [e["attempt"] for e in rec.named("job.finished")] == [1, 2, 3]
    retrying = rec.named("job.retrying")
    assert [(e["attempt"], e["delay_s"]) for e in retrying] == [(2, 0.01), (3, 0.02)]
    assert all(e["level"] == "warning" for e in retrying)
    assert set(retrying[0]) == {"event", "level", "job", "run_id", "attempt", "delay_s"}
    assert rec.lines() == ["attempt 1", "attempt 2", "attempt 3"]


def test_retry_until_success() -> None:
    retry = {"attempts": 5, "delay": "10ms"}
    result, rec = run_once(spec(command='[ "$CROND_ATTEMPT" -ge 2 ]', retry=retry))
    assert (result.outcome, result.attempt) == (Outcome.SUCCESS, 2)
    assert [e["outcome"] for e in rec.named("job.finished")] == ["failed", "success"]


def test_timeouts_are_retried() -> None:
    retry = {"attempts": 1, "delay": "10ms"}
    result, rec = run_once(spec(command="exec sleep 300", timeout="200ms", retry=retry))
    assert (result.outcome, result.attempt) == (Outcome.TIMEOUT, 2)
    assert [e["outcome"] for e in rec.named("job.finished")] == ["timeout", "timeout"]


def test_failure_to_start_is_retried() -> None:
    retry = {"attempts": 1, "delay": "10ms"}
    result, rec = run_once(spec(command=["no-such-program-crond-test"], retry=retry))
    assert (result.outcome, result.exit_code, result.attempt) == (Outcome.FAILED, 127, 2)
    assert len(rec.lines("stderr")) == 2


def test_stop_during_the_retry_delay_ends_the_run_with_the_last_result() -> None:
    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> RunResult:
        run = start(spec(command="exit 5", retry={"attempts": 3, "delay": "1h"}), rec, tasks)
        await rec.wait_for(lambda e: e["event"] == "job.retrying")
        assert run.attempt == 2
        assert run.pid is None
        run.stop()
        return await finish(run)

    result = go(main)
    assert (result.outcome, result.exit_code, result.attempt) == (Outcome.FAILED, 5, 1)
    assert len(rec.named("job.started")) == 1


# --- python jobs ---------------------------------------------------------------------

MODULE = """
import asyncio
import json
import os
import sys


def show(*args, **kwargs):
    print(json.dumps([args, kwargs], sort_keys=True))
    print("to stderr", file=sys.stderr)


def boom():
    raise ValueError("boom")


def leave(code):
    sys.exit(code)


async def later(word):
    await asyncio.sleep(0)
    print("async", word)


def returns_coroutine():
    return later("via coroutine")


class Tasks:
    @staticmethod
    def nested():
        print("nested", os.environ["CROND_JOB"])


def where():
    import importlib.util
    print(sys.prefix)
    print("crond importable:", importlib.util.find_spec("crond") is not None)
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    (tmp_path / "appmod.py").write_text(MODULE)
    return tmp_path


def py_spec(app: Path, ref: str, **fields: Any) -> RunSpec:
    return spec(python=f"appmod:{ref}", workdir=str(app), **fields)


def test_python_job_with_args_and_kwargs(app: Path) -> None:
    the_spec = py_spec(app, "show", args=["eu", 3], kwargs={"limit": 100, "dry": True})
    result, rec = run_once(the_spec)
    assert (result.outcome, result.exit_code) == (Outcome.SUCCESS, 0)
    assert rec.lines() == ['[["eu", 3], {"dry": true, "limit": 100}]']
    assert rec.lines("stderr") == ["to stderr"]


def test_python_job_exception_prints_traceback_and_exits_1(app: Path) -> None:
    result, rec = run_once(py_spec(app, "boom"))
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, 1)
    err = rec.lines("stderr")
    assert err[0] == "Traceback (most recent call last):"
    assert "appmod.py" in err[1]  # starts in the job's code, not in the bootstrap
    assert err[-1] == "ValueError: boom"


@pytest.mark.parametrize(("code", "outcome"), [(3, Outcome.FAILED), (0, Outcome.SUCCESS)])
def test_python_job_system_exit_is_honoured(app: Path, code: int, outcome: Outcome) -> None:
    result, _ = run_once(py_spec(app, "leave", args=[code]))
    assert (result.outcome, result.exit_code) == (outcome, code)


def test_python_job_async_callable(app: Path) -> None:
    result, rec = run_once(py_spec(app, "later", kwargs={"word": "hi"}))
    assert result.outcome is Outcome.SUCCESS
    assert rec.lines() == ["async hi"]


def test_python_job_returning_a_coroutine(app: Path) -> None:
    _, rec = run_once(py_spec(app, "returns_coroutine"))
    assert rec.lines() == ["async via coroutine"]


def test_python_job_dotted_callable(app: Path) -> None:
    _, rec = run_once(py_spec(app, "Tasks.nested"))
    assert rec.lines() == ["nested t"]


def test_python_job_missing_module_fails(app: Path) -> None:
    result, rec = run_once(spec(python="nosuchmodule_crond:main", workdir=str(app)))
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, 1)
    assert rec.lines("stderr")[-1].startswith("ModuleNotFoundError")


def test_python_job_in_another_venv_without_crond(app: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True)
    interpreter = str(venv / "bin" / "python")
    result, rec = run_once(py_spec(app, "where", interpreter=interpreter))
    assert result.outcome is Outcome.SUCCESS, rec.lines("stderr")
    assert rec.lines() == [str(venv), "crond importable: False"]


def test_python_job_missing_interpreter(app: Path) -> None:
    result, rec = run_once(py_spec(app, "show", interpreter="/nonexistent/python"))
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, 127)
    assert rec.lines("stderr") == ["crond: program not found: /nonexistent/python"]


# --- users ---------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_user_switch_to_nobody() -> None:
    command = 'id -u; id -g; id -G; echo "$HOME $USER $LOGNAME"'
    the_spec = spec(command=command, user="nobody", workdir="/")
    result, rec = run_once(the_spec)
    assert result.outcome is Outcome.SUCCESS, rec.lines("stderr")
    uid, gid, groups, names = rec.lines()
    assert (uid, gid) == ("65534", "65534")
    assert groups.split() == ["65534"]
    assert names == "/nonexistent nobody nobody"


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_user_job_gets_a_clean_environment_and_its_own_env() -> None:
    base = {"PATH": "/opt/secret/bin:/usr/bin:/bin", "AWS_SECRET": "x", "LANG": "C.UTF-8"}
    the_spec = spec(base, command="env | sort", user="nobody", workdir="/", env={"MINE": "1"})
    result, rec = run_once(the_spec)
    assert result.outcome is Outcome.SUCCESS, rec.lines("stderr")
    env = dict(line.split("=", 1) for line in rec.lines())
    assert "AWS_SECRET" not in env
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert (env["LANG"], env["MINE"], env["USER"]) == ("C.UTF-8", "1", "nobody")
    assert env["CROND_JOB"] == the_spec.job


def test_unknown_user_fails_each_attempt_with_a_message() -> None:
    the_spec = spec(command="true", user="no-such-user-crond")
    assert the_spec.error is not None
    result, rec = run_once(the_spec)
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, 126)
    assert rec.lines("stderr") == [
        "crond: cannot run as user 'no-such-user-crond': no such user on this host"
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="as root, every user is allowed")
def test_user_without_root_fails_with_a_message() -> None:
    the_spec = spec(command="true", user="nobody")
    result, rec = run_once(the_spec)
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, 126)
    assert "only root can switch users" in rec.lines("stderr")[0]


# --- small parts ---------------------------------------------------------------------


def test_run_ids_are_unique_and_sort_by_time() -> None:
    early = [runner.new_run_id(SLOT) for _ in range(100)]
    late = runner.new_run_id(SLOT + timedelta(milliseconds=1))
    assert len(set(early)) == 100
    assert max(early) < late
    for text in [*early, late, runner.new_run_id()]:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 7, uuid.RFC_4122)
    # The first 48 bits are the instant's milliseconds since the epoch.
    assert int(early[0].replace("-", "")[:12], 16) == int(SLOT.timestamp() * 1000)
    now_ms = int(uuid.UUID(runner.new_run_id()).int >> 80)
    assert abs(now_ms - time.time() * 1000) < 60_000


def test_iso_utc() -> None:
    berlin = datetime(2026, 3, 8, 8, 0, tzinfo=UTC).astimezone()
    assert runner.iso_utc(berlin) == "2026-03-08T08:00:00Z"
    assert runner.iso_utc(SLOT.replace(microsecond=5)) == "2026-03-08T07:00:00.000005Z"


def test_naive_slot_is_refused() -> None:
    async def main(tasks: asyncio.TaskGroup) -> None:
        naive, the_spec, log = datetime(2026, 1, 1), spec(command="true"), Recorder().log
        with pytest.raises(ValueError, match="aware"):
            runner.start_run(the_spec, naive, tasks=tasks, clock=SystemClock(), log=log)

    go(main)


# --- the record of attempts ------------------------------------------------------------


class Book:
    """A runner.Recorder that notes what it is told, and what the world looked like then."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark
        self.calls: list[tuple[str, int, bool]] = []  # (what, attempt, mark existed)
        self.tails: list[list[str]] = []

    def started(self, run: Run, attempt: int) -> object:
        self.calls.append(("started", attempt, self.mark.exists()))
        return attempt * 100

    def finished(self, token: object, run: Run, result: RunResult, tail: Sequence[str]) -> None:
        assert token == result.attempt * 100
        self.calls.append(("finished", result.attempt, self.mark.exists()))
        self.tails.append(list(tail))


def test_recorder_is_told_before_each_spawn_and_gets_the_last_lines(tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    book = Book(mark)
    command = f"seq 1 30; touch {mark}; exit 1"
    the_spec = spec(command=command, retry={"attempts": 1, "delay": "10ms"})
    result, _ = run_once(the_spec, recorder=book)
    assert result.attempt == 2
    # started is called before the child exists: its mark is not there yet at attempt 1.
    assert book.calls == [
        ("started", 1, False),
        ("finished", 1, True),
        ("started", 2, True),
        ("finished", 2, True),
    ]
    assert book.tails == [[str(i) for i in range(11, 31)]] * 2


def test_a_spawn_the_os_refuses_is_a_failed_run_not_a_crash() -> None:
    """posix_spawn raises ValueError for an environment name with `=` or a NUL anywhere:
    that run fails (126, with crond's words on stderr); the daemon goes on."""
    import dataclasses  # noqa: PLC0415

    rec = Recorder()

    async def main(tasks: asyncio.TaskGroup) -> RunResult:
        bad = dataclasses.replace(spec(command="true"), env={"A=B": "1"})
        return await finish(start(bad, rec, tasks))

    result = go(main)
    assert (result.outcome, result.exit_code) == (Outcome.FAILED, 126)
    (line,) = [e["line"] for e in rec.named("job.output")]
    assert line.startswith("crond: cannot start /bin/sh: "), line
