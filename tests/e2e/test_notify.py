"""Notifiers, pings and metrics with the real binary: a real HTTP server on loopback
receives the webhooks and pings; a real command notifier; /metrics parsed with
prometheus-client's own parser; delivery after `kill -9` and a restart; a secret that
must appear nowhere in what the daemon writes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import textwrap
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.harness import Crond, eventually, run_cli
from tests.notify_server import NotifyServer, Request

SECRET = "s3cr3t-T0KEN-do-not-log"
PING_KEY = "0b1d-ping-key-also-secret"


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def start(started: list[Crond], args: list[str], env: dict[str, str] | None = None) -> Crond:
    daemon = Crond(args, env=env)
    started.append(daemon)
    return daemon


def failing_job_file(tmp_path: Path, url: str, *, repeat: str = "1h") -> tuple[Path, Path]:
    """A job every second that fails until the file `ok` exists; it notifies `hook` of
    failed/recovered and pings the server."""
    ok = tmp_path / "ok"
    f = write(
        tmp_path / "s.yaml",
        f"""
        notifiers:
          hook:
            webhook: {url}/hook
            headers: {{Authorization: "Bearer ${{HOOK_TOKEN}}"}}
            repeat: {repeat}
        jobs:
          flaky:
            every: 1s
            command: "echo trying; test -e {ok}"
            ping: {url}/ping/${{PING_KEY}}
            notify: {{hook: [failed, recovered]}}
        """,
    )
    return f, ok


ENV = {"HOOK_TOKEN": SECRET, "PING_KEY": PING_KEY}


def test_failed_once_per_streak_then_recovered_and_pings_with_the_run_id(
    tmp_path: Path, crond: list[Crond]
) -> None:
    with NotifyServer() as server:
        f, ok = failing_job_file(tmp_path, server.url)
        daemon = start(crond, [str(f), "--state-dir", str(tmp_path / "st")], ENV)
        for _ in range(3):  # three failed runs: one message for the streak (repeat: 1h)
            daemon.wait_for("job.finished", lambda e: e["outcome"] == "failed")
        ok.touch()
        daemon.wait_for("job.finished", lambda e: e["outcome"] == "success")
        eventually(lambda: len(hooks(server)) >= 2, what="failed and recovered")
        daemon.stop()
        failed, recovered = hooks(server)[:2]
        body = failed.json()
        assert failed.headers["authorization"] == f"Bearer {SECRET}"
        assert failed.headers["content-type"].startswith("application/json")
        assert (body["event"], body["job"], body["outcome"], body["exit_code"]) == (
            "failed", "flaky", "failed", 1,
        )  # fmt: skip
        assert body["streak"] == 1
        assert uuid.UUID(body["run_id"]).version == 7
        assert "trying" in body["output_tail"]
        assert body["text"].startswith("flaky failed on ")
        again = recovered.json()
        assert again["event"] == "recovered"
        assert again["streak"] >= 3  # the failed runs it ends
        assert len(hooks(server)) == 2  # nothing more: the streak said it once
        # The pings: /start, then /fail or success, each with the run's id.
        pings = [r for r in server.requests() if r.path.startswith(f"/ping/{PING_KEY}")]
        kinds = {r.path.removeprefix(f"/ping/{PING_KEY}") for r in pings}
        assert {"/start", "/fail", ""} <= kinds
        run_ids = {r.query["rid"][0] for r in pings}
        assert body["run_id"] in run_ids
        success = next(r for r in pings if r.path == f"/ping/{PING_KEY}")
        assert "trying" in success.text  # the output tail is the body
        assert_no_secret(daemon, tmp_path)


def hooks(server: NotifyServer) -> list[Request]:
    return server.requests("/hook")


def assert_no_secret(daemon: Crond, tmp_path: Path) -> None:
    """Neither secret in any event, nor in the state store, status or history."""
    text = json.dumps(daemon.events) + "".join(daemon.other)
    for secret in (SECRET, PING_KEY):
        assert secret not in text
        for path in (tmp_path / "st").glob("*"):
            assert secret.encode() not in path.read_bytes(), path
    f = tmp_path / "s.yaml"
    for args in (("status", str(f)), ("history", str(f), "-n", "50")):
        out = run_cli(*args, "--state-dir", str(tmp_path / "st"), env=ENV)
        assert SECRET not in out.stdout + out.stderr
        assert PING_KEY not in out.stdout + out.stderr


def test_a_notification_waits_for_an_endpoint_that_comes_up_late(
    tmp_path: Path, crond: list[Crond]
) -> None:
    with NotifyServer(up=False) as server:
        f, ok = failing_job_file(tmp_path, server.url)
        daemon = start(crond, [str(f), "--state-dir", str(tmp_path / "st")], ENV)
        daemon.wait_for("job.finished", lambda e: e["outcome"] == "failed")
        ok.touch()  # later runs succeed: only the first failure is to be told
        server.up()
        eventually(lambda: bool(hooks(server)), timeout=20, what="the late delivery")
        assert hooks(server)[0].json()["event"] == "failed"
        daemon.stop()
        assert not daemon.named("notify.failed")


def test_a_notification_queued_when_the_daemon_is_killed_is_sent_after_the_restart(
    tmp_path: Path, crond: list[Crond]
) -> None:
    with NotifyServer(up=False) as server:
        f, ok = failing_job_file(tmp_path, server.url)
        state = str(tmp_path / "st")
        first = start(crond, [str(f), "--state-dir", state], ENV)
        failed = first.wait_for("job.finished", lambda e: e["outcome"] == "failed")
        ok.touch()
        first.proc.send_signal(signal.SIGKILL)
        first.exited()
        assert not hooks(server)
        server.up()
        second = start(crond, [str(f), "--state-dir", state], ENV)

        # Sent after the restart (up to four go at once: the run's `recovered` made since
        # may start after it and finish before it, docs/alerting.md "Order").
        def told() -> list[tuple[str, str]]:
            return [(h.json()["event"], h.json()["run_id"]) for h in hooks(server)]

        restored = ("failed", failed["run_id"])
        eventually(lambda: restored in told(), timeout=20, what="the restored notification")
        second.stop()


def test_a_command_notifier_gets_the_body_on_stdin_and_the_facts_in_its_environment(
    tmp_path: Path, crond: list[Crond]
) -> None:
    out = tmp_path / "told"
    script = tmp_path / "page.sh"
    script.write_text(
        f'#!/bin/sh\n{{ cat; echo; echo "E=$CROND_EVENT J=$CROND_JOB O=$CROND_OUTCOME '
        f'X=$CROND_EXIT_CODE R=$CROND_RUN_ID"; echo "T=$CROND_TEXT"; }} >> {out}\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    f = write(
        tmp_path / "s.yaml",
        f"""
        notifiers:
          pager: {{command: [{script}]}}
        jobs:
          broken:
            every: 1s
            command: exit 3
            notify: {{pager: [failed]}}
        """,
    )
    daemon = start(crond, [str(f), "--state-dir", "none"])
    finished = daemon.wait_for("job.finished", lambda e: e["outcome"] == "failed")
    eventually(lambda: out.exists() and "T=" in out.read_text(), what="the command's output")
    daemon.stop()
    stdin, facts, text = out.read_text().splitlines()[:3]
    assert json.loads(stdin)["run_id"] == finished["run_id"]
    assert facts == f"E=failed J=broken O=failed X=3 R={finished['run_id']}"
    assert text.startswith("T=broken failed on ")


def test_metrics_and_healthz(tmp_path: Path, crond: list[Crond]) -> None:
    f = write(
        tmp_path / "s.yaml",
        """
        daemon: {heartbeat: 200ms}
        jobs:
          tick: {every: 1s, command: "true"}
          fail: {every: 1s, command: "false"}
          later: {cron: "0 0 1 1 *", command: "true"}
        """,
    )
    daemon = start(crond, [str(f), "--state-dir", "none", "--metrics", "127.0.0.1:0"])
    serving = daemon.wait_for("metrics.serving")
    base = f"http://{serving['address']}"
    first = families(get(base + "/metrics")[1])
    runs = first["crond_job_runs"]  # the parser drops counters' _total from the family
    # Every job's series from the first scrape: at 0 for one that has not run (tick and
    # fail, every second, may have run once already on a slow machine: their series exist).
    for job in ("tick", "fail", "later"):
        for outcome in ("success", "failed", "timeout", "killed"):
            seen = value(runs, "crond_job_runs_total", job_name=job, outcome=outcome)
            assert seen == 0 if job == "later" else seen <= 1
    assert value(first["crond_jobs"], "crond_jobs") == 3
    daemon.wait_for("job.finished", lambda e: e["job"] == "fail")
    daemon.wait_for("job.finished", lambda e: e["job"] == "tick")
    scraped: dict[str, Any] = {}

    def counted() -> bool:  # a page is reused for up to a second (metrics.REUSE_S)
        scraped.update(families(get(base + "/metrics")[1]))
        runs = scraped["crond_job_runs"]
        return value(runs, "crond_job_runs_total", job_name="fail", outcome="failed") >= 1

    eventually(counted, what="the failed run counted")
    then = scraped
    last_success = then["crond_job_last_success_timestamp_seconds"]
    assert value(last_success, "crond_job_last_success_timestamp_seconds", job_name="tick") > 0
    assert value(last_success, "crond_job_last_success_timestamp_seconds", job_name="fail") == 0
    nxt = then["crond_job_next_fire_timestamp_seconds"]
    assert value(nxt, "crond_job_next_fire_timestamp_seconds", job_name="later") > 0
    code, body = get(base + "/healthz")
    assert code == 200
    assert json.loads(body)["jobs"] == 3
    # A reload that removes a job drops its series.
    write(f, "jobs:\n  tick: {every: 1s, command: 'true'}\n")
    daemon.signal(signal.SIGHUP)
    daemon.wait_for("config.reloaded")
    after: dict[str, Any] = {}

    def dropped() -> bool:
        after.update(families(get(base + "/metrics")[1]))
        return {s.labels.get("job_name") for s in after["crond_job_runs"].samples} == {"tick"}

    eventually(dropped, what="the removed jobs' series dropped")
    assert (
        value(after["crond_config_last_reload_successful"], "crond_config_last_reload_successful")
        == 1
    )
    # A stopped loop answers no more: SIGSTOP, and /healthz cannot answer (the probe
    # fails by its timeout), nor /metrics (Prometheus's `up` goes to 0).
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        with pytest.raises((TimeoutError, urllib.error.URLError, socket.timeout)):
            get(base + "/healthz", timeout=1.0)
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    assert daemon.stop() == 0


def get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(family: Any, name: str, **labels: str) -> float:
    for sample in family.samples:
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
            return float(sample.value)
    raise AssertionError(f"no sample {name} {labels}")


def test_an_unset_secret_stops_run_and_a_reload_keeps_the_old_file(
    tmp_path: Path, crond: list[Crond]
) -> None:
    with NotifyServer() as server:
        f, _ = failing_job_file(tmp_path, server.url)
        refused = run_cli("run", str(f), "--state-dir", "none", env={"HOOK_TOKEN": SECRET})
        assert refused.returncode == 1
        assert "${PING_KEY} is not set" in refused.stderr
        assert "s.yaml:" in refused.stderr  # located
        warned = run_cli("validate", str(f), env={"HOOK_TOKEN": SECRET})
        assert warned.returncode == 0, warned.stderr
        assert "${PING_KEY} is not set" in warned.stdout + warned.stderr
        daemon = start(crond, [str(f), "--state-dir", "none"], ENV)
        daemon.wait_for("daemon.started")
        text = f.read_text().replace("${HOOK_TOKEN}", "${NOT_THERE}")
        f.write_text(text)
        daemon.signal(signal.SIGHUP)
        failed = daemon.wait_for("config.reload_failed")
        assert "${NOT_THERE} is not set" in " ".join(failed["errors"])
        daemon.wait_for("job.started")  # the old jobs go on
        daemon.stop()


def test_an_empty_secret_is_taken_for_an_unset_one(tmp_path: Path, crond: list[Crond]) -> None:
    # An EnvironmentFile's `HC_UUID=` line left empty: not a ping to the bare base URL.
    empty = "is set but empty in crond's environment"
    with NotifyServer() as server:
        f, _ = failing_job_file(tmp_path, server.url)
        refused = run_cli("run", str(f), "--state-dir", "none", env={**ENV, "PING_KEY": ""})
        assert refused.returncode == 1
        assert f"s.yaml:11:11: jobs.flaky.ping: ${{PING_KEY}} {empty}" in refused.stderr
        warned = run_cli("validate", str(f), env={**ENV, "HOOK_TOKEN": ""})
        assert warned.returncode == 0, warned.stderr
        assert f"${{HOOK_TOKEN}} {empty}" in warned.stdout + warned.stderr
        daemon = start(crond, [str(f), "--state-dir", "none"], {**ENV, "EMPTY": ""})
        daemon.wait_for("daemon.started")
        f.write_text(f.read_text().replace("${HOOK_TOKEN}", "${EMPTY}"))
        daemon.signal(signal.SIGHUP)
        failed = daemon.wait_for("config.reload_failed")
        assert f"${{EMPTY}} {empty}" in " ".join(failed["errors"])
        daemon.wait_for("job.started")  # the old jobs go on
        daemon.stop()
    sent = [r.headers.get("authorization") for r in server.requests("/hook")]
    assert set(sent) <= {f"Bearer {SECRET}"}  # the old file's, never "Bearer "


def test_a_run_lost_to_kill_9_is_told_and_pinged_as_failed_after_the_restart(
    tmp_path: Path, crond: list[Crond]
) -> None:
    with NotifyServer() as server:
        text = f"""
            notifiers:
              hook: {{webhook: {server.url}/hook}}
            jobs:
              long:
                every: EVERY
                command: sleep 60
                ping: {server.url}/ping
                notify: {{hook: [lost]}}
            """
        f = write(tmp_path / "s.yaml", text.replace("EVERY", "1s"))
        state = str(tmp_path / "st")
        killed = start(crond, [str(f), "--state-dir", state])
        started = killed.wait_for("job.started")
        killed.proc.send_signal(signal.SIGKILL)
        killed.exited()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started["pid"], signal.SIGKILL)  # the run crond left behind
        write(f, text.replace("EVERY", "1h"))  # nothing due while the test looks
        second = start(crond, [str(f), "--state-dir", state])
        second.wait_for("job.lost")
        told = server.wait_for(1, "/hook")[0].json()
        assert (told["event"], told["run_id"], told["outcome"]) == (
            "lost", started["run_id"], "lost",
        )  # fmt: skip
        assert told["text"].startswith("long lost on ")
        fail = server.wait_for(1, "/ping/fail")[0]
        assert fail.query["rid"] == [started["run_id"]]
        second.stop()


def test_an_apprise_notifier_delivers_through_its_json_url(
    tmp_path: Path, crond: list[Crond]
) -> None:
    pytest.importorskip("apprise")
    with NotifyServer() as server:
        host = server.url.removeprefix("http://")
        f = write(
            tmp_path / "s.yaml",
            f"""
            notifiers:
              chat: {{apprise: "json://{host}/apprise?+X-Token=${{HOOK_TOKEN}}"}}
            jobs:
              broken: {{every: 1s, command: exit 2, notify: {{chat: [failed]}}}}
            """,
        )
        daemon = start(crond, [str(f), "--state-dir", "none"], ENV)
        finished = daemon.wait_for("job.finished")
        got = server.wait_for(1, "/apprise")[0]
        daemon.stop()
        message = got.json()  # Apprise's json:// format: title, message, type
        assert message["title"].startswith("broken failed on ")
        assert json.loads(message["message"])["run_id"] == finished["run_id"]
        assert got.headers["x-token"] == SECRET  # Apprise's `+NAME=value`: a header
        assert SECRET not in json.dumps(daemon.events) + "".join(daemon.other)


def test_a_reload_turns_metrics_on_and_off(tmp_path: Path, crond: list[Crond]) -> None:
    jobs = "jobs:\n  later: {cron: '0 0 1 1 *', command: 'true'}\n"
    f = write(tmp_path / "s.yaml", jobs)
    daemon = start(crond, [str(f), "--state-dir", "none"])
    daemon.wait_for("daemon.started")
    write(f, "daemon: {metrics: '127.0.0.1:0'}\n" + jobs)
    daemon.signal(signal.SIGHUP)
    serving = daemon.wait_for("metrics.serving")
    code, _ = get(f"http://{serving['address']}/healthz")
    assert code == 200
    write(f, jobs)
    daemon.signal(signal.SIGHUP)
    assert daemon.wait_for("metrics.stopped")["address"] == serving["address"]
    with pytest.raises(urllib.error.URLError):
        get(f"http://{serving['address']}/healthz", timeout=2.0)
    assert daemon.stop() == 0


def test_a_job_does_not_inherit_the_secrets_of_the_notifiers(
    tmp_path: Path, crond: list[Crond]
) -> None:
    """The variables the file takes by ${NAME} for a notifier's header, a ping and a
    command notifier are the daemon's: a job running `env` shows none of them (nor does a
    command notifier's), and a
    variable nothing names is inherited."""
    with NotifyServer() as server:
        f = write(
            tmp_path / "s.yaml",
            f"""
            notifiers:
              hook:
                webhook: {server.url}/hook
                headers: {{Authorization: "Bearer ${{HOOK_TOKEN}}"}}
              page: {{command: ["sh", "-c", "cat > /dev/null", "${{PAGE_KEY}}"]}}
              dump: {{command: "env > {tmp_path / "notifier.env"}"}}
            jobs:
              boom: {{every: 1s, command: "false", notify: {{dump: [failed]}}}}
              show:
                every: 1s
                command: env
                ping: {server.url}/ping/${{PING_KEY}}
                notify: {{hook: [failed], page: [failed]}}
            """,
        )
        env = {**ENV, "PAGE_KEY": "page-s3cr3t", "JUST_A_VAR": "kept"}
        daemon = start(crond, [str(f), "--state-dir", "none"], env)
        daemon.wait_for("job.finished", lambda e: e["job"] == "show")
        lines = [e["line"] for e in daemon.named("job.output") if e["job"] == "show"]
        assert "JUST_A_VAR=kept" in lines
        shown = "\n".join(lines)
        for secret in (SECRET, PING_KEY, "page-s3cr3t"):
            assert secret not in shown
        # Nor does a command notifier: each `${NAME}` is substituted where it is used.
        told = tmp_path / "notifier.env"
        eventually(lambda: told.exists() and "JUST_A_VAR=kept" in told.read_text())
        for secret in (SECRET, PING_KEY, "page-s3cr3t"):
            assert secret not in told.read_text()
        assert {"HOOK_TOKEN", "PING_KEY", "PAGE_KEY"}.isdisjoint(
            line.split("=", 1)[0] for line in lines
        )
        daemon.stop()
