"""crond.__version__ is written in the source: it must match the project's own."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest

import crond

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def test_version_is_pyprojects() -> None:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    assert crond.__version__ == project["version"]


def test_version_is_the_installed_distributions() -> None:
    try:
        installed = importlib.metadata.version("crond")
    except importlib.metadata.PackageNotFoundError:  # a source tree never installed
        pytest.skip("crond is not installed")
    assert crond.__version__ == installed
