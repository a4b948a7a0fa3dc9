"""A minimal asyncio cron daemon on APScheduler 3: the baseline a team writes in an hour.

    PYTHON apscheduler_baseline.py JOBS.json

JOBS.json is a list of {"name", "cron", "command"}; each job runs `/bin/sh -c command`
with asyncio's subprocess support, its output inherited. It sends READY=1 to
$NOTIFY_SOCKET once the scheduler runs, and stops on SIGTERM. It runs in its own venv
with `apscheduler<4` (bench/.peers/apscheduler), never in crond's: hence the dynamic
imports, which also keep mypy from looking for APScheduler.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import socket
import sys
from pathlib import Path


def notify(state: str) -> None:
    address = os.environ.get("NOTIFY_SOCKET")
    if address:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(state.encode(), address)


async def run(command: str) -> None:
    proc = await asyncio.create_subprocess_exec("/bin/sh", "-c", command)
    await proc.wait()


async def main(path: Path) -> None:
    schedulers = importlib.import_module("apscheduler.schedulers.asyncio")
    triggers = importlib.import_module("apscheduler.triggers.cron")
    scheduler = schedulers.AsyncIOScheduler(timezone="UTC")
    for job in json.loads(path.read_text()):
        scheduler.add_job(
            run,
            triggers.CronTrigger.from_crontab(job["cron"], timezone="UTC"),
            args=[job["command"]],
            id=job["name"],
            misfire_grace_time=300,
            coalesce=True,
            max_instances=1,
        )
    scheduler.start()
    notify("READY=1")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    scheduler.shutdown(wait=False)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
