"""The fault soak of replicas (tests/e2e/replicas.py `FaultSoak`, checked by
tests/e2e/replica_check.py; bench/soak_replicas.py runs it for minutes): a short run of
it, and the checker's own tests on made-up records, each of which must be found."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.replica_check import (
    Attempt,
    Fault,
    Finding,
    JobSpec,
    Observed,
    Sample,
    Stamp,
    check,
    parse_stamps,
    report,
)
from tests.e2e.replicas import FaultSoak, SoakPlan
from tests.pg import server as pg

# --- the checker, on made-up records ------------------------------------------------------------

T0 = 1_800_000_000.0  # a whole second
JOBS = [JobSpec("skip", 1.0, "skip"), JobSpec("each", 1.0, "skip", "all")]
REPLICAS = ["r1", "r2"]


def iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + "Z"


def clean() -> Observed:
    """Ten seconds of two replicas where everything went right: `skip` runs 0.3 s a slot
    (r1 the even slots, r2 the odd), `each` once a slot on each replica."""
    stamps: list[Stamp] = []
    for i in range(10):
        slot = T0 + i
        who = REPLICAS[i % 2]
        rid = f"skip-{i}"
        stamps += [
            Stamp("S", "skip", slot, who, 100 + i, rid, slot + 0.01),
            Stamp("E", "skip", slot, who, 100 + i, rid, slot + 0.31),
        ]
        for r in REPLICAS:
            rid = f"each-{r}-{i}"
            stamps += [
                Stamp("S", "each", slot, r, 200 + i, rid, slot + 0.01),
                Stamp("E", "each", slot, r, 200 + i, rid, slot + 0.2),
            ]
    samples = [Sample(r, T0 + i / 2, 0.4) for r in REPLICAS for i in range(20)]
    return Observed(JOBS, REPLICAS, 1.0, 5.0, (T0, T0 + 9), stamps=stamps, samples=samples)


def rule(findings: list[Finding], name: str) -> Finding:
    return next(f for f in findings if f.rule == name)


def failed(obs: Observed) -> set[str]:
    return {f.rule for f in check(obs) if not f.ok}


def test_a_clean_record_passes() -> None:
    findings = check(clean())
    assert all(f.ok for f in findings), report(findings)


def test_a_doubled_slot_is_found() -> None:
    obs = clean()
    obs.stamps.append(Stamp("S", "skip", T0 + 4, "r2", 999, "again", T0 + 4.5))
    obs.stamps.append(Stamp("E", "skip", T0 + 4, "r2", 999, "again", T0 + 4.6))
    findings = check(obs)
    assert rule(findings, "started_once").count == 1, report(findings)


def test_a_doubled_first_attempt_in_the_table_is_found() -> None:
    obs = clean()
    obs.attempts = [
        Attempt("skip", T0 + 2, 1, "r1", "a", "succeeded", T0 + 2, T0 + 2.3),
        Attempt("skip", T0 + 2, 1, "r2", "b", "succeeded", T0 + 2, T0 + 2.3),
    ]
    assert failed(obs) == {"started_once"}


def test_a_copy_of_a_replicas_all_job_per_replica_is_not_doubled() -> None:
    obs = clean()
    assert rule(check(obs), "started_once").ok  # `each` starts twice a slot, once per replica


def test_a_vanished_slot_is_found_and_a_told_one_is_not() -> None:
    obs = clean()
    obs.stamps = [s for s in obs.stamps if not (s.job == "skip" and s.slot in (T0 + 3, T0 + 6))]
    found = rule(check(obs), "none_vanished")
    assert found.count == 2, found
    obs.events.append(
        {
            "event": "job.missed",
            "job": "skip",
            "count": 1,
            "first_slot": iso(T0 + 3),
            "last_slot": iso(T0 + 3),
            "reason": "database",
            "_replica": "r1",
            "timestamp": iso(T0 + 14),
        }
    )
    obs.events.append(
        {
            "event": "job.skipped",
            "job": "skip",
            "slot": iso(T0 + 6),
            "reason": "overlap",
            "_replica": "r2",
            "timestamp": iso(T0 + 6),
        }
    )
    assert rule(check(obs), "none_vanished").ok


def test_a_vanished_copy_of_a_replicas_all_job_is_found_unless_its_replica_was_killed() -> None:
    obs = clean()
    obs.stamps = [s for s in obs.stamps if not (s.job == "each" and s.replica == "r2"
                                                and s.slot == T0 + 5)]  # fmt: skip
    assert rule(check(obs), "none_vanished").count == 1
    obs.faults = [Fault("kill", "r2", T0 + 4.5, T0 + 5.5)]
    assert rule(check(obs), "none_vanished").ok


def test_an_overlap_of_a_skip_job_is_found() -> None:
    obs = clean()
    obs.stamps = [s for s in obs.stamps if not (s.run_id == "skip-5" and s.kind == "E")]
    obs.stamps.append(Stamp("E", "skip", T0 + 5, "r2", 105, "skip-5", T0 + 6.5))
    obs.faults = [Fault("hang", "", T0 + 5.2, T0 + 6.0)]
    found = rule(check(obs), "skip_never_overlapped")
    assert found.count == 1, found
    assert found.by_fault == {"hang": 1}


def test_an_older_slot_started_after_a_newer_one_is_found() -> None:
    obs = clean()
    obs.stamps = [s for s in obs.stamps if s.run_id != "skip-3"]
    obs.stamps.append(Stamp("S", "skip", T0 + 3, "r2", 103, "skip-3", T0 + 4.5))
    obs.stamps.append(Stamp("E", "skip", T0 + 3, "r2", 103, "skip-3", T0 + 4.8))
    assert failed(obs) == {"slots_in_order"}


def test_a_false_lost_is_found() -> None:
    obs = clean()
    # skip-4 ran 0.3 s on r1; told lost while it ran, its replica alive and unfrozen.
    obs.events.append(
        {
            "event": "job.lost",
            "job": "skip",
            "run_id": "skip-4",
            "slot": iso(T0 + 4),
            "replica": "r1",
            "_replica": "r2",
            "timestamp": iso(T0 + 4.2),
        }
    )
    obs.stamps = [s for s in obs.stamps if not (s.run_id == "skip-4" and s.kind == "E")]
    obs.stamps.append(Stamp("E", "skip", T0 + 4, "r1", 104, "skip-4", T0 + 4.9))
    found = rule(check(obs), "no_false_lost")
    assert found.count == 1, found
    assert "still running" in found.examples[0]


def test_a_lost_run_of_a_killed_or_long_frozen_replica_is_not_false() -> None:
    obs = clean()
    obs.attempts = [Attempt("skip", T0 + 4, 1, "r1", "skip-4", "lost", T0 + 4, T0 + 9.0)]
    assert rule(check(obs), "no_false_lost").count == 1
    obs.faults = [Fault("kill", "r1", T0 + 4.1, T0 + 8)]
    assert rule(check(obs), "no_false_lost").ok
    obs.faults = [Fault("stop", "r1", T0 + 4.1, T0 + 4.1 + 5.5)]
    assert rule(check(obs), "no_false_lost").ok
    obs.faults = [Fault("stop", "r1", T0 + 4.1, T0 + 4.1 + 2)]  # shorter than replica_timeout
    assert rule(check(obs), "no_false_lost").count == 1


def test_a_stale_heartbeat_and_a_false_skew_are_found() -> None:
    obs = clean()
    obs.samples.append(Sample("r1", T0 + 7, 3.5))
    obs.events.append({"event": "cluster.clock_skew", "skew_s": -4.2, "_replica": "r1",
                       "timestamp": iso(T0 + 8)})  # fmt: skip
    assert failed(obs) == {"heartbeat_fresh", "no_false_skew"}
    obs.faults = [Fault("stop", "r1", T0 + 5, T0 + 6.5)]  # stale while frozen: expected
    assert failed(obs) == {"no_false_skew"}


def test_stamps_are_parsed_and_a_torn_line_skipped() -> None:
    text = (
        "S skip 2026-12-03T15:00:01Z r1 42 abc 1796310001.25\n"
        "E skip 2026-12-03T15:00:01Z r1 42 abc 1796310001.55\n"
        "S skip 2026-12-03T15:00:02Z r2 4"
    )
    got = parse_stamps(text)
    assert [(s.kind, s.replica, s.pid, s.at) for s in got] == [
        ("S", "r1", 42, 1796310001.25),
        ("E", "r1", 42, 1796310001.55),
    ]


# --- the short soak ------------------------------------------------------------------------------


@pytest.mark.timeout(150)  # ~50 s quiet, 66 s at load 7: the default of 60 s is too short
def test_replicas_through_faults(tmp_path: Path, pg_server: pg.Server) -> None:
    # One of each fault kind in ~50 s all told (a database of the test's own: it is restarted).
    plan = SoakPlan(seconds=30, count=5, seed=20261203, pause=(2.0, 3.0), hang=(6.0, 6.5),
                    down=(1.0, 2.0), frozen_extra=(0.5, 1.0), quiet=11.0)  # fmt: skip
    with pg.start() as server:
        soak = FaultSoak(tmp_path, server, plan)
        obs = soak.run()
    findings = check(obs, soak.end_of_soak)
    assert {f.kind for f in obs.faults} == set(plan.kinds), report(findings, obs)
    assert all(f.ok for f in findings), report(findings, obs)
