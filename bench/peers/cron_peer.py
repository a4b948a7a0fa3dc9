"""Debian's cron (vixie cron 3.0pl1), run in the foreground on a file in /etc/cron.d.

It needs root. The bench's jobs go to /etc/cron.d/crond-bench-N (cron ignores a file of
more than 10,000 lines, so 5,000 jobs a file), removed afterwards along with
/run/crond.reboot (removed before each start too, so that cron runs the `@reboot`
job that tells when it has loaded its files). It is skipped when another cron runs:
the bench never touches a cron it did not start. cron re-reads changed files at the
next minute only, so there is no reload to time.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from common import COMMAND, JobDef, Launched

from peers._stamp import wait_ready

CRON = Path("/usr/sbin/cron")
CRON_D = Path("/etc/cron.d")
PREFIX = "crond-bench-"  # run-parts naming (no dot), or cron ignores the file
PER_FILE = 5000
REBOOT = Path("/run/crond.reboot")


def running_crons() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "cron":
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _line(cron: str, command: str) -> str:
    return f"{cron} root {command.replace('%', chr(92) + '%')}"  # % is a newline to cron


class CronSystem:
    name = "cron"

    def missing(self) -> str | None:
        if not CRON.exists():
            return "Debian's cron is not installed (`make bench-peers` installs it as root)"
        if os.geteuid() != 0:
            return "Debian's cron needs root"
        if others := running_crons():
            return f"another cron runs (pid {others[0]}); the bench leaves it alone"
        return None

    def launch(self, jobs: Sequence[JobDef], work: Path, ready_timeout: float) -> Launched:
        ready = work / "cron-ready.txt"
        ready.unlink(missing_ok=True)
        lines = [_line(job.cron or "* * * * *", job.command) for job in jobs]
        lines.append(_line("@reboot", COMMAND.format(out=ready)))
        files = []
        for n, first in enumerate(range(0, len(lines), PER_FILE)):
            path = CRON_D / f"{PREFIX}{n}"
            head = ["SHELL=/bin/sh", "PATH=/usr/bin:/bin", 'MAILTO=""']
            path.write_text("\n".join(head + lines[first : first + PER_FILE]) + "\n")
            path.chmod(0o644)
            files.append(path)
        REBOOT.unlink(missing_ok=True)
        log = (work / "cron.log").open("ab")
        started = time.time()
        proc = subprocess.Popen([str(CRON), "-f"], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        launched = Launched(self.name, proc, started, None)
        launched.cleanup += [
            log.close,
            *[functools.partial(path.unlink, missing_ok=True) for path in files],
            lambda: REBOOT.unlink(missing_ok=True),
        ]
        return wait_ready(launched, ready, ready_timeout)
