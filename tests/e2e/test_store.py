"""The state store with the real binary: kill -9 and restart, catch-up, @reboot, status
and history while the daemon writes, a corrupt or unavailable store."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.harness import Crond, eventually, run_cli


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def start(started: list[Crond], *args: str) -> Crond:
    daemon = Crond(list(args))
    started.append(daemon)
    return daemon


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def wait_for_phase(period: float, phase: float) -> None:
    """Block until the wall clock is `phase` seconds into a `period` (interval slots are
    at multiples of the period since the epoch): the test's own timing, not a guess."""
    now = time.time()
    time.sleep((phase - now % period) % period)


def status(f: Path, state: Path) -> list[dict[str, object]]:
    result = run_cli("status", str(f), "--state-dir", str(state), "--json")
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_kill_9_then_restart_closes_the_run_as_lost_and_catches_up_once(
    tmp_path: Path, crond: list[Crond]
) -> None:
    state = tmp_path / "state"
    f = write(
        tmp_path / "s.yaml",
        """\
        daemon:
          shutdown_timeout: 1s
        jobs:
          long:
            every: 1s
            command: sleep 30
          c:
            every: 4s
            grace: 1s
            catchup: latest
            command: "true"
        """,
    )
    first = start(crond, str(f), "--state-dir", str(state))
    c_first = first.wait_for("job.finished", lambda e: e["job"] == "c")
    long_run = first.wait_for("job.started", lambda e: e["job"] == "long")
    try:
        rows = {r["job"]: r for r in status(f, state)}
        assert rows["long"]["running"] is True
        last_c = max(instant(e["slot"]) for e in first.named("job.started") if e["job"] == "c")
        first.proc.kill()  # kill -9: no chance to record anything more
        first.proc.wait(10)
        rows = {r["job"]: r for r in status(f, state)}
        assert rows["long"]["running"] is False  # its daemon is gone
        assert rows["long"]["last_run"]["finished"] is None  # type: ignore[index]

        # Down for at least one slot of c, restarted 1.3 s into a 4 s period: its latest
        # slot is then later than its 1 s grace, and within its 1 d window; the daemon has
        # until the next slot, 2.7 s, to start (longer on a busy machine than on a quiet one).
        time.sleep(max(0.0, last_c.timestamp() + 4.5 - time.time()))
        wait_for_phase(4.0, 1.3)
        second = start(crond, str(f), "--state-dir", str(state))
        lost = second.wait_for("job.lost")
        assert (lost["job"], lost["run_id"], lost["slot"]) == (
            "long",
            long_run["run_id"],
            long_run["slot"],
        )
        caught = second.wait_for("job.caught_up", lambda e: e["job"] == "c")
        # Every 4 s slot after the last one run, up to the caught-up one, was missed.
        missed = round((instant(caught["slot"]) - last_c).total_seconds() / 4) - 1
        assert caught["skipped"] == missed
        rerun = second.wait_for("job.started", lambda e: e["job"] == "c")
        assert rerun["slot"] == caught["slot"]
        assert instant(rerun["slot"]) > last_c  # no slot of the first daemon ran again
        second.wait_for(  # and the next run is the next slot, not another catch-up
            "job.started",
            lambda e: (
                e["job"] == "c"
                and instant(e["slot"]).timestamp() > instant(caught["slot"]).timestamp()
            ),
            timeout=10,
        )
        assert len(second.named("job.caught_up")) == 1
        assert second.stop() == 0
        lost_slot = instant(long_run["slot"])
        assert all(  # the lost run's slot, too, was never started again
            instant(e["slot"]) > lost_slot
            for e in second.named("job.started")
            if e["job"] == "long"
        )
    finally:
        kill_group(long_run["pid"])
        for d in crond:
            for e in d.named("job.started"):
                if e["pid"]:
                    kill_group(e["pid"])
    history = run_cli("history", str(f), "long", "--state-dir", str(state), "--json")
    outcomes = {
        json.loads(line)["run_id"]: json.loads(line)["outcome"]
        for line in history.stdout.splitlines()
    }
    assert outcomes[long_run["run_id"]] == "lost"
    assert c_first["outcome"] == "success"


def test_reboot_runs_once_per_boot_id(tmp_path: Path, crond: list[Crond]) -> None:
    state = tmp_path / "state"
    f = write(
        tmp_path / "s.yaml",
        """\
        jobs:
          boot:
            cron: "@reboot"
            command: echo booted
          tick:
            every: 1s
            command: "true"
        """,
    )

    def one_daemon() -> list[str]:
        d = start(crond, str(f), "--state-dir", str(state))
        d.wait_for("job.finished", lambda e: e["job"] == "tick")  # well past start
        assert d.stop() == 0
        return [e["job"] for e in d.named("job.started") if e["job"] == "boot"]

    assert one_daemon() == ["boot"]
    assert one_daemon() == []  # a restart in the same boot: not again
    db = sqlite3.connect(state / "crond.sqlite3")
    with db:
        db.execute("UPDATE meta SET value = 'a-previous-boot' WHERE key = 'reboot:boot'")
    db.close()
    assert one_daemon() == ["boot"]  # the host booted since (another boot id)
    assert one_daemon() == []


def test_reboot_without_a_store_runs_at_every_start_and_validate_says_so(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f = write(
        tmp_path / "s.yaml",
        """\
        daemon:
          state_dir: none
        jobs:
          boot:
            cron: "@reboot"
            command: echo booted
        """,
    )
    result = run_cli("validate", str(f))
    assert result.returncode == 0
    assert "jobs.boot.cron: @reboot without a state store" in result.stderr
    for _ in range(2):
        d = start(crond, str(f))
        d.wait_for("job.finished", lambda e: e["job"] == "boot")
        assert d.stop() == 0
        assert "state.opened" not in d.names()


def test_status_and_history_while_many_runs_are_recorded(
    tmp_path: Path, crond: list[Crond]
) -> None:
    state = tmp_path / "state"
    jobs = "".join(f"  j{i}:\n    every: 1s\n    command: echo out-{i}\n" for i in range(30))
    f = write(tmp_path / "s.yaml", "jobs:\n" + jobs)
    d = start(crond, str(f), "--state-dir", str(state))
    d.wait_for("job.finished", lambda e: e["job"] == "j29")

    def many_status(_: int) -> int:
        for _ in range(3):
            rows = status(f, state)
            assert [r["job"] for r in rows] == [f"j{i}" for i in range(30)]
        return 3

    with ThreadPoolExecutor(4) as pool:
        assert sum(pool.map(many_status, range(4))) == 12
    assert d.stop() == 0
    assert "state.write_failed" not in d.names()
    finished = {e["run_id"]: e for e in d.named("job.finished")}
    history = run_cli("history", str(f), "j7", "--state-dir", str(state), "-n", "1000", "--json")
    attempts = [json.loads(line) for line in history.stdout.splitlines()]
    assert attempts
    assert {a["run_id"] for a in attempts} == {
        e["run_id"] for e in finished.values() if e["job"] == "j7"
    }
    assert all(a["output"] == ["out-7"] and a["outcome"] == "success" for a in attempts)
    rows = {r["job"]: r for r in status(f, state)}
    assert rows["j7"]["last_success"]["run_id"] == attempts[-1]["run_id"]  # type: ignore[index]
    table = run_cli("history", str(f), "j7", "--state-dir", str(state), "-n", "1")
    assert table.stdout.splitlines()[-1] == "    | out-7"


def test_a_corrupt_store_is_moved_aside_and_scheduling_goes_on(
    tmp_path: Path, crond: list[Crond]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "crond.sqlite3").write_bytes(b"this is not a database, " * 200)
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {every: 1s, command: 'true'}\n")
    live = tmp_path / "live.json"
    d = start(crond, str(f), "--state-dir", str(state), "--liveness-file", str(live))
    aside = d.wait_for("state.moved_aside")
    assert Path(aside["moved_to"]).read_bytes().startswith(b"this is not a database")
    d.wait_for("job.finished", lambda e: e["job"] == "a")
    eventually(lambda: json.loads(live.read_text())["state"] == "ok")
    assert d.stop() == 0
    assert [r["job"] for r in status(f, state)] == ["a"]


def test_an_unavailable_store_degrades_then_recovers(tmp_path: Path, crond: list[Crond]) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the state directory's parent should be")
    state = blocker / "state"
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {every: 1s, command: 'true'}\n")
    live = tmp_path / "live.json"
    d = start(
        crond,
        str(f),
        "--state-dir",
        str(state),
        "--liveness-file",
        str(live),
        "--heartbeat",
        "200ms",
    )
    d.wait_for("state.unavailable")
    d.wait_for("job.finished", lambda e: e["job"] == "a")  # runs go on, unrecorded
    eventually(lambda: json.loads(live.read_text())["state"] == "degraded")
    blocker.unlink()  # the disk is back
    d.wait_for("state.opened")
    eventually(lambda: json.loads(live.read_text())["state"] == "ok")
    d.wait_for("job.finished", lambda e: e["job"] == "a")
    assert d.stop() == 0
    assert status(f, state)[0]["last_run"] is not None


def test_status_without_a_store_shows_next_fires(tmp_path: Path) -> None:
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {cron: '0 6 * * *', command: 'true'}\n")
    result = run_cli("status", str(f), "--state-dir", str(tmp_path / "never"))
    assert result.returncode == 1  # no history read: not "never ran"
    assert "no such file" in result.stderr
    assert result.stdout.splitlines()[1].split()[:3] == ["a", "0", "6"]
    off = run_cli("history", str(f), "--state-dir", "none")
    assert off.returncode == 1
    assert "no state store" in off.stderr


def test_status_reads_the_running_daemons_view_without_loading_the_file(
    tmp_path: Path, crond: list[Crond]
) -> None:
    """While the daemon runs on exactly these bytes, `crond status` answers from the
    store alone (no pydantic imported) — and says what loading the file would say."""
    state = tmp_path / "state"
    text = f"""\
        daemon:
          state_dir: {state}
        jobs:
          boot: {{cron: "@reboot", command: echo up}}
          hourly: {{cron: "0 * * * *", timezone: America/New_York, command: "true"}}
          paused: {{every: 1m, enabled: false, command: "true"}}
        """
    f = write(tmp_path / "s.yaml", text)
    d = start(crond, str(f))
    d.wait_for("job.finished", lambda e: e["job"] == "boot")
    quick = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "crond", "status", str(f), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "pydantic" not in quick.stderr  # the file was not loaded
    same_jobs = write(tmp_path / "other.yaml", textwrap.dedent(text) + "# other bytes\n")
    loaded = run_cli("status", str(same_jobs), "--json")  # the same jobs, loaded
    assert quick.stdout == loaded.stdout
    rows = [json.loads(line) for line in quick.stdout.splitlines()]
    assert [r["job"] for r in rows] == ["boot", "hourly", "paused"]
    assert rows[0]["last_run"]["outcome"] == "success"
    assert rows[1]["next_fire"]["local"].endswith("-05:00")
    assert rows[2]["next_fire"] is None

    write(f, text + "  added: {every: 1h, command: 'true'}\n")
    d.signal(signal.SIGHUP)
    d.wait_for("config.reloaded")

    def quick_status_shows_added() -> bool:  # from the daemon's republished view
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "crond", "status", str(f)],
            capture_output=True,
            text=True,
            check=True,
        )
        return "added" in done.stdout and "pydantic" not in done.stderr

    eventually(quick_status_shows_added)

    # A broken edit: the daemon refuses it and runs what it had; status says both.
    write(f, text + "  added: {every: 1h, command: 'true'}\n          broken: {every: 1x}\n")
    broken = run_cli("status", str(f))
    assert broken.returncode == 1
    assert 'jobs.broken.every: "1x" is not a duration' in broken.stderr
    assert "the running daemon keeps the jobs it loaded before" in broken.stderr
    assert [line.split()[0] for line in broken.stdout.splitlines()] == [
        "JOB", "boot", "hourly", "paused", "added"
    ]  # fmt: skip
    as_json = run_cli("status", str(f), "--json")
    assert as_json.returncode == 1
    assert [json.loads(line)["job"] for line in as_json.stdout.splitlines()] == [
        "boot", "hourly", "paused", "added"
    ]  # fmt: skip
    assert d.stop() == 0
    stopped = run_cli("status", str(f))  # no daemon: nothing to show but the errors
    assert stopped.returncode == 1
    assert stopped.stdout == ""
    assert "1 error" in stopped.stderr


def test_a_second_daemon_on_the_same_store_leaves_the_first_alone(
    tmp_path: Path, crond: list[Crond]
) -> None:
    state = tmp_path / "state"
    # The first daemon's run goes on until the test lets it end (not a `sleep` that a busy
    # machine could outlast before the status below).
    release = tmp_path / "release"
    hold = f"while [ ! -e {release} ]; do sleep 0.05; done"
    a = write(tmp_path / "a.yaml", f"jobs:\n  long: {{every: 1s, command: '{hold}'}}\n")
    # A socket of its own: one on the first's (the directory's) would refuse it at start
    # (tests/e2e/test_socket_taken.py).
    b = write(
        tmp_path / "b.yaml",
        f"daemon: {{control_socket: {tmp_path / 'b.sock'}}}\n"
        "jobs:\n  boot: {cron: '@reboot', command: 'true'}\n",
    )
    first = start(crond, str(a), "--state-dir", str(state))
    run = first.wait_for("job.started", lambda e: e["job"] == "long")
    live = tmp_path / "live.json"
    second = start(crond, str(b), "--state-dir", str(state), "--liveness-file", str(live))
    refused = second.wait_for("state.unavailable")
    assert "in use by another crond" in refused["error"]
    second.wait_for("job.finished", lambda e: e["job"] == "boot")  # it schedules all the same
    eventually(lambda: json.loads(live.read_text())["state"] == "degraded")
    assert second.stop() == 0
    assert "job.lost" not in second.names()
    rows = {r["job"]: r for r in status(a, state)}
    assert rows["long"]["running"] is True
    release.touch()
    first.wait_for("job.finished", lambda e: e["run_id"] == run["run_id"])
    assert first.stop() == 0


def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    from tests.e2e.harness import CROND  # noqa: PLC0415

    return subprocess.run(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", CROND, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_status_as_another_user_reads_or_says_why(crond: list[Crond]) -> None:
    """A monitoring user: a directory it may not enter gives a message, not a traceback;
    one it may read gives the history, even with no daemon running (no -shm to share)."""
    if as_nobody("--version").returncode != 0:  # a checkout in a private directory (CI's)
        pytest.skip("this checkout's crond cannot be run by uid 65534")
    with tempfile.TemporaryDirectory(prefix="crond-test-") as tmp:  # pytest's are 0700
        tmp_path = Path(tmp)
        tmp_path.chmod(0o755)
        status_as_another_user(tmp_path, crond)


def status_as_another_user(tmp_path: Path, crond: list[Crond]) -> None:
    state = tmp_path / "state"
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {every: 1s, command: 'true'}\n")
    f.chmod(0o644)
    d = start(crond, str(f), "--state-dir", str(state))
    d.wait_for("job.finished", lambda e: e["job"] == "a")
    assert d.stop() == 0
    state.chmod(0o700)
    denied = as_nobody("status", str(f), "--state-dir", str(state))
    assert denied.returncode == 1, denied.stderr
    assert "Permission denied" in denied.stderr
    assert "Traceback" not in denied.stderr
    history = as_nobody("history", str(f), "--state-dir", str(state))
    assert history.returncode == 1
    assert "Permission denied" in history.stderr
    assert "Traceback" not in history.stderr
    state.chmod(0o755)
    for p in state.iterdir():
        p.chmod(0o644)
    readable = as_nobody("status", str(f), "--state-dir", str(state), "--json")
    assert readable.returncode == 0, readable.stderr
    assert json.loads(readable.stdout)["last_run"]["outcome"] == "success"


def test_a_store_of_another_crond_version_is_refused_with_a_message(
    tmp_path: Path, crond: list[Crond]
) -> None:
    state = tmp_path / "state"
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {every: 1s, command: 'true'}\n")
    d = start(crond, str(f), "--state-dir", str(state))
    d.wait_for("job.finished", lambda e: e["job"] == "a")
    assert d.stop() == 0
    db = sqlite3.connect(state / "crond.sqlite3")
    with db:
        db.execute("UPDATE meta SET value = '9' WHERE key = 'schema'")
    db.close()
    again = start(crond, str(f), "--state-dir", str(state))
    refused = again.wait_for("state.unavailable")
    assert "schema 9" in refused["error"]
    again.wait_for("job.finished", lambda e: e["job"] == "a")
    assert again.stop() == 0
    history = run_cli("history", str(f), "--state-dir", str(state))
    assert history.returncode == 1
    assert "schema 9" in history.stderr
    assert "Traceback" not in history.stderr


def test_a_store_directory_removed_under_the_daemon_is_noticed_and_made_again(
    tmp_path: Path, crond: list[Crond]
) -> None:
    state = tmp_path / "state"
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {every: 1s, command: 'true'}\n")
    live = tmp_path / "live.json"
    d = start(
        crond,
        str(f),
        "--state-dir",
        str(state),
        "--liveness-file",
        str(live),
        "--heartbeat",
        "500ms",
    )
    d.wait_for("state.opened")
    d.wait_for("job.finished", lambda e: e["job"] == "a")
    subprocess.run(["rm", "-rf", str(state)], check=True)
    gone = d.wait_for("state.unavailable")
    assert "removed or replaced while the daemon was using it" in gone["error"]
    eventually(lambda: json.loads(live.read_text())["state"] == "degraded", what="degraded")
    opened = d.wait_for("state.opened")  # made again at the next heartbeat
    eventually(lambda: json.loads(live.read_text())["state"] == "ok", what="ok again")
    # A run started after that, into the new store (one started while it was gone, ended
    # late on a busy machine, has no row to end there).
    run = d.wait_for(
        "job.started", lambda e: e["job"] == "a" and d.events.index(e) > d.events.index(opened)
    )
    d.wait_for("job.finished", lambda e: e["run_id"] == run["run_id"])
    assert d.stop() == 0
    assert status(f, state)[0]["last_run"] is not None


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule for root's store needs root")
def test_as_root_the_daemon_refuses_a_store_directory_others_can_write(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o1777)
    f = write(tmp_path / "s.yaml", "jobs:\n  a: {every: 1s, command: 'true'}\n")
    result = run_cli("run", str(f), "--state-dir", str(state), "--log-format", "json")
    assert result.returncode == 1
    assert f"{state}: the directory {state} is writable by everyone (mode 1777)" in result.stderr
    assert f"(fix: chmod go-w {state}, or choose another directory)" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(state.iterdir()) == []
