"""yacron (PyPI), from its own venv in bench/.peers/yacron, on one YAML file.

Ready is when its `@reboot` job writes: yacron parses its file, then runs `@reboot` jobs.
It re-parses the whole file at every minute, and that is its reload (no signal).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from common import COMMAND, PEERS_DIR, JobDef, Launched

from peers._stamp import wait_ready

YACRON = PEERS_DIR / "yacron" / "bin" / "yacron"


def yacron_yaml(jobs: Sequence[JobDef], ready: Path | None) -> str:
    lines = ["defaults:", "  shell: /bin/sh", "  utc: true", "jobs:"]
    entries = [(job.name, job.cron or "* * * * *", job.command) for job in jobs]
    if ready is not None:
        entries.append(("bench-ready", "@reboot", COMMAND.format(out=ready)))
    for name, cron, command in entries:
        lines += [
            f"  - name: {name}",
            f"    command: {json.dumps(command)}",
            f'    schedule: "{cron}"',
        ]
    return "\n".join(lines) + "\n"


class YacronSystem:
    name = "yacron"

    def missing(self) -> str | None:
        if not YACRON.exists():
            return f"yacron is not installed in {YACRON.parent.parent} (`make bench-peers`)"
        return None

    def launch(self, jobs: Sequence[JobDef], work: Path, ready_timeout: float) -> Launched:
        ready = work / "yacron-ready.txt"
        ready.unlink(missing_ok=True)
        config = work / "yacron.yaml"
        config.write_text(yacron_yaml(jobs, ready))
        log = (work / "yacron.log").open("ab")
        started = time.time()
        proc = subprocess.Popen(
            [str(YACRON), "-c", str(config)], stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        launched = Launched(self.name, proc, started, None, [log.close])
        return wait_ready(launched, ready, ready_timeout)

    def validate(self, jobs: Sequence[JobDef], work: Path) -> list[str]:
        """The command line of yacron's own check of a file (`--validate-config`)."""
        config = work / "yacron-validate.yaml"
        config.write_text(yacron_yaml(jobs, None))
        return [str(YACRON), "-c", str(config), "--validate-config"]
