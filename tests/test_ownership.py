"""What root may trust (crond/ownership.py): the schedules file it reads, reached one
component at a time, and the directories it writes into. Real files, real symlinks, and
a real second user (`nobody`) where the tests run as root."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from crond.ownership import (
    MAX_BYTES,
    FileRefused,
    directory_problem,
    keeper,
    open_directory,
    read_schedules_file,
    socket_problem,
)

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown files to others")
NOBODY = 65534
NO_SUCH_UID = 54321  # assumed to have no passwd entry
ROOT_ONLY = "crond runs as root and runs only a file that root alone can change"
DIR_ONLY = "crond runs as root and writes only where root alone can"
TEXT = "jobs:\n  a: {every: 1h, command: 'true'}\n"


@pytest.fixture
def schedules(tmp_path: Path) -> Path:
    """A root-owned, 0644 file in a root-owned, 0755 directory: what root's crond accepts."""
    directory = tmp_path / "etc"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    path = directory / "schedules.yaml"
    path.write_text(TEXT)
    path.chmod(0o644)
    return path


def refusal(path: Path, **kwargs: bool | int) -> str:
    with pytest.raises(FileRefused) as caught:
        read_schedules_file(path, **kwargs)  # type: ignore[arg-type]
    assert str(caught.value) == f"{path}: {caught.value.message}"
    return caught.value.message


def test_not_enforced_when_the_daemon_is_not_root(schedules: Path) -> None:
    schedules.chmod(0o666)
    assert read_schedules_file(schedules, euid=1000) == TEXT.encode()
    assert read_schedules_file(schedules, enforce=False) == TEXT.encode()


@as_root
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o400, 0o444])
def test_a_file_only_root_can_change_is_read(schedules: Path, mode: int) -> None:
    schedules.chmod(mode)
    assert read_schedules_file(schedules) == TEXT.encode()


@pytest.mark.parametrize("euid", [0, 1000], ids=["root", "user"])
def test_a_missing_file_or_a_directory_is_said_plainly(tmp_path: Path, euid: int) -> None:
    assert refusal(tmp_path / "none.yaml", euid=euid) == "no such file"
    assert refusal(tmp_path, euid=euid) == "is a directory, not a file"
    assert refusal(tmp_path / "none" / "x.yaml", euid=euid) == "no such file"


@pytest.mark.parametrize("euid", [0, 1000], ids=["root", "user"])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, euid: int) -> None:
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo, 0o600)
    assert refusal(fifo, euid=euid).startswith("not a regular file")


def test_a_file_too_large_to_be_a_schedules_file_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:
        fh.truncate(MAX_BYTES + 1)  # sparse: costs no disk
    assert refusal(big, euid=1000).startswith(f"too large ({MAX_BYTES + 1:,} bytes;")


@as_root
@pytest.mark.parametrize(
    ("mode", "who"),
    [
        pytest.param(0o664, "its group", id="group_writable"),
        pytest.param(0o646, "others", id="world_writable"),
        pytest.param(0o666, "its group and others", id="both"),
        pytest.param(0o620, "its group", id="group_write_only"),
    ],
)
def test_a_file_writable_by_group_or_others_is_refused(
    schedules: Path, mode: int, who: str
) -> None:
    schedules.chmod(mode)
    assert refusal(schedules) == (
        f"writable by {who} (mode {mode:04o}); {ROOT_ONLY} (fix: chmod go-w {schedules})"
    )


@as_root
def test_a_file_owned_by_another_user_is_refused(schedules: Path) -> None:
    os.chown(schedules, NOBODY, 0)
    assert refusal(schedules) == (
        f"owned by nobody (uid {NOBODY}), not root; {ROOT_ONLY} (fix: chown root {schedules})"
    )
    os.chown(schedules, NO_SUCH_UID, 0)
    assert f"owned by uid {NO_SUCH_UID}, not root" in refusal(schedules)


@as_root
def test_a_directory_owned_by_another_user_is_refused(schedules: Path) -> None:
    os.chown(schedules.parent, NOBODY, 0)
    assert refusal(schedules) == (
        f"the directory {schedules.parent} is owned by nobody (uid {NOBODY}), who can "
        f"replace what is in it; {ROOT_ONLY} (fix: chown root {schedules.parent}, or move "
        "the file)"
    )


@as_root
def test_any_directory_up_to_the_root_counts(schedules: Path) -> None:
    inner = schedules.parent / "a" / "b"
    inner.mkdir(parents=True)
    moved = schedules.rename(inner / schedules.name)
    os.chown(schedules.parent, NOBODY, 0)
    assert f"the directory {schedules.parent} is owned by nobody" in refusal(moved)


@as_root
@pytest.mark.parametrize(
    ("mode", "gid", "who"),
    [
        pytest.param(0o777, 0, "everyone without the sticky bit (mode 0777)", id="everyone"),
        pytest.param(0o775, NOBODY, f"the group nogroup (gid {NOBODY})", id="other_group"),
    ],
)
def test_a_directory_others_can_write_is_refused(
    schedules: Path, mode: int, gid: int, who: str
) -> None:
    os.chown(schedules.parent, 0, gid)
    schedules.parent.chmod(mode)
    message = refusal(schedules)
    assert message.startswith(f"the directory {schedules.parent} is writable by {who}")
    assert message.endswith(f"(fix: chmod go-w {schedules.parent}, or move the file)")


@as_root
def test_a_sticky_directory_is_accepted_a_root_group_writable_one_is_not(
    schedules: Path,
) -> None:
    """Group write is refused whatever the group: with a POSIX ACL the group bits are
    the ACL's mask, and `0775 root:root` may let any user the ACL names write."""
    os.chown(schedules.parent, 0, 0)
    schedules.parent.chmod(0o1777)
    assert read_schedules_file(schedules) == TEXT.encode()
    schedules.parent.chmod(0o775)
    assert "is writable by the group root (gid 0)" in refusal(schedules)


@as_root
def test_a_symlink_is_judged_by_every_directory_its_chain_passes(tmp_path: Path) -> None:
    safe, open_dir = tmp_path / "safe", tmp_path / "open"
    for d in (safe, open_dir):
        d.mkdir(mode=0o755)
    target = safe / "real.yaml"
    target.write_text(TEXT)
    target.chmod(0o644)
    link = open_dir / "schedules.yaml"
    link.symlink_to(target)
    assert read_schedules_file(link) == TEXT.encode()
    open_dir.chmod(0o777)  # anyone could point the link elsewhere
    assert f"the directory {open_dir} is writable by everyone" in refusal(link)
    open_dir.chmod(0o755)
    target.chmod(0o666)  # the target's own mode counts
    assert "writable by its group and others" in refusal(link)


@as_root
def test_a_link_in_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    """The hole that was: root's link -> a link in a user's directory -> root's file.
    Neither the given path's parents nor the resolved path's pass through the user's
    directory, yet the user decides what root reads."""
    real = tmp_path / "real.yaml"
    real.write_text(TEXT)
    userdir = tmp_path / "userdir"
    userdir.mkdir(mode=0o755)
    os.chown(userdir, NOBODY, NOBODY)
    (userdir / "l2").symlink_to(real)
    chain = tmp_path / "chain.yaml"
    chain.symlink_to(userdir / "l2")
    assert f"the directory {userdir} is owned by nobody" in refusal(chain)


@as_root
def test_a_link_owned_by_another_user_in_a_sticky_directory_is_refused(tmp_path: Path) -> None:
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    real = tmp_path / "real.yaml"
    real.write_text(TEXT)
    link = sticky / "s.yaml"
    link.symlink_to(real)
    assert read_schedules_file(link) == TEXT.encode()  # root's own link: only root moves it
    os.lchown(link, NOBODY, NOBODY)
    message = refusal(link)
    assert f"the symbolic link {link} on the way to it is owned by nobody" in message
    assert f"(fix: chown -h root {link}, or name the file by its real path)" in message


@as_root
def test_relative_paths_links_and_dotdot_are_walked_from_the_working_directory(
    schedules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (schedules.parent / "sub").mkdir(mode=0o755)
    (schedules.parent / "rel.yaml").symlink_to(f"sub/../{schedules.name}")
    monkeypatch.chdir(schedules.parent)
    assert read_schedules_file(Path(schedules.name)) == TEXT.encode()
    assert read_schedules_file(Path("rel.yaml")) == TEXT.encode()
    schedules.parent.chmod(0o777)
    assert refusal(Path(schedules.name)).startswith(f"the directory {schedules.parent} ")


@as_root
def test_a_loop_of_links_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert refusal(tmp_path / "a") == "too many levels of symbolic links"


@as_root
def test_the_fix_quotes_a_path_for_the_shell(tmp_path: Path) -> None:
    path = tmp_path / "my schedules.yaml"
    path.write_text(TEXT)
    path.chmod(0o664)
    message = refusal(path)
    assert message.endswith(f"(fix: chmod go-w '{path}')")
    assert "\n" not in message


@pytest.fixture
def reachable_tmp() -> Iterator[Path]:
    """A directory of root's that `nobody` can reach (pytest's own are root's, 0700)."""
    path = Path(tempfile.mkdtemp(prefix="crond-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


# The user's side, in sh (the test's own Python may live where `nobody` cannot go).
_SWAPPER = """
echo ready
while :; do
    ln -sfn "$3" "$1.new" && mv -Tf "$1.new" "$1"
    ln -sfn "$2" "$1.new" && mv -Tf "$1.new" "$1"
done
"""


@as_root
def test_a_user_swapping_a_link_on_the_way_never_gets_root_to_read_their_file(
    reachable_tmp: Path,
) -> None:
    """The attack for real: `nobody` swaps a link in its own directory between root's
    file and its own, as fast as it can, while root reads through the chain. Every read
    is refused, and not one returns the user's bytes."""
    tmp_path = reachable_tmp
    real = tmp_path / "real.yaml"
    real.write_text(TEXT)
    userdir = tmp_path / "userdir"
    userdir.mkdir(mode=0o755)
    os.chown(userdir, NOBODY, NOBODY)
    evil = userdir / "evil.yaml"
    evil.write_text("jobs:\n  pwn: {every: 1s, command: 'id -u'}\n")
    os.chown(evil, NOBODY, NOBODY)
    (userdir / "l2").symlink_to(real)
    os.lchown(userdir / "l2", NOBODY, NOBODY)
    chain = tmp_path / "chain.yaml"
    chain.symlink_to(userdir / "l2")
    swapper = subprocess.Popen(
        ["/bin/sh", "-c", _SWAPPER, "swap", str(userdir / "l2"), str(real), str(evil)],
        cwd=userdir,
        user=NOBODY,
        group=NOBODY,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None
        assert swapper.stdout.readline() == "ready\n"
        seen: set[Path] = set()
        reads = 0
        while (reads < 300 or len(seen) < 2) and reads < 1_000_000:  # until the link moved
            seen.add((userdir / "l2").readlink())
            reads += 1
            with pytest.raises(FileRefused) as caught:
                read_schedules_file(chain)
            assert "owned by nobody" in caught.value.message
        assert seen == {real, evil}
    finally:
        swapper.kill()
        swapper.communicate()


# --- directories crond writes into --------------------------------------------------


def test_directories_are_not_judged_when_the_daemon_is_not_root(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    assert directory_problem(tmp_path, euid=1000) is None


@as_root
def test_a_private_directory_of_roots_is_accepted(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    assert directory_problem(state) is None
    assert directory_problem(tmp_path / "missing" / "state") is None  # root will make it


@as_root
@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o770, 0o720])
def test_a_directory_others_can_write_into_is_refused(tmp_path: Path, mode: int) -> None:
    """Even sticky: anyone could plant `crond.lock` or the database as a link first."""
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(mode)
    message = directory_problem(state)
    assert message is not None
    assert message.startswith(f"{state}: the directory {state} is writable by ")
    assert "crond runs as root and writes only where root alone can" in message
    assert message.endswith(f"(fix: chmod go-w {state}, or choose another directory)")


@as_root
def test_a_directory_of_another_user_or_below_one_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    below = theirs / "state"
    below.mkdir(mode=0o700)
    os.chown(below, 0, 0)
    for path in (theirs, below):
        message = directory_problem(path)
        assert message is not None
        assert f"the directory {theirs} is owned by nobody" in message
    assert directory_problem(theirs / "missing") is not None  # nobody could make it first


@as_root
def test_what_cannot_be_reached_or_made_is_left_to_the_store_to_say(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    assert directory_problem(tmp_path / "f") is None
    assert directory_problem(tmp_path / "f" / "state") is None


# --- the control socket's directory -------------------------------------------------

ELSEWHERE = "set daemon.control_socket to a path in a directory only root can write"


@as_root
@pytest.mark.parametrize(
    ("mode", "fix"),
    [
        pytest.param(0o1777, ELSEWHERE, id="shared_sticky"),  # /tmp: not to be closed
        pytest.param(0o770, "chmod go-w {where}, or " + ELSEWHERE, id="group"),
    ],
)
def test_a_socket_directory_others_can_write_is_refused_even_sticky(
    tmp_path: Path, mode: int, fix: str
) -> None:
    where = tmp_path / "run"
    where.mkdir()
    where.chmod(mode)
    said = socket_problem(where / "crond.sock")
    assert said is not None
    assert said.startswith(f"{where / 'crond.sock'}: the directory {where} is writable by ")
    assert said.endswith(f"; {DIR_ONLY} (fix: {fix.format(where=where)})")
    with pytest.raises(PermissionError) as caught:
        open_directory(where, alone=True)
    assert str(caught.value.strerror) == said.split(": ", 1)[1]
    if mode & 0o1000:  # the liveness file's random names: fine in a sticky one
        os.close(open_directory(where))
    assert socket_problem(where / "crond.sock", euid=1000) is None


@as_root
def test_a_socket_directory_of_roots_alone_is_accepted(tmp_path: Path) -> None:
    where = tmp_path / "run"
    where.mkdir(mode=0o750)
    assert socket_problem(where / "crond.sock") is None
    assert socket_problem(tmp_path / "missing" / "crond.sock") is None  # root makes it
    os.close(open_directory(where, alone=True))


@as_root
def test_the_keeper_is_the_owner_of_a_directory_only_it_can_write(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o750)
    os.chown(theirs, NOBODY, NOBODY)
    assert keeper(theirs) == NOBODY
    assert keeper(tmp_path) == 0
    theirs.chmod(0o1770)
    assert keeper(theirs) is None  # its group may put names there too
    theirs.chmod(0o750)
    tmp_path.chmod(0o1777)
    assert keeper(theirs) == NOBODY  # a sticky directory above: theirs is theirs alone
    tmp_path.chmod(0o777)
    assert keeper(theirs) is None  # anyone could have swapped it
    assert keeper(tmp_path / "missing") is None
