"""systemd/crond-web.service: it verifies clean, scores "OK" or better with
`systemd-analyze security` (as the daemon's unit does, tests/daemon/test_systemd.py), runs
without root and writes nothing."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.daemon.test_systemd import analyze, needs_analyze

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "crond-web.service"


def settings() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A file system root with the system's units, this one, and its programs."""
    place = tmp_path / "root"
    shutil.copytree("/usr/lib/systemd/system", place / "usr/lib/systemd/system", symlinks=True)
    units = place / "etc/systemd/system"
    units.mkdir(parents=True)
    shutil.copy(UNIT, units / UNIT.name)
    for key in ("ExecStartPre", "ExecStart"):
        for line in settings()[key]:
            program = place / shlex.split(line)[0].lstrip("/")
            program.parent.mkdir(parents=True, exist_ok=True)
            program.write_text("#!/bin/sh\n")
            program.chmod(0o755)
    return place


@needs_analyze
def test_unit_verifies_clean(root: Path) -> None:
    result = analyze("verify", f"--root={root}", UNIT.name)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@needs_analyze
def test_security_exposure_is_ok_or_better(root: Path) -> None:
    result = analyze("security", "--offline=true", f"--root={root}", UNIT.name)
    assert result.returncode == 0, result.stderr
    found = re.search(
        r"Overall exposure level for crond-web\.service: ([\d.]+) (\w+)", result.stdout
    )
    assert found, result.stdout
    assert found[2] in ("PERFECT", "SAFE", "OK"), result.stdout


def test_it_runs_as_nobody_in_particular_and_writes_nothing() -> None:
    found = settings()
    assert found["DynamicUser"] == ["yes"]
    assert found["SupplementaryGroups"] == ["crond"]  # the socket's and the store's group
    assert found["ProtectSystem"] == ["strict"]
    assert "ReadWritePaths" not in found
    assert found["CapabilityBoundingSet"] == [""]
    assert found["ExecStart"] == ["/usr/local/bin/crond web /etc/crond/schedules.yaml"]


def test_every_template_and_asset_ships_in_the_wheel() -> None:
    """pyproject's package-data names every file the dashboard serves: a page whose
    template is left out of the wheel would fail only once installed."""
    import fnmatch  # noqa: PLC0415
    import tomllib  # noqa: PLC0415

    repo = UNIT.parents[1]
    data = tomllib.loads((repo / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["crond"]
    web = repo / "crond" / "web"
    files = [p.relative_to(repo / "crond").as_posix() for p in web.rglob("*") if p.is_file()]
    served = [f for f in files if not f.endswith((".py", ".pyc")) and "__pycache__" not in f]
    assert served, "no templates found"
    assert [f for f in served if not any(fnmatch.fnmatch(f, p) for p in patterns)] == []
    assert "web" in data["project"]["optional-dependencies"]
