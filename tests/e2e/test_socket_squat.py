"""No control socket where someone else could own the name (docs/control.md, "Who the
commands talk to"), with the real binary, as root, and a real second user (`nobody`):

- a root daemon refuses `daemon.control_socket` in a directory others can write, sticky
  or not: at start (exit 1), on reload (the old socket kept), and `crond validate` says so;
- root's commands refuse a socket `nobody` bound first, send it nothing and exit 2; one
  in a directory nobody owns alone is that user's daemon's, talked to, and whatever it
  answers is printed escaped.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import Crond, run_cli

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (and a second user)")
NOBODY = 65534
FAR = "every: 24h"
DIR_ONLY = "crond runs as root and writes only where root alone can"
Place = Callable[[Path], Path]
ELSEWHERE = "set daemon.control_socket to a path in a directory only root can write"


@pytest.fixture
def shared() -> Iterator[Path]:
    """A fresh directory in /tmp that another user may reach (pytest's are root's 0700)."""
    with tempfile.TemporaryDirectory(prefix="crond-squat-") as name:
        place = Path(name)
        place.chmod(0o755)
        yield place


def schedules(path: Path, socket: Path) -> Path:
    jobs = f"jobs:\n  job: {{{FAR}, command: 'true'}}\n"
    path.write_text(f"daemon:\n  control_socket: {socket}\n{jobs}")
    return path


def sticky(place: Path) -> Path:
    directory = place / "sticky"
    directory.mkdir()
    directory.chmod(0o1777)
    return directory


def refused_at_start(f: Path, socket: Path) -> str:
    return (
        f"{f}: daemon.control_socket: {socket}: the directory {socket.parent} is writable by "
        f"everyone (mode 1777), who can replace what is in it; {DIR_ONLY} (fix: {ELSEWHERE})"
    )


def test_a_root_daemon_refuses_a_socket_in_a_sticky_directory(
    shared: Path, tmp_path: Path, crond: list[Crond]
) -> None:
    socket = sticky(shared) / "crond.sock"
    f = schedules(tmp_path / "s.yaml", socket)
    daemon = Crond([str(f), "--state-dir", str(tmp_path / "state")])
    crond.append(daemon)
    assert daemon.exited() == 1
    assert [line.strip() for line in daemon.other] == [refused_at_start(f, socket)]
    (failed,) = daemon.named("config.load_failed")
    assert failed["errors"] == [refused_at_start(f, socket)]
    assert not socket.exists()
    checked = run_cli("validate", str(f))
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [refused_at_start(f, socket), f"{f}: 1 error"]


def test_a_root_daemon_listens_in_a_directory_of_roots_and_keeps_it_on_a_bad_reload(
    shared: Path, tmp_path: Path, crond: list[Crond]
) -> None:
    own = shared / "root"
    own.mkdir(mode=0o755)
    socket = own / "crond.sock"
    f = schedules(tmp_path / "s.yaml", socket)
    daemon = Crond([str(f), "--state-dir", str(tmp_path / "state")])
    crond.append(daemon)
    daemon.wait_for("control.listening")
    asked = run_cli("ps", str(f))  # root's command, root's daemon: talked to
    assert (asked.returncode, asked.stderr) == (0, "nothing running\n"), asked.stderr
    elsewhere = sticky(shared) / "crond.sock"
    schedules(f, elsewhere)
    daemon.signal(signal.SIGHUP)
    failed = daemon.wait_for("config.reload_failed")
    assert failed["errors"] == [refused_at_start(f, elsewhere)]
    paused = run_cli("pause", str(f), "job", "--socket", str(socket))
    assert (paused.returncode, paused.stdout) == (0, "paused job until resumed\n"), paused.stderr
    assert not elsewhere.exists()
    assert daemon.stop() == 0


class Impostor:
    """`nobody` listening at `socket`: it answers every request that all went well, with
    escape sequences in it, and says how many bytes each caller sent (one line each)."""

    ANSWER = (
        '{"ok": true, "result": {"jobs": ["job\\u001b[2J\\u001b]0;owned\\u0007"], "until": null}}\n'
    )
    CODE = """
import os, socket, sys
path, answer = sys.argv[1], sys.argv[2].encode()
os.setgroups([]); os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path); s.listen(8)
print("ready", flush=True)
while True:
    conn, _ = s.accept()
    got = b""
    try:
        conn.sendall(answer)
        while chunk := conn.recv(65536):
            got += chunk
    except OSError:
        pass
    conn.close()
    print(len(got), flush=True)
"""

    def __init__(self, socket: Path) -> None:
        python = shutil.which("python3", path="/usr/bin:/bin")  # not the venv's: under /root
        if python is None:
            pytest.skip("no system python3 for another user to run")
        self.proc = subprocess.Popen(
            [python, "-c", self.CODE, str(socket), self.ANSWER],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == "ready\n"

    def received(self) -> int:
        """The bytes the last caller sent (once it hung up)."""
        assert self.proc.stdout is not None
        return int(self.proc.stdout.readline())

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def impostors() -> Iterator[list[Impostor]]:
    started: list[Impostor] = []
    yield started
    for one in started:
        one.stop()


def nobodys(place: Path) -> Path:
    directory = place / "nobodys"
    directory.mkdir(mode=0o755)
    os.chown(directory, NOBODY, NOBODY)
    return directory


@pytest.mark.parametrize(
    ("where", "why"),
    [
        pytest.param(sticky, "is not a directory its owner alone can write", id="sticky"),
        pytest.param(
            lambda place: nobodys(_open(place)),
            "is not a directory its owner alone can write",
            id="its_own_under_one_anyone_can_write",
        ),
        pytest.param(
            lambda place: _group_writable(nobodys(place)),
            "is not a directory its owner alone can write",
            id="its_own_group_writable",
        ),
    ],
)
def test_root_refuses_a_socket_someone_else_bound_first(
    shared: Path, tmp_path: Path, impostors: list[Impostor], where: Place, why: str
) -> None:
    directory = where(shared)
    socket = directory / "crond.sock"
    impostor = Impostor(socket)
    impostors.append(impostor)
    f = schedules(tmp_path / "s.yaml", socket)
    for args in (["--socket", str(socket)], []):  # named, or found from the file
        paused = run_cli("pause", str(f), "job", *args)
        assert impostor.received() == 0  # nothing was sent
        assert paused.returncode == 2
        assert paused.stdout == ""
        assert "\x1b" not in paused.stderr
        assert paused.stderr == (
            f"crond: control socket {socket} is not to be trusted: owned by nobody (uid "
            f"{NOBODY}), not root, not you (root (uid 0)), and {directory} {why}; nothing was "
            "sent to it (fix: if it is not your daemon's, remove it and restart the daemon; "
            "to steer another user's daemon, run the command as that user)\n"
        )


def test_a_socket_in_a_directory_its_user_alone_owns_is_that_users_and_shown_escaped(
    shared: Path, tmp_path: Path, impostors: list[Impostor]
) -> None:
    socket = nobodys(shared) / "crond.sock"
    impostor = Impostor(socket)
    impostors.append(impostor)
    paused = run_cli("pause", str(tmp_path / "s.yaml"), "job", "--socket", str(socket))
    assert impostor.received() > 0
    assert (paused.returncode, paused.stderr) == (0, "")
    assert "\x1b" not in paused.stdout
    assert paused.stdout == "paused job\\x1b[2J\\x1b]0;owned\\x07 until resumed\n"


def _open(place: Path) -> Path:
    """A directory anyone can write in, without the sticky bit."""
    directory = place / "open"
    directory.mkdir()
    directory.chmod(0o777)
    return directory


def _group_writable(directory: Path) -> Path:
    directory.chmod(0o775)
    return directory
