"""A run going on another replica, watched live from the Now page of a `crond web` whose
daemon does not run it: two real replicas on the real PostgreSQL (tests/pg), the real
`crond web` beside replica r1, the run on r2. Its output reaches the page through the
database (crond/store/pg_follow.py): lines while it runs, then its end; and no request
row is there before a page watches."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg

from tests.e2e.harness import run_cli
from tests.web.dash import basic, two_replicas


def _events(stream: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event, data) of a text/event-stream."""
    name, data = "", ""
    for line in stream:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif not line and name:
            yield name, data
            name, data = "", ""


def _watch(url: str, auth: dict[str, str], go: Path) -> tuple[list[str], dict[str, Any]]:
    """A followed run's lines and end, from its stream; `go` made once its first line is
    seen (the run then prints its second and ends)."""
    lines: list[str] = []
    with httpx.stream("GET", url, headers=auth, timeout=20) as answer:
        for name, data in _events(answer.iter_lines()):
            if name == "line":
                lines.append(json.loads(data)["line"])
                if lines == ["first"]:
                    go.touch()  # its next line comes while the page watches
            elif name == "end":
                return lines, json.loads(data)
    raise AssertionError(f"the stream ended without an end: {lines}")


def test_a_run_on_another_replica_is_watched_through_the_database(
    pg_url: str, tmp_path: Path
) -> None:
    with two_replicas(pg_url, tmp_path) as pair:
        file, go, dash, replicas = pair.file, pair.go, pair.dash, pair.replicas
        done = run_cli("trigger", str(file), "gated", "--socket", str(pair.r2_socket))
        assert done.returncode == 0, done.stderr
        run_id = done.stdout.strip()
        with psycopg.connect(pg_url) as conn:  # nobody watches: nothing asked of r2
            assert conn.execute("SELECT count(*) FROM crond_follows").fetchone() == (0,)
        auth = {"authorization": basic("bob")}
        now = httpx.get(dash.url + "/now", headers=auth, timeout=10).text
        assert re.search(rf">{run_id}</a>.*?<td>r2</td>", now, re.S), now
        page = httpx.get(f"{dash.url}/now/{run_id}?job=gated", headers=auth, timeout=10)
        assert page.status_code == 200, page.text
        found = re.search(r'data-follow="(/follow/[^"]+/events)"', page.text)
        assert found is not None, page.text
        lines, end = _watch(dash.url + found.group(1), auth, go)
        assert lines == ["first", "second"]
        assert end["error"] is None
        assert end["result"]["outcome"] == "success"
        assert end["result"]["run_id"] == run_id
        with psycopg.connect(pg_url) as conn:  # written by r2, its end said
            row = conn.execute("SELECT seen, ended FROM crond_follows WHERE run_id = %s",
                               (run_id,)).fetchone()  # fmt: skip
        assert row == (2, True)
        # No daemon beside the dashboard any more: the runs and their output come from
        # the database alone.
        replicas[0].kill()
        go.unlink()
        done = run_cli("trigger", str(file), "gated", "--socket", str(pair.r2_socket))
        second = done.stdout.strip()
        now = httpx.get(dash.url + "/now", headers=auth, timeout=10).text
        assert re.search(rf">{second}</a>.*?<td>r2</td>", now, re.S), now
        page = httpx.get(f"{dash.url}/now/{second}?job=gated", headers=auth, timeout=10)
        found = re.search(r'data-follow="(/follow/[^"]+/events)"', page.text)
        assert found is not None, page.text
        lines, end = _watch(dash.url + found.group(1), auth, go)
        assert (lines, end["result"]["outcome"]) == (["first", "second"], "success")
