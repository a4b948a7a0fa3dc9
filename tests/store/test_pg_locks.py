"""Named locks held in PostgreSQL (docs/workflows.md, "With replicas"), the store's side,
against a real server (tests/pg/): a claim takes all its run's locks or none (nothing of
a refused one recorded), the holds outlive the run's retries and go with its last end,
with a dead replica's runs, with a restarted replica's previous runs and with runs
claimed and never started; and replicas that race for a lock never hold it more than its
capacity, whatever the order.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from crond.store import base
from crond.store.postgres import PostgresStore
from tests.store.test_pg_safety import _sql
from tests.store.test_postgres import _race

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
DB = {"a": (("db", 1),), "b": (("db", 1), ("gpu", 2)), "c": (("gpu", 2),), "d": (("gpu", 2),)}


def _holds(url: str) -> list[tuple[str, str, str]]:
    """(lock, job, replica) of every hold, sorted."""
    return sorted(_sql(url, "SELECT name, job, replica FROM crond_lock_holds"))


def _claim(store: PostgresStore, job: str, slot: datetime, run_id: str) -> base.Claim:
    return store.claim([base.Start(job, run_id, slot)], [], slot, locks=DB).starts[0]


def _end(store: PostgresStore, row: int, job: str, run_id: str, *, release: bool) -> None:
    store.end(row, job=job, run_id=run_id, finished=T0, outcome="success", exit_code=0,
              duration_s=1.0, output=[], release=release)  # fmt: skip


def test_a_claim_takes_all_its_locks_or_none_and_its_last_end_gives_them_back(
    pg_url: str, stores: list[PostgresStore]
) -> None:
    r1, r2, _ = stores
    row = _claim(r1, "a", T0, "run-a")
    assert isinstance(row, int)
    assert _holds(pg_url) == [("db", "a", "r1")]
    refused = _claim(r2, "b", T0, "run-b")  # db is full: gpu (free) is not taken either
    assert refused == base.Locked("db", (base.LockHolder("a", T0, "r1"),))
    assert _holds(pg_url) == [("db", "a", "r1")]
    # Nothing of the refused start is recorded: no attempt, no claim (asked again later).
    assert _sql(pg_url, "SELECT count(*) FROM crond_attempts WHERE job = 'b'") == [(0,)]
    assert _sql(pg_url, "SELECT count(*) FROM crond_claims WHERE job = 'b'") == [(0,)]
    _end(r1, row, "a", "run-a", release=False)  # a retry follows: still held
    assert isinstance(_claim(r2, "b", T0, "run-b"), base.Locked)
    _end(r1, row, "a", "run-a", release=True)  # (the retry's end: the run's last)
    again = _claim(r2, "b", T0, "run-b")
    assert isinstance(again, int)
    assert _holds(pg_url) == [("db", "b", "r2"), ("gpu", "b", "r2")]
    # A run whose job needs no lock is never held back by them.
    assert isinstance(r1.claim([base.Start("free", "run-f", T0)], [], T0, locks=DB).starts[0], int)


def test_a_lock_is_given_back_with_the_runs_of_a_dead_replica_a_restart_and_an_abandon(
    pg_url: str, stores: list[PostgresStore]
) -> None:
    r1, r2, r3 = stores
    assert isinstance(_claim(r1, "c", T0, "run-c1"), int)
    assert isinstance(_claim(r2, "d", T0, "run-d2"), int)
    assert isinstance(_claim(r3, "c", T0 + timedelta(minutes=1), "run-c3"), base.Locked)
    # r1 stops beating: the survivor that closes its runs lost frees its locks with them.
    _sql(pg_url, "UPDATE crond_replicas SET last_beat = %s WHERE name = 'r1'", (T0,))
    lost = r3.close_dead(T0 + timedelta(minutes=5), timedelta(seconds=30))
    assert [r.run_id for r in lost] == ["run-c1"]
    assert _holds(pg_url) == [("gpu", "d", "r2")]
    assert isinstance(_claim(r3, "c", T0 + timedelta(minutes=1), "run-c3"), int)
    # r2's process dies and a new one takes its name: the old runs' locks go at its start.
    r2.close()
    stores[1] = PostgresStore.open(pg_url, cluster="c", replica="r2")
    assert [r.run_id for r in stores[1].close_lost(T0)] == ["run-d2"]
    assert _holds(pg_url) == [("gpu", "c", "r3")]
    # A run claimed and never started (its claim's answer was lost) is given up: so are
    # its locks.
    assert isinstance(_claim(stores[1], "d", T0 + timedelta(minutes=2), "run-d4"), int)
    assert stores[1].abandon(["run-d4"]) == 1
    assert _holds(pg_url) == [("gpu", "c", "r3")]
    # A run whose last attempt's start never reached the database (so no row to end)
    # gives its locks back by its run id.
    stores[1].release_locks("run-c3")
    assert _holds(pg_url) == []


def test_a_backfill_claim_takes_the_locks_too(pg_url: str, stores: list[PostgresStore]) -> None:
    r1, r2, _ = stores
    held = _claim(r1, "a", T0, "run-a")
    assert isinstance(held, int)
    row = base.BackfillRow(
        "bf1", "b", T0, T0 + timedelta(hours=1), 2, 0, None, T0, 0, 0, "running", T0, None, "{}"
    )
    assert r2.backfill_add(row)
    start = base.Start("b", "run-bf", T0)
    got = r2.claim_backfill([start], {"run-bf": "bf1"}, T0, locks=DB)
    assert got == [base.Locked("db", (base.LockHolder("a", T0, "r1"),))]
    assert _sql(pg_url, "SELECT count(*) FROM crond_attempts WHERE job = 'b'") == [(0,)]
    _end(r1, held, "a", "run-a", release=True)
    assert isinstance(r2.claim_backfill([start], {"run-bf": "bf1"}, T0, locks=DB)[0], int)
    assert _holds(pg_url) == [("db", "b", "r2"), ("gpu", "b", "r2")]


def test_replicas_that_race_never_hold_a_lock_beyond_its_capacity(
    pg_url: str, stores: list[PostgresStore]
) -> None:
    """Rounds of three replicas claiming at once runs of jobs that share `db` (1) and
    `gpu` (2), each round ending some runs: after every round the holds are within the
    capacities, and every refusal was right (the lock it named was full when it asked)."""
    rng = random.Random(20261204)
    going: dict[str, tuple[PostgresStore, int, str]] = {}  # run id -> store, row, job
    refused = 0
    for n in range(40):
        slot = T0 + timedelta(minutes=n)
        jobs = [rng.choice("abcd") for _ in stores]
        calls = [
            (lambda s=s, j=j, i=i, at=slot, n=n: _claim(s, j, at, f"run-{n}-{i}"))
            for i, (s, j) in enumerate(zip(stores, jobs, strict=True))
        ]
        for i, got in enumerate(_race(*calls)):
            assert not isinstance(got, Exception), got
            if isinstance(got, int):
                going[f"run-{n}-{i}"] = (stores[i], got, jobs[i])
            elif got is not None:  # (None: another replica holds this job's slot)
                assert isinstance(got, base.Locked), got
                refused += 1
        held = _sql(pg_url, "SELECT name, count(*) FROM crond_lock_holds GROUP BY name")
        assert all(count <= {"db": 1, "gpu": 2}[name] for name, count in held), (n, held)
        holding = _sql(pg_url, "SELECT DISTINCT run_id FROM crond_lock_holds")
        assert {run for (run,) in holding} == set(going), n
        for run_id in rng.sample(sorted(going), k=min(len(going), rng.randint(0, 2))):
            store, row, job = going.pop(run_id)
            _end(store, row, job, run_id, release=True)
    assert refused > 10  # (the race did fill the locks)
