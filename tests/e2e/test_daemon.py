"""The real `crond` binary: jobs fire, HUP reloads, TERM drains, timeouts kill groups."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.e2e.harness import Crond, eventually, pid_alive, run_cli


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def start(started: list[Crond], *args: str, **kw: object) -> Crond:
    daemon = Crond(list(args), **kw)  # type: ignore[arg-type]
    started.append(daemon)
    return daemon


def test_interval_job_fires_and_logs_its_output(tmp_path: Path, crond: list[Crond]) -> None:
    f = write(
        tmp_path / "s.yaml",
        """\
        jobs:
          tick:
            every: 1s
            command: echo "tick $CROND_JOB $CROND_ATTEMPT"
        """,
    )
    d = start(crond, str(f))
    started = d.wait_for("daemon.started")
    assert started["jobs"] == 1
    assert started["config"] == str(f)
    run = d.wait_for("job.started", lambda e: e["job"] == "tick")
    assert run["slot"].endswith("Z")
    assert run["attempt"] == 1
    out = d.wait_for("job.output", lambda e: e["run_id"] == run["run_id"])
    assert out["line"] == "tick tick 1"
    assert out["stream"] == "stdout"
    done = d.wait_for("job.finished", lambda e: e["run_id"] == run["run_id"])
    assert done["outcome"] == "success"
    assert done["exit_code"] == 0
    assert done["level"] == "info"
    assert d.stop() == 0
    assert d.names()[-2:] == ["daemon.stopping", "daemon.stopped"]


def test_a_job_never_starts_before_its_slot(tmp_path: Path, crond: list[Crond]) -> None:
    """The loop wakes ~3 ms before a slot to plan and record its runs, and spawns them at
    the slot: `lag_ms` (taken just after the spawn returns) is never negative, and each
    run's own `date` comes after its own slot ($CROND_SLOT). (The fake-clock tests of
    tests/daemon/test_loop.py pin the instant exactly.)"""
    stamps = tmp_path / "stamps"
    f = write(
        tmp_path / "s.yaml",
        f"""\
        jobs:
          tick:
            every: 1s
            command: echo "$CROND_SLOT $(date +%s.%N)" >> {stamps}
        """,
    )
    d = start(crond, str(f))
    d.wait_for("daemon.started")
    runs = [d.wait_for("job.finished") for _ in range(5)]
    assert d.stop() == 0
    started = {e["run_id"]: e for e in d.events if e["event"] == "job.started"}
    assert all(started[run["run_id"]]["lag_ms"] >= 0 for run in runs)
    lines = stamps.read_text().splitlines()
    assert len(lines) >= 5
    for line in lines:
        slot, wrote = line.split()
        assert float(wrote) >= datetime.fromisoformat(slot).timestamp(), line


def test_hup_adds_a_job_and_a_broken_file_keeps_the_old_jobs(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {every: 1s, command: 'true'}\n")
    d = start(crond, str(f))
    d.wait_for("job.finished", lambda e: e["job"] == "a")
    write(f, "jobs:\n  a: {every: 1s, command: 'true'}\n  b: {every: 1s, command: 'true'}\n")
    d.signal(signal.SIGHUP)
    reloaded = d.wait_for("config.reloaded")
    assert (reloaded["added"], reloaded["removed"], reloaded["changed"]) == (["b"], [], [])
    d.wait_for("job.started", lambda e: e["job"] == "b")

    write(f, "jobs:\n  a: {every: 1s, command: 'true'}\n  b: {every: 1s, comand: x}\n")
    d.signal(signal.SIGHUP)
    failed = d.wait_for("config.reload_failed")
    assert failed["level"] == "error"
    assert any(f"{f}:3:" in e and 'did you mean "command"' in e for e in failed["errors"])
    after = failed["timestamp"]  # the old jobs keep running
    d.wait_for("job.started", lambda e: e["job"] == "b" and e["timestamp"] > after)
    d.wait_for("job.started", lambda e: e["job"] == "a" and e["timestamp"] > after)
    assert d.stop() == 0


def test_a_reload_of_thousands_of_jobs_logs_one_short_line(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {every: 1h, command: 'true'}\n")
    d = start(crond, str(f))
    d.wait_for("daemon.started")
    many = "".join(f"  j{i:04d}: {{every: 1h, command: 'true'}}\n" for i in range(3000))
    write(f, "jobs:\n" + many)
    d.signal(signal.SIGHUP)
    reloaded = d.wait_for("config.reloaded")
    assert reloaded["counts"] == {"added": 3000, "removed": 1, "changed": 0}
    assert reloaded["added"] == [f"j{i:04d}" for i in range(50)]
    assert reloaded["removed"] == ["a"]
    assert reloaded["truncated"] is True
    line = json.dumps({k: v for k, v in reloaded.items() if k != "_seen"})
    assert len(line) < 2_000, len(line)  # as logged, give or take its spaces
    assert d.stop() == 0


def test_invalid_file_at_start_exits_1_with_located_errors(tmp_path: Path) -> None:
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {every: 15 mins, command: x}\n")
    result = run_cli("run", str(f))
    assert result.returncode == 1
    assert f"{f}:2:" in result.stderr
    assert "try 15m" in result.stderr
    assert "Traceback" not in result.stderr


def test_term_waits_for_a_running_job(tmp_path: Path, crond: list[Crond]) -> None:
    mark = tmp_path / "started"
    f = write(
        tmp_path / "s.yaml",
        f"""\
        jobs:
          slow:
            every: 1s
            command: touch {mark}; sleep 0.5; echo finished
        """,
    )
    d = start(crond, str(f))
    d.wait_for("job.started")
    eventually(mark.exists, what="the job started")
    d.signal(signal.SIGTERM)
    stopping = d.wait_for("daemon.stopping")
    assert stopping["signal"] == "SIGTERM"
    assert stopping["running"] == 1
    assert d.exited() == 0
    finished = d.named("job.finished")
    assert [e["outcome"] for e in finished] == ["success"]
    assert d.named("job.output")[-1]["line"] == "finished"
    assert len(d.named("job.started")) == 1  # nothing new started while draining


def test_draining_after_term_does_not_spin(tmp_path: Path, crond: list[Crond]) -> None:
    """While it waits for a run to end, the stopping daemon sleeps: slots that fall due
    meanwhile start nothing and must not wake it again and again (it once spun a core)."""
    f = write(tmp_path / "s.yaml", "jobs:\n  slow: {every: 1s, command: sleep 3}\n")
    d = start(crond, str(f))
    d.wait_for("job.started")
    d.signal(signal.SIGTERM)
    d.wait_for("daemon.stopping")
    stat = Path(f"/proc/{d.proc.pid}/stat")

    def ticks() -> int:  # utime + stime, in clock ticks (100 a second)
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    before = ticks()
    time.sleep(1.5)  # a measurement over time, not a wait for an event
    assert ticks() - before < 30  # a spinning loop: ~150
    assert d.exited() == 0


def test_shutdown_timeout_stops_running_jobs(tmp_path: Path, crond: list[Crond]) -> None:
    f = write(
        tmp_path / "s.yaml",
        """\
        daemon: {shutdown_timeout: 300ms}
        jobs:
          long:
            every: 1s
            command: [sh, -c, "echo up; exec sleep 60"]
        """,
    )
    d = start(crond, str(f))
    run = d.wait_for("job.output", lambda e: e["line"] == "up")
    d.signal(signal.SIGTERM)
    assert d.exited() == 0
    finished = [e for e in d.named("job.finished") if e["run_id"] == run["run_id"]]
    assert [(e["outcome"], e["exit_code"]) for e in finished] == [("killed", -15)]
    assert 0.2 < finished[0]["duration_s"] < 5


def test_second_signal_kills_at_once(tmp_path: Path, crond: list[Crond]) -> None:
    f = write(
        tmp_path / "s.yaml",
        """\
        daemon: {shutdown_timeout: 300ms}
        jobs:
          stubborn:
            every: 1s
            kill_after: 30s
            command:
              - python3
              - -c
              - "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);
                 print('up', flush=True); time.sleep(60)"
        """,
    )
    d = start(crond, str(f))
    run = d.wait_for("job.output", lambda e: e["line"] == "up")
    d.signal(signal.SIGTERM)
    d.wait_for("daemon.stopping")
    # The job ignores SIGTERM and kill_after is long: only a second signal ends it now.
    d.signal(signal.SIGTERM)
    assert d.exited() == 0
    finished = [e for e in d.named("job.finished") if e["run_id"] == run["run_id"]]
    assert [e["outcome"] for e in finished] == ["killed"]
    assert finished[0]["exit_code"] == -9


def test_timeout_kills_grandchildren(tmp_path: Path, crond: list[Crond]) -> None:
    pids = tmp_path / "pids"
    f = write(
        tmp_path / "s.yaml",
        f"""\
        jobs:
          hang:
            every: 1s
            timeout: 300ms
            kill_after: 200ms
            command: sleep 300 & echo $! > {pids}; sleep 300
        """,
    )
    d = start(crond, str(f))
    done = d.wait_for("job.finished", lambda e: e["job"] == "hang")
    assert done["outcome"] == "timeout"
    assert done["level"] == "error"
    grandchild = int(pids.read_text().split()[0])
    eventually(lambda: not pid_alive(grandchild), 5, "the grandchild is gone")
    assert d.stop() == 0


def test_python_entrypoint_in_another_venv(tmp_path: Path, crond: list[Crond]) -> None:
    venv = tmp_path / "appvenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    app = tmp_path / "app"
    app.mkdir()
    (app / "tasks.py").write_text(
        "import sys\n"
        "async def report(region, limit=1):\n"
        "    print(f'report {region} {limit} from {sys.prefix}')\n"
    )
    f = write(
        tmp_path / "s.yaml",
        f"""\
        jobs:
          report:
            every: 1s
            python: tasks:report
            interpreter: {venv}/bin/python
            workdir: {app}
            args: [eu]
            kwargs: {{limit: 100}}
        """,
    )
    d = start(crond, str(f))
    out = d.wait_for("job.output", lambda e: e["job"] == "report")
    assert out["line"] == f"report eu 100 from {venv}"
    assert d.wait_for("job.finished")["outcome"] == "success"
    assert d.stop() == 0


def test_run_job_runs_once_as_the_daemon_would(tmp_path: Path) -> None:
    f = write(
        tmp_path / "s.yaml",
        f"""\
        defaults:
          env: {{GREETING: hello}}
        jobs:
          greet:
            cron: "@yearly"
            workdir: {tmp_path}
            command: echo "$GREETING from $(pwd) as $CROND_JOB"; exit 3
            enabled: false
          slow:
            every: 1h
            timeout: 200ms
            kill_after: 100ms
            command: sleep 30
        """,
    )
    result = run_cli("run-job", str(f), "greet")
    assert result.returncode == 3
    events = [json.loads(line) for line in result.stderr.splitlines()]
    assert [e["event"] for e in events] == ["job.started", "job.output", "job.finished"]
    assert events[1]["line"] == f"hello from {tmp_path} as greet"
    assert events[2]["outcome"] == "failed"
    assert run_cli("run-job", str(f), "slow").returncode == 124
    missing = run_cli("run-job", str(f), "nope")
    assert missing.returncode == 2
    assert "no job named nope" in missing.stderr


def test_output_with_unicode_line_separators_stays_one_event_per_line(tmp_path: Path) -> None:
    """JSON allows U+2028, U+2029 and U+0085 raw in a string; line-based readers split
    on them. Escaped in the log, each event is one line whatever a job prints."""
    f = tmp_path / "s.yaml"
    f.write_text(
        "jobs:\n  sep:\n    every: 1h\n    command: [printf, 'a\\u2028b\\u2029c\\302\\205d\\n']\n",
        encoding="utf-8",
    )
    result = run_cli("run-job", str(f), "sep", "--log-format", "json")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stderr.splitlines()]
    output = [e for e in events if e["event"] == "job.output"]
    assert [e["line"] for e in output] == ["a\u2028b\u2029c\u0085d"]


def _ics(*days: datetime) -> str:
    events = "".join(
        f"BEGIN:VEVENT\r\nUID:{i}\r\nDTSTART;VALUE=DATE:{day:%Y%m%d}\r\n"
        f"DTEND;VALUE=DATE:{day + timedelta(days=1):%Y%m%d}\r\nSUMMARY:Freeze\r\nEND:VEVENT\r\n"
        for i, day in enumerate(days)
    )
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\n{events}END:VCALENDAR\r\n"


def test_hup_after_only_the_ics_file_changed_re_times_the_job(
    tmp_path: Path, crond: list[Crond]
) -> None:
    """docs/schedules.md, "Bounds": an iCalendar file is read again at each reload and a
    job whose calendars changed is re-timed, though the schedules file did not change."""
    today = datetime.now(UTC)
    ics = tmp_path / "freeze.ics"
    ics.write_text(_ics(today, today + timedelta(days=1)))  # today and tomorrow: no fire
    f = write(
        tmp_path / "s.yaml",
        f"""\
        calendars:
          freeze: {{ics: {ics}}}
        jobs:
          a: {{every: 1s, skip: [freeze], command: 'true'}}
          b: {{every: 1s, command: 'true'}}
        """,
    )
    d = start(crond, str(f))
    d.wait_for("job.finished", lambda e: e["job"] == "b")
    d.wait_for("job.finished", lambda e: e["job"] == "b")
    ics.write_text(_ics())  # the freeze is lifted; the schedules file is the same
    d.signal(signal.SIGHUP)
    reloaded = d.wait_for("config.reloaded")
    assert reloaded["changed"] == ["a"]
    assert "job.started" not in [e["event"] for e in d.events if e.get("job") == "a"]
    d.wait_for("job.started", lambda e: e["job"] == "a")
    assert d.stop() == 0
