"""`crond web` on a cluster: the store read is the cluster's PostgreSQL (tests/pg), the
cluster page shows the replica that runs, alive and on this file's bytes."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.e2e.harness import Crond, eventually, run_cli
from tests.web.dash import Dash, basic, users_file


def test_the_cluster_page_and_the_jobs_read_from_the_database(pg_url: str, tmp_path: Path) -> None:
    file = tmp_path / "schedules.yaml"
    file.write_text(
        f"daemon:\n  database: {pg_url}\n  cluster: billing\n  state_dir: {tmp_path / 'state'}\n"
        "  heartbeat: 1s\n"
        f"web:\n  users: {users_file(tmp_path)}\n  operators: [alice]\n"
        "jobs:\n  nightly:\n    cron: '0 3 * * *'\n    command: 'echo no disk >&2; exit 2'\n"
    )
    started = Crond([str(file), "--replica", "r1"])
    dash = None
    try:
        started.wait_for("control.listening")
        assert run_cli("trigger", str(file), "nightly", "--wait").returncode == 2
        dash = Dash(file)
        auth = {"authorization": basic("bob")}

        def page(path: str) -> str:
            return httpx.get(dash.url + path, headers=auth, timeout=10).text

        eventually(lambda: ">r1<" in page("/cluster"), 10, "replica r1 on the cluster page")
        cluster = page("/cluster")
        assert re.search(r"<td>r1</td>.*?alive.*?<td>same</td>", cluster, re.S), cluster
        # Its clock skew, as its heartbeats measure it (one host: well under a second).
        skew = re.compile(r'<td class="skew">([+-]\d+\.\d{3})s</td>')
        eventually(lambda: bool(skew.search(page("/cluster"))), 10, "r1's clock skew shown")
        found = skew.search(page("/cluster"))
        assert found is not None
        assert abs(float(found.group(1))) < 1
        jobs = page("/?state=failing")
        assert 'href="/jobs/nightly"' in jobs
        run = re.search(r'href="/runs/([0-9a-f-]+)"', page("/jobs/nightly"))
        assert run is not None
        output = page(f"/runs/{run.group(1)}")
        assert "no disk" in output
        assert "on r1" in output
    finally:
        if dash is not None:
            dash.stop()
        started.kill()
