"""`crond backfill` with the real `crond` binary (docs/schedules.md, "Backfill"): the slots
run oldest first, once each, across a `kill -9` of the daemon; `--wait`'s exit status;
`crond kill` stops a backfill; the refusals. Each job stamps its own `CROND_SLOT`."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from crond.clock import iso_utc
from crond.store import sqlite
from tests.e2e.harness import CROND, Crond, eventually, run_cli
from tests.e2e.replicas import Replica, attempts, schedules, start_replica
from tests.e2e.test_daemon import start

# A whole hour well in the past: the range of every backfill here (cron every minute).
FROM = (datetime.now(UTC) - timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)


def iso(minutes: int) -> str:
    return (FROM + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


FILE = """\
daemon: {{control_socket: {sock}}}
jobs:
  stamp:
    cron: '* * * * *'
    command: >-
      echo "$CROND_SLOT" >> {out};
      case "$CROND_SLOT" in {slow}) sleep 60;; {bad}) exit 3;; esac
  other: {{every: 1h, command: 'true'}}
"""


def setup(tmp_path: Path, *, slow: str = "never", bad: str = "never") -> tuple[Path, Path, Path]:
    out, sock = tmp_path / "stamps", tmp_path / "crond.sock"
    f = tmp_path / "s.yaml"
    f.write_text(FILE.format(sock=sock, out=out, slow=slow, bad=bad))
    return f, out, tmp_path / "state"


def started(crond: list[Crond], tmp_path: Path, **commands: str) -> tuple[Path, Path, Path, Crond]:
    """`setup`, and a daemon running the file, its store in the state directory."""
    f, out, state = setup(tmp_path, **commands)
    d = start(crond, str(f), "--state-dir", str(state))
    d.wait_for("daemon.started")
    return f, out, state, d


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def stamps(out: Path) -> list[str]:
    """The slots the job ran for in the backfill's range (not its own scheduled ones)."""
    lines = out.read_text().split() if out.exists() else []
    return [s for s in lines if s < iso(60)]


def test_a_backfill_of_50_slots_killed_9_at_the_20th_resumes_each_slot_once(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f, out, state, d = started(crond, tmp_path, slow=iso(19))
    begun = cli("backfill", str(f), "stamp", "--from", iso(0), "--to", iso(50))
    assert begun.returncode == 0, begun.stderr
    backfill_id = begun.stdout.strip()
    # The 20th slot's run is spawned (it stamps, then sleeps): the daemon dies under it.
    d.wait_for("job.started", lambda e: e["slot"] == iso(19), timeout=30)
    status = cli("status", str(f), "--state-dir", str(state))
    assert f"backfill {backfill_id} of stamp: 19/50 done (0 failed), next slot {iso(19)}" in (
        status.stdout
    )
    d.proc.send_signal(signal.SIGKILL)
    d.exited()
    again = start(crond, str(f), "--state-dir", str(state))
    resumed = again.wait_for("backfill.resumed")
    assert resumed["backfill_id"] == backfill_id
    assert resumed["next_slot"] == iso(20)  # after the slot whose run was lost
    finished = again.wait_for("backfill.finished", timeout=60)
    assert (finished["succeeded"], finished["failed"], finished["slots"]) == (49, 1, 50)
    assert again.stop() == 0
    assert stamps(out) == [iso(m) for m in range(50)]  # each once, oldest first
    store = sqlite.SqliteStore(state)
    try:
        runs = [a for a in store.recent("stamp", 200) if a.kind == "backfill"]
        assert sorted(a.slot for a in runs) == [FROM + timedelta(minutes=m) for m in range(50)]
        assert [a.outcome for a in runs if a.outcome != "success"] == ["lost"]
        (row,) = store.backfills(going=False)
        assert (row.state, row.started, row.succeeded) == ("finished", 50, 49)
    finally:
        store.close()
    history = cli("history", str(f), "stamp", "-n", "1", "--json", "--state-dir", str(state))
    assert json.loads(history.stdout)["kind"] == "backfill"


def test_status_counts_a_run_lost_to_a_kill_9_as_done_and_failed(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f, _, state, d = started(crond, tmp_path, slow=f"{iso(2)}|{iso(4)}")
    begun = cli("backfill", str(f), "stamp", "--from", iso(0), "--to", iso(6))
    assert begun.returncode == 0, begun.stderr
    backfill_id = begun.stdout.strip()
    d.wait_for("job.started", lambda e: e["slot"] == iso(2), timeout=30)
    d.proc.send_signal(signal.SIGKILL)  # the third slot's run is lost
    d.exited()
    again = start(crond, str(f), "--state-dir", str(state))
    resumed = again.wait_for("backfill.resumed")
    assert resumed["done"] == 3
    again.wait_for("job.started", lambda e: e["slot"] == iso(4), timeout=30)
    # As the log counts it: the lost run is done, and failed.
    status = cli("status", str(f), "--state-dir", str(state))
    assert f"backfill {backfill_id} of stamp: 4/6 done (1 failed), next slot {iso(4)}" in (
        status.stdout
    ), status.stdout
    shown = cli("status", str(f), "--state-dir", str(state), "--json")
    rows = {row["job"]: row for row in map(json.loads, shown.stdout.splitlines())}
    assert (rows["stamp"]["backfill"]["done"], rows["stamp"]["backfill"]["failed"]) == (4, 1)
    assert cli("kill", str(f), "stamp").returncode == 0
    cancelled = again.wait_for("backfill.cancelled")
    assert (cancelled["done"], cancelled["total"]) == (4, 6)
    assert again.stop() == 0


def test_wait_exits_0_when_every_slot_succeeded_1_otherwise(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f, out, _, d = started(crond, tmp_path, bad=iso(1))
    good = cli("backfill", str(f), "stamp", "--from", iso(2), "--to", iso(4), "--wait")
    assert good.returncode == 0, good.stderr
    assert [line.split()[:2] for line in good.stdout.splitlines()] == [
        [iso(2), "success"],
        [iso(3), "success"],
    ]
    assert "finished, 2/2 slots (2 succeeded, 0 failed)" in good.stderr
    bad = cli("backfill", str(f), "stamp", "--from", iso(0), "--to", iso(2), "--wait")
    assert bad.returncode == 1
    assert [line.split()[1] for line in bad.stdout.splitlines()] == ["success", "failed"]
    assert "(1 succeeded, 1 failed)" in bad.stderr
    assert stamps(out) == [iso(2), iso(3), iso(0), iso(1)]
    assert d.stop() == 0


def test_kill_stops_the_backfill_its_run_and_the_rest(tmp_path: Path, crond: list[Crond]) -> None:
    f, out, _, d = started(crond, tmp_path, slow=iso(1))
    waiting = subprocess.Popen(
        [CROND, "backfill", str(f), "stamp", "--from", iso(0), "--to", iso(5), "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        going = d.wait_for("job.started", lambda e: e["slot"] == iso(1))
        again = cli("backfill", str(f), "stamp", "--from", iso(0), "--to", iso(5))
        assert again.returncode == 1
        assert "a backfill of stamp is already going" in again.stderr
        killed = cli("kill", str(f), "stamp")
        assert killed.returncode == 0, killed.stderr
        assert "cancelled, 1/5 slots" in killed.stdout
        stdout, stderr = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 1
    assert "cancelled" in stderr
    cancelled = d.wait_for("backfill.cancelled")
    assert (cancelled["reason"], cancelled["done"], cancelled["total"]) == ("kill", 1, 5)
    ended = d.wait_for("job.finished", lambda e: e["run_id"] == going["run_id"])
    assert ended["outcome"] == "killed"
    d.wait_for("backfill.slot_finished", lambda e: e["slot"] == iso(1))
    assert stamps(out) == [iso(0), iso(1)]  # nothing after the kill
    assert not d.named("backfill.finished")
    assert cli("kill", str(f), "stamp").returncode == 1  # nothing left to stop
    assert d.stop() == 0
    assert stdout.splitlines()[0].split()[:2] == [iso(0), "success"]


def tomorrow() -> str:
    return (datetime.now(UTC) + timedelta(days=1)).isoformat()


REFUSALS = [  # (the others, in-process: tests/daemon/test_backfill_fake_clock.py)
    (["stamps", iso(0), iso(5)], "no job 'stamps' in the file (did you mean 'stamp'?)"),
    (["stamp", iso(0), tomorrow()], "is in the future: a backfill runs stamp's past slots"),
]


def test_refusals_say_why_and_exit_1(tmp_path: Path, crond: list[Crond]) -> None:
    f, _, _, d = started(crond, tmp_path)
    for (job, begin, end), said in REFUSALS:
        refused = cli("backfill", str(f), job, "--from", begin, "--to", end)
        assert (refused.returncode, said in refused.stderr) == (1, True), refused.stderr
        assert "Traceback" not in refused.stderr
    assert not d.named("backfill.started")
    assert d.stop() == 0


def test_dry_run_refuses_the_same_mistakes_in_the_same_words(
    tmp_path: Path, crond: list[Crond]
) -> None:
    f, _, _, d = started(crond, tmp_path)
    mistakes = [
        (["stamps", "--from", iso(0), "--to", iso(5)], "(did you mean 'stamp'?)"),
        (["stamp", "--from", iso(5), "--to", iso(0)], f"--to ({iso(0)}) must be after --from"),
    ]
    for args, said in mistakes:
        dry = cli("backfill", str(f), *args, "--dry-run")
        real = cli("backfill", str(f), *args)
        assert (dry.returncode, dry.stderr) == (real.returncode, real.stderr)
        assert dry.returncode == 1
        assert said in dry.stderr
        assert "+00:00" not in dry.stderr
        assert "Traceback" not in dry.stderr
    assert not d.named("backfill.started")
    assert d.stop() == 0


def test_no_daemon_exits_2(tmp_path: Path) -> None:
    f, _, _ = setup(tmp_path)
    refused = cli("backfill", str(f), "stamp", "--from", iso(0), "--to", iso(5))
    assert refused.returncode == 2
    assert "no crond is running for" in refused.stderr


def test_two_replicas_run_each_slot_of_one_backfill_once(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    """The backfill begun on r0 is driven by both (r1 takes it up at its heartbeat): each
    slot claimed once across them, never two runs of the job at once, oldest first; and
    each logs it finished, whichever ran its last slot (not cancelled: it was not)."""
    out = tmp_path / "stamps"
    job = f"""\
        stamp: {{cron: '* * * * *', command: 'echo "$CROND_SLOT" >> {out}; sleep 0.2'}}
        """
    f = schedules(tmp_path / "s.yaml", pg_url, job)
    r0 = start_replica(group, f, "r0", tmp_path)
    r1 = start_replica(group, f, "r1", tmp_path)
    for r in (r0, r1):
        r.daemon.wait_for("daemon.started", timeout=20)
    begun = cli("backfill", str(f), "stamp", "--from", iso(0), "--to", iso(20), "--socket",
                str(r0.socket))  # fmt: skip
    assert begun.returncode == 0, begun.stderr
    r1.daemon.wait_for("backfill.resumed", timeout=20)  # r1 took it up
    for r in (r0, r1):  # each with its own tally: no run failed
        ended = r.daemon.wait_for("backfill.finished", timeout=30)
        assert (ended["slots"], ended["failed"]) == (20, 0)
        assert not r.daemon.named("backfill.cancelled")
    rows = [a for a in attempts(pg_url, job="stamp") if a.slot < FROM + timedelta(hours=1)]
    # r0 began it: it tells of every slot, with the outcome of those it ran.
    told = [
        (e["slot"], e["outcome"] is not None) for e in r0.daemon.named("backfill.slot_finished")
    ]
    assert told == [
        (iso_utc(a.slot), a.replica == "r0") for a in sorted(rows, key=lambda a: a.slot)
    ]
    assert sorted(a.slot for a in rows) == [FROM + timedelta(minutes=m) for m in range(20)]
    assert stamps(out)[:20] == [iso(m) for m in range(20)]  # once each, oldest first
    assert len(stamps(out)) == 20
    spans = sorted((a.started, a.finished, a.replica) for a in rows)
    overlaps = [
        (first, then)
        for first, then in itertools.pairwise(spans)
        if first[1] is None or first[1] > then[0]
    ]
    assert overlaps == [], spans  # (started, finished, replica) of every run, if not
    assert {a.replica for a in rows} <= {"r0", "r1"}


def test_a_kill_on_one_replica_cancels_the_backfill_on_both(
    tmp_path: Path, group: list[Replica], pg_url: str
) -> None:
    """`crond kill FILE JOB` asked of r0 stops the backfill for the cluster: r0 logs it
    cancelled (reason `kill`), r1 too once it finds it ended (reason `cluster`, not
    finished), and no later slot runs on either."""
    out = tmp_path / "stamps"
    command = f'echo "$CROND_SLOT" >> {out}; case "$CROND_SLOT" in {iso(3)}) sleep 60;; esac'
    f = schedules(
        tmp_path / "s.yaml", pg_url, f"stamp: {{cron: '* * * * *', command: '{command}'}}"
    )
    r0 = start_replica(group, f, "r0", tmp_path)
    r1 = start_replica(group, f, "r1", tmp_path)
    for r in (r0, r1):
        r.daemon.wait_for("daemon.started", timeout=20)
    begun = cli("backfill", str(f), "stamp", "--from", iso(0), "--to", iso(10), "--socket",
                str(r0.socket))  # fmt: skip
    assert begun.returncode == 0, begun.stderr
    r1.daemon.wait_for("backfill.resumed", timeout=20)
    eventually(lambda: iso(3) in stamps(out), timeout=30, what="the slot that sleeps began")
    killed = cli("kill", str(f), "stamp", "--socket", str(r0.socket))
    assert killed.returncode == 0, killed.stderr
    assert r0.daemon.wait_for("backfill.cancelled", timeout=10)["reason"] == "kill"
    assert r1.daemon.wait_for("backfill.cancelled", timeout=10)["reason"] == "cluster"
    assert not [r for r in (r0, r1) if r.daemon.named("backfill.finished")]
    assert stamps(out) == [iso(m) for m in range(4)]  # nothing after the kill
