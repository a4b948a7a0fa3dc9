"""APScheduler 3, from its own venv in bench/.peers/apscheduler, driven by
apscheduler_baseline.py: the minimal asyncio scheduler a team would write around it.
Ready is its READY=1 on a NOTIFY_SOCKET, as for crond. No reload (a script restarts)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from common import PEERS_DIR, JobDef, Launched, NotifySocket, NotReadyError

PYTHON = PEERS_DIR / "apscheduler" / "bin" / "python"
SCRIPT = Path(__file__).with_name("apscheduler_baseline.py")


class ApschedulerSystem:
    name = "apscheduler"

    def missing(self) -> str | None:
        if not PYTHON.exists():
            return f"APScheduler 3 is not installed in {PYTHON.parent.parent} (`make bench-peers`)"
        return None

    def launch(self, jobs: Sequence[JobDef], work: Path, ready_timeout: float) -> Launched:
        table = work / "apscheduler-jobs.json"
        rows = [{"name": j.name, "cron": j.cron or "* * * * *", "command": j.command} for j in jobs]
        table.write_text(json.dumps(rows))
        notify = NotifySocket(work / "aps-notify.sock")
        log = (work / "apscheduler.log").open("ab")
        env = {**os.environ, "NOTIFY_SOCKET": str(notify.path)}
        started = time.time()
        proc = subprocess.Popen(
            [str(PYTHON), str(SCRIPT), str(table)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
        )
        launched = Launched(self.name, proc, started, None, [log.close, notify.close])
        try:
            ready = notify.wait_for(b"READY=1", time.monotonic() + ready_timeout, proc)
        except NotReadyError:
            launched.stop(timeout=10)
            raise
        launched.ready_s = ready - started
        return launched
