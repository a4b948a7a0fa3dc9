"""`crond status` of a `replicas: all` job on a real PostgreSQL (tests/pg/): a row a
replica that ran it, each with its own newest attempt and success, in the table and in
--json, through the file loaded and not through the daemon's view (docs/state.md)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from crond.store import base
from crond.store.postgres import PostgresStore
from tests.test_status_cluster import _crond

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _file(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(
        "jobs:\n"
        "  clean: {every: 1h, command: 'true', replicas: all}\n"
        "  once: {every: 1h, command: 'true'}\n"
        f"daemon:\n  database: {json.dumps(url)}\n  cluster: host\n"
    )
    return path


def _run(
    store: PostgresStore, job: str, run_id: str, slot: datetime, outcome: str, copy: str
) -> None:
    (row,) = store.claim_many([base.Start(job, run_id, slot)], slot, copies=[copy])
    assert isinstance(row, int)
    store.finish(row, job=job, finished=slot + timedelta(seconds=1), outcome=outcome,
                 exit_code=0 if outcome == "success" else 1, duration_s=1.0, output=[])  # fmt: skip


@pytest.fixture
def stores(pg_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """r1's copies of `clean` succeed; r2's succeeded once, then failed (the newest of all
    is r1's, so one row would hide r2's failure); `once` ran on r2."""
    r1 = PostgresStore.open(pg_url, cluster="host", replica="r1")
    r2 = PostgresStore.open(pg_url, cluster="host", replica="r2")
    _run(r2, "clean", "c0", T0, "success", "r2")
    _run(r1, "clean", "c0", T0, "success", "r1")
    _run(r2, "clean", "c1", T0 + HOUR, "failed", "r2")
    _run(r1, "clean", "c1", T0 + HOUR, "success", "r1")
    _run(r2, "once", "o1", T0 + HOUR, "success", "")
    yield r1, r2
    r1.close()
    r2.close()


def test_a_replicas_all_job_has_a_row_a_replica(
    pg_url: str, stores: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    path = _file(tmp_path, pg_url)
    # The daemon's view of these very bytes: status must still load the file (which jobs
    # are `replicas: all` is the file's), not show the view's one row a job.
    at = datetime.now(UTC) + HOUR
    stores[0].publish_view(
        [base.ViewRow(job, True, "view's", at.timestamp(), at.isoformat(), at.isoformat(), None)
         for job in ("clean", "once")],
        hashlib.sha256(path.read_bytes()).hexdigest(),
    )  # fmt: skip
    done = _crond("status", str(path))
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [(r[0], r[-1]) for r in rows] == [("clean", "r1"), ("clean", "r2"), ("once", "r2")]
    clean_r1, clean_r2, _ = done.stdout.splitlines()[1:]
    assert " success " in clean_r1
    assert " failed " in clean_r2
    assert "2026-03-01T12:00:01Z" in clean_r2  # r2's own last success, the first slot's
    as_json = _crond("status", "--json", str(path))
    lines = [json.loads(line) for line in as_json.stdout.splitlines()]
    clean = [
        (r["last_run"]["replica"], r["last_run"]["outcome"]) for r in lines if r["job"] == "clean"
    ]
    assert clean == [("r1", "success"), ("r2", "failed")]
    r2 = next(r for r in lines if r["job"] == "clean" and r["last_run"]["replica"] == "r2")
    assert (r2["last_run"]["run_id"], r2["last_success"]["run_id"]) == ("c1", "c0")
