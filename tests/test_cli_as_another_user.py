"""The commands as a user other than root, for real: uid 65534 (`nobody`), whose reads of
directories it may not enter fail with EACCES, as a monitoring or operator account's do.

The child starts as root, since its interpreter and packages may be where only root can
go (a venv under /root, a clone in a 0700 directory, as in CI); it imports all of crond,
then drops to uid and gid 65534 with no other groups, and runs the command line in the
same process: everything the command reads after that, it reads as nobody. The system
daemon's directory, /var/lib/crond, is stood in for by one of the test's (no test touches
the real one); the user's own default place is nobody's (`~/.local/state/crond` under
HOME=/nonexistent, which is not there).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

NOBODY = 65534
_CHILD = r"""
import importlib, os, pkgutil, sys
from pathlib import Path
import crond
for info in pkgutil.walk_packages(crond.__path__, "crond."):
    if not info.name.endswith("__main__"):
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional extra (psycopg, apprise) not installed
            pass
import grp, pwd  # the messages about permissions use them
from crond.cli import main
from crond.store import locate
locate.SYSTEM_DIR = Path(sys.argv[1])
os.setgroups([])
os.setgid(65534)
os.setuid(65534)


# No import from here on: it would read a file where only root may (CI's checkout), and
# pass here only because this checkout is readable.
class NothingMore:
    def find_spec(self, name, path=None, target=None):
        raise ImportError(f"{name} imported after dropping to nobody")


sys.meta_path.insert(0, NothingMore())
main(sys.argv[2:], prog_name="crond")
"""

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to become nobody)")


def as_nobody(system: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """`crond ARGS` run as nobody, with `system` as the system daemon's directory."""
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(system), *map(str, args)],
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
        cwd=system.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory nobody may enter and read (pytest's own are root's, 0700), with a
    schedules file in it."""
    with tempfile.TemporaryDirectory(prefix="crond-test-") as name:
        directory = Path(name)
        directory.chmod(0o755)
        schedules = directory / "s.yaml"
        schedules.write_text("jobs:\n  a: {every: 1h, command: 'true'}\n")
        schedules.chmod(0o644)
        yield directory


@pytest.fixture
def system(place: Path) -> Path:
    """The system daemon's directory as crond makes it when root runs it: root's, 0700."""
    directory = place / "system"
    directory.mkdir(mode=0o700)
    return directory


@pytest.mark.parametrize(
    "args", [("ps",), ("trigger", "a"), ("pause", "a")], ids=["ps", "trigger", "pause"]
)
def test_steering_says_no_daemon_when_the_system_directory_is_closed(
    system: Path, place: Path, args: tuple[str, ...]
) -> None:
    schedules = place / "s.yaml"
    done = as_nobody(system, args[0], schedules, *args[1:])
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"crond: no crond is running for {schedules} (no socket at "
        f"/nonexistent/.local/state/crond/crond.sock; the system daemon's directory {system} "
        "is not readable by you; if it was started with --state-dir, give the same "
        "--state-dir, or --socket)\n"
    )


@pytest.mark.parametrize("command", ["status", "history"])
def test_reading_says_the_system_directory_is_closed(
    system: Path, place: Path, command: str
) -> None:
    done = as_nobody(system, command, place / "s.yaml")
    assert done.returncode == 1
    assert done.stderr == (
        "crond: /nonexistent/.local/state/crond/crond.sqlite3: no such file (has the daemon "
        f"run with this state_dir?); the system daemon's directory {system} is not readable "
        "by you (to let a group in, see docs/control.md 'Letting operators use it')\n"
    )
    if command == "status":  # the file's jobs all the same, with no history
        assert done.stdout.splitlines()[1].split()[:4] == ["a", "every", "1h", "-"]


def _listening(path: Path, gid: int) -> socket.socket:
    """A socket listening at `path`, root's and the group `gid`'s, mode 0660 (as the
    daemon makes its control socket)."""
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.listen()
    path.chmod(0o660)
    os.chown(path, 0, gid)
    return sock


ONLY_ROOT = "only root may steer this crond; to let a group in, see docs/control.md " + (
    "'Letting operators use it'"
)


@pytest.mark.parametrize(
    ("directory_mode", "gid", "who"),
    [
        pytest.param(0o755, 0, ONLY_ROOT, id="group_root"),
        pytest.param(0o700, 1, ONLY_ROOT, id="directory_closed_to_the_group"),
        pytest.param(0o750, 0, ONLY_ROOT, id="directory_of_group_root"),
        pytest.param(0o750, 1, "group", id="a_group_that_gets_in"),
    ],
)
def test_a_refused_user_is_told_who_may_and_never_to_join_root(
    system: Path, place: Path, directory_mode: int, gid: int, who: str
) -> None:
    state = place / "st"
    state.mkdir()
    os.chown(state, 0, gid)
    with _listening(state / "crond.sock", gid):
        state.chmod(directory_mode)
        done = as_nobody(system, "ps", place / "s.yaml", "--state-dir", state)
    assert done.returncode == 2
    if who == "group":
        import grp  # noqa: PLC0415  (the name of gid 1 differs between systems)

        try:
            name = grp.getgrgid(1).gr_name
        except KeyError:
            name = "gid 1"
        who = (
            f"only root and the group {name} may steer this crond (ask to be added to group {name})"
        )
    assert done.stderr == f"crond: permission denied connecting to {state / 'crond.sock'}: {who}\n"


@pytest.mark.parametrize("command", ["status", "history"])
def test_a_state_dir_it_may_not_read_exits_1(system: Path, place: Path, command: str) -> None:
    """A monitoring script must tell "never ran" from "could not look"."""
    state = place / "st"
    state.mkdir(mode=0o700)
    done = as_nobody(system, command, place / "s.yaml", "--state-dir", state)
    assert done.returncode == 1
    assert done.stderr == f"crond: {state / 'crond.sqlite3'}: Permission denied\n"
