"""`crond status` and `crond history` of a cluster, run as real commands against a real
PostgreSQL (tests/pg/) where two replicas' runs were written through PostgresStore: the
database found from the file's `daemon:` block (or CROND_DATABASE_URL), the replica of
each newest attempt shown, the daemon alive while some replica's heartbeat is fresh, and
a missing psycopg or an unreachable database said in one line without the URL's secrets.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from crond.store import base
from crond.store.postgres import PostgresStore

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
_JOBS = "jobs:\n  a: {every: 1h, command: 'true'}\n  b: {every: 1h, command: 'true'}\n"


def _crond(
    *args: str, env: dict[str, str] | None = None, pre: str = ""
) -> subprocess.CompletedProcess[str]:
    """`crond ARGS` in a process of its own (`pre`: Python run before it, in it)."""
    code = f"{pre}\nfrom crond.cli import main\nmain()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})} if env is not None else _env(),
        check=False,
    )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CROND_DATABASE_URL", None)
    return env


def _file(tmp_path: Path, database: str, cluster: str = "billing") -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(f"{_JOBS}daemon:\n  database: {json.dumps(database)}\n  cluster: {cluster}\n")
    return path


@pytest.fixture
def cluster(pg_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """Two replicas of cluster billing: r1 ran `a` (a success), r2 runs `b` now."""
    r1 = PostgresStore.open(pg_url, cluster="billing", replica="r1")
    r2 = PostgresStore.open(pg_url, cluster="billing", replica="r2")
    (a,) = r1.claim_many([base.Start("a", "run-a", T0)], T0)
    assert isinstance(a, int)
    r1.finish(a, job="a", finished=T0 + timedelta(seconds=2), outcome="success", exit_code=0,
              duration_s=2.0, output=["done"])  # fmt: skip
    (b,) = r2.claim_many([base.Start("b", "run-b", T0 + timedelta(hours=1))], T0)
    assert isinstance(b, int)
    yield r1, r2
    r1.close()
    r2.close()


def _publish(store: PostgresStore, raw: bytes) -> None:
    """The view a replica publishes after loading `raw`: next fires in an hour, and a
    schedule text of its own (what status shows tells whether it read the view)."""
    at = datetime.now(UTC) + timedelta(hours=1)
    rows = [
        base.ViewRow(job, True, "view's", at.timestamp(), at.isoformat(), at.isoformat(), None)
        for job in ("a", "b")
    ]
    store.publish_view(rows, hashlib.sha256(raw).hexdigest())


def _lines(text: str) -> dict[str, str]:
    """A status table's lines by job."""
    return {line.split()[0]: line for line in text.splitlines()[1:]}


@pytest.mark.parametrize("quick", [True, False], ids=["daemon's view", "file loaded"])
def test_status_shows_which_replica_ran_each_job(
    pg_url: str, cluster: tuple[PostgresStore, PostgresStore], tmp_path: Path, quick: bool
) -> None:
    path = _file(tmp_path, pg_url)
    _publish(cluster[0], path.read_bytes() if quick else b"other bytes")
    done = _crond("status", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    header, *_ = done.stdout.splitlines()
    assert header.split()[-1] == "REPLICA"
    lines = _lines(done.stdout)
    assert lines["a"].split()[-1] == "r1"
    assert lines["a"].split()[1] == ("view's" if quick else "every")
    assert " success " in lines["a"]
    assert lines["b"].split()[-1] == "r2"
    assert " running " in lines["b"]  # r2's heartbeat is fresh: its open run runs
    as_json = _crond("status", "--json", str(path))
    rows = {row["job"]: row for row in map(json.loads, as_json.stdout.splitlines())}
    assert (rows["a"]["last_run"]["replica"], rows["a"]["last_run"]["outcome"]) == ("r1", "success")
    assert (rows["b"]["last_run"]["replica"], rows["b"]["running"]) == ("r2", True)


def test_with_every_heartbeat_stale_an_open_run_is_lost(
    pg_url: str, cluster: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    path = _file(tmp_path, pg_url)
    _publish(cluster[0], b"other bytes")
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE crond_replicas SET last_beat = clock_timestamp() - interval '31s'")
    done = _crond("status", str(path))
    assert done.returncode == 0, done.stderr
    assert " lost? " in _lines(done.stdout)["b"]
    # The file's replica_timeout is the measure: a minute makes the same beats fresh.
    path.write_text(path.read_text() + "  replica_timeout: 1m\n")
    done = _crond("status", str(path))
    assert " running " in _lines(done.stdout)["b"], done.stdout


@pytest.mark.parametrize("quick", [True, False], ids=["daemon's view", "file loaded"])
def test_an_open_run_of_a_replica_gone_silent_is_lost_while_another_runs(
    pg_url: str, cluster: tuple[PostgresStore, PostgresStore], tmp_path: Path, quick: bool
) -> None:
    path = _file(tmp_path, pg_url)
    _publish(cluster[0], path.read_bytes() if quick else b"other bytes")
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            "UPDATE crond_replicas SET last_beat = clock_timestamp() - interval '31s' "
            "WHERE name = 'r2'"
        )
    done = _crond("status", str(path))
    assert " lost? " in _lines(done.stdout)["b"], done.stdout
    assert _lines(done.stdout)["a"].split()[1] == ("view's" if quick else "every")
    as_json = _crond("status", "--json", str(path))
    rows = {row["job"]: row for row in map(json.loads, as_json.stdout.splitlines())}
    assert rows["b"]["running"] is False


def test_history_shows_each_attempts_replica(
    pg_url: str, cluster: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    path = _file(tmp_path, pg_url)
    done = _crond("history", str(path))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if not line.startswith("    |")]
    assert [line.split()[1] for line in lines] == ["a", "b"]
    assert [line.split()[-2:] for line in lines] == [["replica", "r1"], ["replica", "r2"]]
    as_json = _crond("history", "--json", str(path), "a")
    (row,) = map(json.loads, as_json.stdout.splitlines())
    assert (row["run_id"], row["replica"], row["output"]) == ("run-a", "r1", ["done"])


def test_the_environment_names_the_database_over_the_file(
    pg_url: str, cluster: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    path = _file(tmp_path, "postgresql://nobody:hunter2@127.0.0.1:1/nothing")
    done = _crond("history", str(path), env={"CROND_DATABASE_URL": pg_url})
    assert done.returncode == 0, done.stderr
    assert "run-a" in done.stdout
    # Without it, the file's database: unreachable, said in a line without its secrets.
    for command in ("history", "status"):
        failed = _crond(command, str(path))
        assert "postgresql://127.0.0.1/… (cluster billing): cannot connect" in failed.stderr
        assert not {"hunter2", "nobody", "nothing", "Traceback"} & set(
            failed.stderr.replace(":", " ").replace("/", " ").split()
        ), failed.stderr
    assert _crond("history", str(path)).returncode == 1
    status = _crond("status", str(path))
    assert (status.returncode, _lines(status.stdout)["a"].split()[3]) == (1, "-")  # not read


def test_a_cluster_of_another_name_has_no_history_yet(
    pg_url: str, cluster: tuple[PostgresStore, PostgresStore], tmp_path: Path
) -> None:
    done = _crond("history", str(_file(tmp_path, pg_url, cluster="billings")))
    assert done.returncode == 1
    assert "(cluster billings): no replica of this cluster has used it yet" in done.stderr


def test_without_psycopg_it_says_what_to_install(tmp_path: Path) -> None:
    path = _file(tmp_path, "postgresql://u:secret@db.example/crond")
    block = "import sys; sys.modules['psycopg'] = None"  # as if not installed
    for command in ("status", "history"):
        done = _crond(command, str(path), pre=block)
        assert done.returncode == 1, done.stderr
        # The file's database is refused where it is written, with the line to install it.
        assert done.stderr.splitlines()[0].endswith(
            "schedules.yaml:5:13: daemon.database: a database needs the optional PostgreSQL "
            "driver, psycopg: pip install 'crond[postgres]' (or remove database: one daemon on "
            "its own keeps its state in its state directory)"
        )
        assert "secret" not in done.stderr
        assert "Traceback" not in done.stderr


def test_a_replicas_state_dir_says_the_history_is_in_the_database(tmp_path: Path) -> None:
    """A replica's state directory holds only its control socket: `--state-dir`, right
    for `crond ps`, is wrong for these two, and they say so."""
    path = _file(tmp_path, "postgresql://crond@127.0.0.1:1/crond")
    replica_dir = tmp_path / "r1"
    replica_dir.mkdir()
    for command in ("status", "history"):
        done = _crond(command, str(path), "--state-dir", str(replica_dir))
        assert done.returncode == 1, command
        assert done.stderr.splitlines()[0] == (
            f"crond: no history in {replica_dir}: this file's daemon keeps its history in its "
            "database (daemon.database); run without --state-dir"
        ), command
