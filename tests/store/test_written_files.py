"""Files crond writes, against links planted by someone else: the liveness file, the
store's lock and database, and a store whose directory disappears (crond/daemon/liveness.py,
crond/store/files.py). Real files and real symlinks; as root where the rule is root's."""

from __future__ import annotations

import json
import os
import secrets
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from crond.daemon import liveness
from crond.store import sqlite as state
from crond.store.base import StateError

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the rule for root's files needs root")
SECRET = b"root's own, not to be overwritten\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


@pytest.fixture
def sticky(tmp_path: Path) -> Path:
    """A directory like /tmp: anyone may create names in it."""
    path = tmp_path / "tmp"
    path.mkdir()
    path.chmod(0o1777)
    return path


def test_liveness_replaces_a_link_planted_at_its_name_without_following_it(
    sticky: Path, victim: Path
) -> None:
    live = sticky / "liveness.json"
    live.symlink_to(victim)
    liveness.write(live, {"pid": 1})
    assert victim.read_bytes() == SECRET
    assert not live.is_symlink()
    assert json.loads(live.read_text()) == {"pid": 1}
    assert sorted(p.name for p in sticky.iterdir()) == ["liveness.json"]  # no temporary left


def test_liveness_never_writes_through_a_link_at_a_temporary_name(
    sticky: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The names it would use cannot be guessed; and were one taken, by chance or by a
    planted link, it takes another instead of opening that one."""
    live = sticky / "liveness.json"
    taken = iter(["planted", "planted", "free"])
    monkeypatch.setattr(secrets, "token_hex", lambda _n: next(taken))
    (sticky / ".liveness.json.planted.tmp").symlink_to(victim)
    liveness.write(live, {"pid": 2})
    assert victim.read_bytes() == SECRET
    assert json.loads(live.read_text()) == {"pid": 2}
    assert (sticky / ".liveness.json.planted.tmp").is_symlink()  # left as it was


def test_liveness_names_are_random(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names: list[str] = []
    real = os.open

    def spy(
        path: str | os.PathLike[str], flags: int, mode: int = 0o777, *, dir_fd: int | None = None
    ) -> int:
        if flags & os.O_CREAT:  # the temporary file (the other opens: the directory, ...)
            names.append(Path(path).name)
            assert flags & os.O_EXCL
            assert flags & os.O_NOFOLLOW
            assert dir_fd is not None  # relative to the directory opened once
        return real(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", spy)
    for n in range(3):
        liveness.write(tmp_path / "live.json", {"n": n})
    assert len(set(names)) == 3
    assert all(str(os.getpid()) not in name for name in names)


def test_health_does_not_hang_on_a_fifo_or_read_a_huge_file(tmp_path: Path) -> None:
    fifo = tmp_path / "live.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = liveness.check(fifo, datetime.now(UTC), timedelta(seconds=30))
    assert not result.ok
    assert "unreadable liveness file" in result.message
    assert time.monotonic() - started < 1
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(1 << 30)  # sparse
    assert not liveness.check(big, datetime.now(UTC), None).ok


# --- the state store ------------------------------------------------------------------


@as_root
@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o775])
def test_as_root_a_store_directory_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    directory = tmp_path / "state"
    directory.mkdir()
    os.chown(directory, 0, 65534)
    directory.chmod(mode)
    for open_it in (state.SqliteStore, state.Reader):
        with pytest.raises(StateError) as caught:
            open_it(directory)
        message = str(caught.value)
        assert message.startswith(f"{directory}: the directory {directory} is writable by ")
        assert f"(fix: chmod go-w {directory}, or choose another directory)" in message
    assert list(directory.iterdir()) == []  # nothing was created there


def test_the_lock_is_never_opened_through_a_link(tmp_path: Path, victim: Path) -> None:
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    (directory / state.LOCK_NAME).symlink_to(victim)
    with pytest.raises(StateError, match="symbolic links"):
        state.SqliteStore(directory)
    assert victim.read_bytes() == SECRET


def test_a_store_whose_directory_is_removed_says_so(tmp_path: Path) -> None:
    directory = tmp_path / "state"
    store = state.SqliteStore(directory)
    try:
        store.check_in_place()  # in place: nothing to say
        for name in list(directory.iterdir()):
            name.unlink()
        directory.rmdir()
        with pytest.raises(StateError, match="removed or replaced") as caught:
            store.check_in_place()
        assert caught.value.corrupt  # the daemon reopens it, as for a damaged file
        directory.mkdir()
        (directory / state.LOCK_NAME).write_text("")  # another directory, same names
        with pytest.raises(StateError, match="removed or replaced"):
            store.check_in_place()
    finally:
        store.close()


@as_root
def test_liveness_never_follows_a_directory_swapped_for_a_link(tmp_path: Path) -> None:
    """A directory on the way that another user owns could be swapped for a link to
    one of root's: root refuses to write there at all."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    with pytest.raises(PermissionError, match="owned by nobody"):
        liveness.write(theirs / "live.json", {"pid": 1})
    (tmp_path / "link").symlink_to(victim)
    os.lchown(tmp_path / "link", 65534, 65534)
    with pytest.raises(PermissionError, match="symbolic link"):
        liveness.write(tmp_path / "link" / "live.json", {"pid": 1})
    assert list(victim.iterdir()) == []
    assert list(theirs.iterdir()) == []


def test_health_neither_follows_a_link_nor_shows_what_it_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"updated_at": "TOPSECRET-VALUE"}')
    live = tmp_path / "live.json"
    live.symlink_to(secret)
    result = liveness.check(live, datetime.now(UTC), None)
    assert not result.ok
    assert "TOPSECRET" not in result.message
    live.unlink()
    live.write_text('{"updated_at": "TOPSECRET-VALUE"}')
    result = liveness.check(live, datetime.now(UTC), None)
    assert result.message == f"{live}: unreadable liveness file (not crond's liveness JSON)"
