"""systemd/crond-yaml.service: it verifies clean, scores "OK" or better with `systemd-analyze
security`, agrees with crond's defaults, and its own command lines (ExecStartPre,
ExecStart, ExecReload) drive the installed `crond` through a notify socket the way
systemd would. systemd is not PID 1 here, so the service manager's part (environment,
$MAINPID, the stop signal) is played by the test, from the values in the unit.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from crond.config import durations, model
from crond.daemon import liveness
from tests.e2e.harness import eventually

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "crond-yaml.service"
ROOT_DROPIN = REPO / "systemd" / "crond-root.conf"
SYSUSERS = REPO / "systemd" / "sysusers.d" / "crond.conf"
CROND = shutil.which("crond", path=str(Path(sys.executable).parent)) or "crond"
ANALYZE = shutil.which("systemd-analyze")
SYSUSERS_BIN = shutil.which("systemd-sysusers")

needs_analyze = pytest.mark.skipif(
    ANALYZE is None,
    reason="systemd-analyze is not installed (.ci/run installs it: apt-get install systemd)",
)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

GOOD = "jobs:\n  a: {cron: '@yearly', command: 'true'}\n"
BROKEN = "jobs:\n  a: {cron: '@yearly', comand: 'true'}\n"


# --- the unit file ---------------------------------------------------------------------


def directives(*paths: Path) -> list[tuple[str, str, str]]:
    """(section, key, value) of every assignment, in order, as systemd reads the files
    one after the other (a drop-in after its unit)."""
    found: list[tuple[str, str, str]] = []
    for path in paths:
        section = ""
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            assert not line.endswith("\\"), f"{path}: no continuation lines, please: {line}"
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            found.append((section, key.strip(), value.strip()))
    return found


def values(key: str, *paths: Path) -> list[str]:
    """Every value of `key` ([Service] or [Unit]); an empty assignment resets the list."""
    out: list[str] = []
    for _section, k, v in directives(*(paths or (UNIT,))):
        if k == key:
            out = [] if v == "" else [*out, v]
    return out


def value(key: str, *paths: Path) -> str:
    found = values(key, *paths)
    assert len(found) == 1, f"{key}: expected one value, got {found}"
    return found[0]


def seconds(span: str) -> float:
    return durations.parse_duration(span).total_seconds()


# --- systemd-analyze ---------------------------------------------------------------------


@pytest.fixture(params=["unit", "unit+root.conf"])
def unit_root(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A file system root holding the system's own units, crond-yaml.service installed as the
    docs say (with the root drop-in for the second variant), and every program its Exec
    lines name: `--root` lets systemd-analyze check the unit without touching the host."""
    root = tmp_path / "root"
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    shutil.copy(UNIT, units / "crond-yaml.service")
    if request.param == "unit+root.conf":
        (units / "crond-yaml.service.d").mkdir()
        shutil.copy(ROOT_DROPIN, units / "crond-yaml.service.d" / "root.conf")
    for key in ("ExecStartPre", "ExecStart", "ExecReload"):
        for line in values(key):
            program = root / shlex.split(line)[0].lstrip("/")
            program.parent.mkdir(parents=True, exist_ok=True)
            program.write_text("#!/bin/sh\n")
            program.chmod(0o755)
    return root


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    return subprocess.run([ANALYZE, *args], capture_output=True, text=True, timeout=50, check=False)


@needs_analyze
def test_unit_verifies_clean(unit_root: Path) -> None:
    result = analyze("verify", f"--root={unit_root}", "crond-yaml.service")
    # verify exits 0 on unknown keys and bad values, and only says so: demand silence.
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@needs_analyze
def test_security_exposure_is_ok_or_better(unit_root: Path) -> None:
    result = analyze("security", "--offline=true", f"--root={unit_root}", "crond-yaml.service")
    assert result.returncode == 0, result.stderr
    found = re.search(
        r"Overall exposure level for crond-yaml\.service: ([\d.]+) (\w+)", result.stdout
    )
    assert found, result.stdout
    # systemd's scale: PERFECT 0, SAFE < 1, OK < 5, MEDIUM < 7.5, EXPOSED, UNSAFE ...
    assert found[2] in ("PERFECT", "SAFE", "OK"), result.stdout


def test_unit_settings_that_crond_and_its_docs_rely_on() -> None:
    # A typo such as `ProtectSytem=` is caught by verify above; these are the choices
    # that crond's behaviour and docs/operations.md depend on.
    assert value("Type") == "notify"
    assert value("NotifyAccess") == "main"
    assert value("KillMode") == "mixed"
    assert value("Restart") == "on-failure"
    assert value("RuntimeDirectory") == Path(liveness.DEFAULT_PATH).parent.name
    assert value("StateDirectory") == "crond"
    assert value("User") == value("Group") == "crond"
    assert value("NoNewPrivileges") == "yes"
    assert value("ProtectSystem") == "strict"
    assert ("Service", "CapabilityBoundingSet", "") in directives(UNIT)  # no capabilities


def test_stop_timeout_outlasts_the_shutdown_drain() -> None:
    drain = model.Daemon().shutdown_timeout + model.Job.model_fields["kill_after"].default
    assert isinstance(drain, timedelta)
    assert seconds(value("TimeoutStopSec")) > drain.total_seconds()


def test_start_validates_then_runs_the_same_file_with_the_default_liveness_file() -> None:
    start = shlex.split(value("ExecStart"))
    assert start[1:3] == ["run", "/etc/crond/schedules.yaml"]
    assert start[start.index("--liveness-file") + 1] == liveness.DEFAULT_PATH
    assert shlex.split(value("ExecStartPre")) == [start[0], "validate", start[2]]
    assert [shlex.split(line) for line in values("ExecReload")] == [
        [start[0], "validate", start[2]],
        ["/bin/kill", "-HUP", "$MAINPID"],
    ]


def test_root_dropin_keeps_the_sandbox_and_adds_only_what_user_jobs_need() -> None:
    both = (UNIT, ROOT_DROPIN)
    assert values("User", *both) == values("Group", *both) == []  # root
    caps = set(value("CapabilityBoundingSet", *both).split())
    assert caps == {"CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_DAC_READ_SEARCH"}
    assert value("NoNewPrivileges", *both) == "yes"
    assert value("ProtectSystem", *both) == "strict"


@pytest.mark.skipif(SYSUSERS_BIN is None, reason="systemd-sysusers is not installed")
def test_sysusers_creates_the_units_user_with_the_state_directory_as_home(
    tmp_path: Path,
) -> None:
    assert SYSUSERS_BIN is not None
    etc = tmp_path / "etc"
    etc.mkdir()
    for name in ("passwd", "group", "shadow", "gshadow"):
        (etc / name).touch()
    result = subprocess.run(
        [SYSUSERS_BIN, f"--root={tmp_path}", str(SYSUSERS)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    user = next(line.split(":") for line in (etc / "passwd").read_text().splitlines() if line)
    assert user[0] == value("User")
    assert user[5] == f"/var/lib/{value('StateDirectory')}"
    assert user[6].endswith("nologin")
    assert int(user[2]) < 1000  # a system user
    group = (etc / "group").read_text().split(":")
    assert group[0] == value("Group")


# --- the unit's commands, as systemd runs them --------------------------------------------


@dataclass
class Service:
    """The unit's command lines with its paths moved under tmp_path, and a notify socket."""

    tmp: Path
    sock: socket.socket
    schedules: Path
    live: Path
    proc: subprocess.Popen[bytes] | None = None

    def argv(self, line: str) -> list[str]:
        moves = {
            "/usr/local/bin/crond": CROND,
            "/etc/crond/": f"{self.schedules.parent}/",
            "/run/crond/": f"{self.live.parent}/",
        }
        out = []
        for word in shlex.split(line):
            moved = word
            for old, new in moves.items():
                if word.startswith(old):
                    moved = new + word[len(old) :]
            if word == "$MAINPID":
                assert self.proc is not None
                moved = str(self.proc.pid)
            out.append(moved)
        assert all(w == CROND or not w.startswith("/usr/local") for w in out), out
        return out

    def run_all(self, key: str) -> list[subprocess.CompletedProcess[str]]:
        """Each line of `key` in turn, stopping at the first that fails, as systemd does."""
        done = []
        for line in values(key):
            done.append(
                subprocess.run(
                    self.argv(line), capture_output=True, text=True, timeout=30, check=False
                )
            )
            if done[-1].returncode != 0:
                break
        return done

    def start(self) -> subprocess.Popen[bytes]:
        # What systemd puts in the main process's environment for this unit. WATCHDOG_PID
        # must be the main process's own pid: a shell sets it, then execs crond.
        env = {
            **os.environ,
            "NOTIFY_SOCKET": str(self.tmp / "notify.sock"),
            "WATCHDOG_USEC": str(int(seconds(value("WatchdogSec")) * 1_000_000)),
            "RUNTIME_DIRECTORY": str(self.live.parent),
            "STATE_DIRECTORY": str(self.tmp / "state"),
        }
        with (self.tmp / "journal").open("wb") as journal:
            self.proc = subprocess.Popen(
                [
                    "/bin/sh",
                    "-c",
                    'WATCHDOG_PID=$$ exec "$@"',
                    "sh",
                    *self.argv(value("ExecStart")),
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=journal,
            )
        return self.proc

    def receive(self, until: str, timeout: float = 15.0) -> list[str]:
        """Datagrams received until one with `until` in it (inclusive)."""
        got: list[str] = []
        deadline = time.monotonic() + timeout
        while not got or until not in got[-1]:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                got.append(self.sock.recv(4096).decode())
            except TimeoutError:
                journal = (self.tmp / "journal").read_text(errors="replace")[-2000:]
                raise AssertionError(f"no {until} in {timeout}s; got {got}; {journal}") from None
        return got

    def pending(self) -> list[str]:
        got = []
        self.sock.settimeout(0)
        while True:
            try:
                got.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return got


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    schedules = tmp_path / "etc" / "schedules.yaml"
    schedules.parent.mkdir()
    schedules.write_text(GOOD)
    live = tmp_path / "run" / "liveness.json"
    live.parent.mkdir()  # RuntimeDirectory=
    (tmp_path / "state").mkdir()  # StateDirectory=
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify.sock"))
    svc = Service(tmp_path, sock, schedules, live)
    try:
        yield svc
    finally:
        if svc.proc is not None and svc.proc.poll() is None:
            svc.proc.kill()
            svc.proc.wait(10)
        sock.close()


def kinds(messages: list[str]) -> list[str]:
    """The state each datagram reports, in order (STATUS= and the like left out)."""
    wanted = ("READY=1", "WATCHDOG=1", "RELOADING=1", "STOPPING=1")
    return [field for m in messages for field in m.split("\n") if field in wanted]


def test_start_reload_stop_as_systemd_drives_them(service: Service) -> None:
    assert [r.returncode for r in service.run_all("ExecStartPre")] == [0]
    proc = service.start()
    got = service.receive("READY=1")
    got += service.receive("WATCHDOG=1")  # the loop's first beat, at once
    eventually(service.live.exists, what="the liveness file is written by the same beat")
    health = subprocess.run(
        [CROND, "health", "--liveness-file", str(service.live)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert health.returncode == 0, health.stderr

    assert [r.returncode for r in service.run_all("ExecReload")] == [0, 0]
    got += service.receive("RELOADING=1")
    got += service.receive("READY=1")

    proc.send_signal(signal.SIGTERM)  # KillMode=mixed: the main process alone
    got += service.receive("STOPPING=1")
    assert proc.wait(seconds(value("TimeoutStopSec"))) == 0
    got += service.pending()

    seen = kinds(got)
    first_ping = seen.index("WATCHDOG=1")
    later = [k for k in seen[first_ping + 1 :] if k != "WATCHDOG=1"]  # pings may come any time
    assert seen[:first_ping] == ["READY=1"], got
    assert later == ["RELOADING=1", "READY=1", "STOPPING=1"], got
    assert any("MONOTONIC_USEC=" in m for m in got if "RELOADING=1" in m)


def test_a_broken_file_fails_start_and_reload_and_never_reaches_the_daemon(
    service: Service,
) -> None:
    service.schedules.write_text(BROKEN)
    pre = service.run_all("ExecStartPre")
    assert [r.returncode for r in pre] == [1]
    assert "jobs.a.comand: unknown field" in pre[0].stderr

    service.schedules.write_text(GOOD)
    proc = service.start()
    service.receive("READY=1")
    service.schedules.write_text(BROKEN)
    reload = service.run_all("ExecReload")
    assert [r.returncode for r in reload] == [1]  # `systemctl reload` fails; no SIGHUP sent
    assert "unknown field" in reload[0].stderr
    assert proc.poll() is None
    assert "RELOADING=1" not in kinds(service.pending())
    proc.send_signal(signal.SIGTERM)
    service.receive("STOPPING=1")
    assert proc.wait(30) == 0


# --- the root drop-in's capabilities ------------------------------------------------------


@as_root
@pytest.mark.skipif(not shutil.which("setpriv"), reason="needs setpriv (util-linux)")
@pytest.mark.parametrize(
    "dropped",
    [
        pytest.param(None, id="all_of_them"),
        pytest.param("CAP_SETUID", id="without_setuid"),
        pytest.param("CAP_SETGID", id="without_setgid"),
        pytest.param("CAP_DAC_READ_SEARCH", id="without_dac_read_search"),
        pytest.param("CAP_KILL", id="without_kill"),
    ],
)
def test_root_dropin_capabilities_run_and_stop_another_users_job(
    tmp_path: Path, dropped: str | None
) -> None:
    """crond as root with exactly the drop-in's bounding set (and no new privileges) runs
    a job as `nobody` in nobody's 0700 workdir and stops it at its timeout; without any
    one of the capabilities, that fails."""
    caps = value("CapabilityBoundingSet", UNIT, ROOT_DROPIN).split()
    kept = [c for c in caps if c != dropped]
    workdir = tmp_path / "home"
    workdir.mkdir(mode=0o700)
    os.chown(workdir, 65534, 65534)
    tmp_path.chmod(0o755)
    schedules = tmp_path / "schedules.yaml"
    schedules.write_text(
        "jobs:\n"
        "  as-nobody:\n"
        "    every: 1h\n"
        "    user: nobody\n"
        f"    workdir: {workdir}\n"
        "    timeout: 1s\n"
        "    kill_after: 1s\n"
        "    command: 'id -u; pwd; exec sleep 4'\n"
    )
    bounding = ",".join(["-all", *(f"+{c.removeprefix('CAP_').lower()}" for c in kept)])
    result = subprocess.run(
        [
            *("setpriv", f"--bounding-set={bounding}", "--no-new-privs", "--"),
            *(CROND, "run-job", str(schedules), "as-nobody", "--log-format", "json"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    lines = [e["line"] for e in events if e["event"] == "job.output"]
    finished = next(e for e in events if e["event"] == "job.finished")
    if dropped in (None, "CAP_KILL"):
        assert lines == ["65534", str(workdir)], result.stderr
        assert result.returncode == 124, result.stderr  # timed out
        # Stopped at its timeout; without CAP_KILL crond cannot signal it, and the job
        # runs its 4 s out.
        stopped = finished["exit_code"] == -signal.SIGTERM and finished["duration_s"] < 3.5
        assert stopped is (dropped is None), finished
    else:
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("crond: "), lines  # the start failed, and says why
        assert finished["outcome"] == "failed", finished


def test_the_unit_cannot_shadow_the_system_cron() -> None:
    """On Fedora, RHEL, Amazon Linux and Alpine, `crond.service` is cronie's: installing a
    unit of that name would replace it and stop every system crontab."""
    assert not (REPO / "systemd" / "crond.service").exists()
    assert UNIT.name == "crond-yaml.service"
    names = re.findall(r"[\w.-]+\.service\b", (REPO / "docs" / "operations.md").read_text())
    assert "crond.service" in names  # named once, as cronie's, in the warning
    assert set(names) <= {"crond.service", "crond-yaml.service"}
    start = next(line for line in UNIT.read_text().splitlines() if line.startswith("ExecStart="))
    assert start.startswith("ExecStart=/usr/local/bin/crond ")  # never found through PATH
