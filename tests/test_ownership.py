"""The ownership rule for a schedules file when crond runs as root (crond/ownership.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crond.ownership import check_schedules_file

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown files to others")
NOBODY = 65534
NO_SUCH_UID = 54321  # assumed to have no passwd entry


@pytest.fixture
def schedules(tmp_path: Path) -> Path:
    """A root-owned, 0644 file in a root-owned, 0755 directory: what root's crond accepts."""
    directory = tmp_path / "etc"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    path = directory / "schedules.yaml"
    path.write_text("jobs:\n  a: {every: 1h, command: 'true'}\n")
    path.chmod(0o644)
    return path


def test_not_enforced_when_the_daemon_is_not_root(schedules: Path) -> None:
    schedules.chmod(0o666)
    assert check_schedules_file(schedules, euid=1000) is None


@as_root
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o400, 0o444])
def test_a_file_only_root_can_change_is_accepted(schedules: Path, mode: int) -> None:
    schedules.chmod(mode)
    assert check_schedules_file(schedules) is None


def test_a_missing_file_is_left_to_the_loader(tmp_path: Path) -> None:
    assert check_schedules_file(tmp_path / "none.yaml", euid=0) is None


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
    message = check_schedules_file(schedules)
    assert message == (
        f"{schedules}: writable by {who} (mode {mode:04o}); crond runs as root and runs only "
        f"a file that root alone can change (fix: chmod go-w {schedules})"
    )


@as_root
def test_a_file_owned_by_another_user_is_refused(schedules: Path) -> None:
    os.chown(schedules, NOBODY, 0)
    message = check_schedules_file(schedules)
    assert message is not None
    assert message.startswith(f"{schedules}: owned by nobody (uid {NOBODY}), not root;")
    assert message.endswith(f"(fix: chown root {schedules})")


@as_root
def test_an_owner_without_a_name_is_shown_by_uid(schedules: Path) -> None:
    os.chown(schedules, NO_SUCH_UID, 0)
    message = check_schedules_file(schedules)
    assert message is not None
    assert f"owned by uid {NO_SUCH_UID}, not root" in message


@as_root
def test_a_directory_owned_by_another_user_is_refused(schedules: Path) -> None:
    os.chown(schedules.parent, NOBODY, 0)
    message = check_schedules_file(schedules)
    assert message == (
        f"{schedules}: the directory {schedules.parent} is owned by nobody (uid {NOBODY}), "
        "who can replace the file; crond runs as root and runs only a file that root alone "
        f"can change (fix: chown root {schedules.parent}, or move the file)"
    )


@as_root
def test_any_directory_up_to_the_root_counts(schedules: Path) -> None:
    inner = schedules.parent / "a" / "b"
    inner.mkdir(parents=True)
    moved = schedules.rename(inner / schedules.name)
    os.chown(schedules.parent, NOBODY, 0)
    message = check_schedules_file(moved)
    assert message is not None
    assert f"the directory {schedules.parent} is owned by nobody" in message


@as_root
def test_a_world_writable_directory_without_sticky_bit_is_refused(schedules: Path) -> None:
    schedules.parent.chmod(0o777)
    message = check_schedules_file(schedules)
    assert message is not None
    assert (
        f"the directory {schedules.parent} is writable by everyone without the sticky bit "
        "(mode 0777), so anyone can replace the file" in message
    )
    assert message.endswith(f"(fix: chmod o-w {schedules.parent}, or move the file)")


@as_root
@pytest.mark.parametrize(
    "mode",
    [pytest.param(0o1777, id="sticky_like_tmp"), pytest.param(0o775, id="group_writable")],
)
def test_sticky_or_group_writable_directories_are_accepted(schedules: Path, mode: int) -> None:
    schedules.parent.chmod(mode)
    assert check_schedules_file(schedules) is None


@as_root
def test_a_symlink_is_judged_by_its_target_and_both_directories(tmp_path: Path) -> None:
    safe = tmp_path / "safe"
    open_dir = tmp_path / "open"
    for d in (safe, open_dir):
        d.mkdir()
        d.chmod(0o755)
    target = safe / "real.yaml"
    target.write_text("jobs: {}\n")
    target.chmod(0o644)
    link = open_dir / "schedules.yaml"
    link.symlink_to(target)
    assert check_schedules_file(link) is None
    open_dir.chmod(0o777)  # anyone could point the link elsewhere
    message = check_schedules_file(link)
    assert message is not None
    assert f"the directory {open_dir} is writable by everyone" in message
    open_dir.chmod(0o755)
    target.chmod(0o666)  # the target's own mode counts
    assert "writable by its group and others" in (check_schedules_file(link) or "")


@as_root
def test_a_relative_path_is_checked_from_the_working_directory(
    schedules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(schedules.parent)
    assert check_schedules_file(Path(schedules.name)) is None
    schedules.parent.chmod(0o777)
    message = check_schedules_file(Path(schedules.name))
    assert message is not None
    assert message.startswith(f"{schedules.name}: the directory {schedules.parent} ")


@as_root
def test_the_fix_quotes_a_path_for_the_shell(tmp_path: Path) -> None:
    path = tmp_path / "my schedules.yaml"
    path.write_text("jobs: {}\n")
    path.chmod(0o664)
    message = check_schedules_file(path)
    assert message is not None
    assert message.endswith(f"(fix: chmod go-w '{path}')")
    assert "\n" not in message
