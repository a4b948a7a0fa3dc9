"""A pause and resume of thousands of jobs with the real binary (docs/control.md): a job
due meanwhile still starts on time, and the pauses are all kept, across a restart."""

from __future__ import annotations

import json
import statistics
import threading
from pathlib import Path

from tests.e2e.harness import Crond, run_cli

MANY = 3000
LOOSE_MS = 200.0  # the median lag of the due job's starts; one pause held the loop ~1 s


def steer(f: Path, state: Path, *args: str) -> tuple[int, str]:
    done = run_cli(*args[:1], str(f), *args[1:], "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    return done.returncode, done.stdout


def start(crond: list[Crond], f: Path, state: Path) -> Crond:
    daemon = Crond([str(f), "--state-dir", str(state)])
    crond.append(daemon)
    daemon.wait_for("control.listening")
    return daemon


def test_a_job_due_during_a_pause_of_thousands_starts_on_time(
    tmp_path: Path, crond: list[Crond]
) -> None:
    names = [f"f{i}" for i in range(MANY)]
    far = "".join(f"  {n}: {{cron: '0 0 1 1 *', command: 'true'}}\n" for n in names)
    f = tmp_path / "s.yaml"
    f.write_text("jobs:\n  tick: {every: 1s, command: 'true'}\n" + far)
    state = tmp_path / "st"
    daemon = start(crond, f, state)
    daemon.wait_for("job.started", lambda e: e["job"] == "tick", timeout=30)
    stop, rounds = threading.Event(), [0]

    def pause_and_resume() -> None:  # back to back, as fast as the daemon answers
        while not stop.is_set():
            steer(f, state, "pause", *names)
            steer(f, state, "resume", "--all")
            rounds[0] += 1

    thread = threading.Thread(target=pause_and_resume, daemon=True)
    thread.start()
    try:
        daemon.wait_for("job.resumed", timeout=30)  # a first pause applied: they overlap now
        lags = [
            daemon.wait_for("job.started", lambda e: e["job"] == "tick")["lag_ms"] for _ in range(3)
        ]
    finally:
        stop.set()
        thread.join(60)
    assert rounds[0] >= 1
    assert statistics.median(lags) < LOOSE_MS, lags

    # The final state: all paused, kept in the store, held by the next daemon too.
    steer(f, state, "pause", *names, "--note", "many")
    daemon.stop()
    again = start(crond, f, state)
    rows = [json.loads(line) for line in steer(f, state, "status", "--json")[1].splitlines()]
    paused = {r["job"] for r in rows if r["paused"] is not None}
    assert paused == set(names)
    _, out = steer(f, state, "resume", "--all")
    assert len([line for line in out.splitlines() if line.startswith("resumed ")]) == MANY
    rows = [json.loads(line) for line in steer(f, state, "status", "--json")[1].splitlines()]
    assert not [r for r in rows if r["paused"] is not None]
    again.stop()
