"""The soak's checks on a few hundred runs (bench/soak.py runs 20,000): see soakcheck.py."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.soakcheck import Plan, Soak, report


def test_soak_short(tmp_path: Path) -> None:
    # 3 x 9 kinds + 3 variant-only jobs + 1 changing = 31 jobs a second: 300 runs in
    # about 12 s, with reloads every 2 s and a SIGSTOP/SIGCONT of 1 s every 6 s.
    soak = Soak(
        tmp_path,
        Plan(runs=300, max_seconds=20, jobs=3, reload_every=2.0, pause_every=6.0, pause_for=1.0),
    )
    checks = soak.run()
    text = f"{soak.summary()}\n{report(checks)}"
    assert all(check.ok for check in checks), text
    assert soak.record.runs >= 200, text
    assert soak.record.events["config.reloaded"] >= 3, text
    assert soak.record.pauses, text
