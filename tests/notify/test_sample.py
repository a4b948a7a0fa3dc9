"""`crond notify FILE NOTIFIER` (crond/cli_notify.py, crond/notify/sample.py), run as the
real `crond` against a real HTTP server and real commands."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

from crond.config.model import NotifyEvent
from crond.notify.delivery import Delivery
from crond.notify.sample import TRY_TIMEOUT
from tests.notify_server import NotifyServer

CROND = str(Path(sys.executable).with_name("crond"))
JOBS = "jobs:\n  a:\n    every: 1h\n    command: 'true'\n"


def _crond(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CROND, *args], capture_output=True, text=True, timeout=60, check=False)


def _file(tmp_path: Path, notifiers: str) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(f"notifiers:\n{notifiers}{JOBS}")
    return path


def test_a_webhook_gets_the_daemons_body_and_the_command_says_sent(tmp_path: Path) -> None:
    with NotifyServer() as server:
        path = _file(tmp_path, f"  hook:\n    webhook: {server.url}/hook\n")
        done = _crond("notify", str(path), "hook")
        assert done.returncode == 0, done.stderr
        assert "hook (webhook http://127.0.0.1" in done.stdout
        assert "sent a sample failed notification" in done.stdout
        (request,) = server.requests("/hook")
    body = request.json()
    assert body["event"] == "failed"
    assert body["outcome"] == "failed"
    assert body["text"].startswith("[sample] crond-sample failed on ")
    assert set(body) >= {"job", "host", "run_id", "slot", "attempt", "exit_code", "output_tail"}


def test_every_event_can_be_sent_through_a_command(tmp_path: Path) -> None:
    out = tmp_path / "got"
    argv = json.dumps(["sh", "-c", f'cat > {out}; echo "$CROND_EVENT" >> {out}'])
    path = _file(tmp_path, f"  page:\n    command: {argv}\n")
    for event in NotifyEvent:
        done = _crond("notify", str(path), "page", "--event", event.value)
        assert done.returncode == 0, (event, done.stderr)
        body, told = out.read_text().rsplit("}", 1)
        assert json.loads(body + "}")["event"] == event.value
        assert told.strip() == event.value


def test_a_refusing_endpoint_is_said_with_its_status_and_exits_1(tmp_path: Path) -> None:
    with NotifyServer() as server:
        server.answer(status=403)
        path = _file(tmp_path, f"  hook:\n    webhook: {server.url}/secret-token\n")
        done = _crond("notify", str(path), "hook")
        assert len(server.requests()) == 1  # one try, no retry
    assert done.returncode == 1
    assert "crond: hook (webhook http://127.0.0.1" in done.stderr
    assert "not sent: HTTP 403" in done.stderr
    assert "secret-token" not in done.stderr + done.stdout


def test_a_failing_command_is_said_with_its_exit_status(tmp_path: Path) -> None:
    path = _file(tmp_path, '  page:\n    command: ["sh", "-c", "exit 3"]\n')
    done = _crond("notify", str(path), "page", "--event", "missed")
    assert done.returncode == 1
    assert done.stderr.strip() == "crond: page (command sh): not sent: exit 3"


def test_an_unknown_notifier_is_located_with_a_did_you_mean(tmp_path: Path) -> None:
    path = _file(tmp_path, "  slack:\n    webhook: http://127.0.0.1:9/x\n")
    done = _crond("notify", str(path), "slak")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f'{path}:1:1: notifiers: "slak" is not a notifier of the file (did you mean "slack"?)'
    )
    assert "Traceback" not in done.stderr


def test_a_file_without_notifiers_says_so(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS)
    done = _crond("notify", str(path), "slack")
    assert done.returncode == 1
    assert "the file has none" in done.stderr


def test_an_unknown_event_has_a_did_you_mean(tmp_path: Path) -> None:
    path = _file(tmp_path, "  slack:\n    webhook: http://127.0.0.1:9/x\n")
    done = _crond("notify", str(path), "slack", "--event", "faild")
    assert done.returncode == 2
    assert '"faild" is not an event (did you mean "failed"?)' in done.stderr


def test_an_unset_variable_of_the_notifier_is_not_sent(tmp_path: Path) -> None:
    path = _file(tmp_path, "  slack:\n    webhook: ${CROND_TEST_UNSET_URL}\n")
    done = _crond("notify", str(path), "slack")
    assert done.returncode == 1
    assert "CROND_TEST_UNSET_URL" in done.stderr
    assert "not sent" in done.stderr


def test_the_events_and_the_try_timeout_are_the_daemons() -> None:
    from crond import cli_notify  # noqa: PLC0415

    assert tuple(e.value for e in NotifyEvent) == cli_notify._EVENTS
    assert inspect.signature(Delivery).parameters["try_timeout"].default == TRY_TIMEOUT
