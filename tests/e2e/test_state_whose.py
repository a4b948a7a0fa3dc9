"""`crond status` and `crond history` show a file's history only when the file tells
whose it is: a file that is not there, or not YAML, reads no store at all, not the default
place's (which would show another daemon's history as its own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import Crond, run_cli


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        pytest.param("nosuch.yaml", None, "no such file", id="missing"),
        pytest.param("broken.yaml", "jobs: [b999\n", "", id="not_yaml"),
        pytest.param("notes.txt", "b999 ran fine\n", "", id="not_a_mapping"),
    ],
)
def test_a_file_that_is_nobodys_shows_no_history(
    tmp_path: Path, crond: list[Crond], name: str, text: str | None, problem: str
) -> None:
    """A daemon runs on the default place's store (the test's own: tests/conftest.py),
    and has run job b999; the file asked about is not its file, nor anyone's."""
    running = tmp_path / "running.yaml"
    running.write_text("jobs:\n  b999: {every: 1s, command: 'true'}\n")
    daemon = Crond([str(running)])
    crond.append(daemon)
    daemon.wait_for("job.finished", lambda e: e["job"] == "b999")
    daemon.wait_for("job.finished", lambda e: e["job"] == "b999")  # its view is published
    asked = tmp_path / name
    if text is not None:
        asked.write_text(text)
    for command in ("history", "status"):
        done = run_cli(command, str(asked))
        assert (done.returncode, done.stdout) == (1, ""), (command, done.stdout)
        assert "b999" not in done.stderr.replace(f"{asked}:", ""), (command, done.stderr)
        assert done.stderr.splitlines()[-1] == f"{asked}: 1 error", (command, done.stderr)
        assert problem in done.stderr
    assert daemon.stop() == 0
