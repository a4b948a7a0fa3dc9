"""`crond run-job FILE JOB`: one run of a job now, with its retries, as the daemon would
run it, in the foreground; its exit status is the job's (docs/running.md).
"""

from __future__ import annotations

import asyncio
import signal

from structlog.typing import FilteringBoundLogger

from crond.clock import SystemClock
from crond.config.loaded import LoadedJob
from crond.run import runner


def exit_status(result: runner.RunResult) -> int:
    """A job's result as a process exit status, as shells and timeout(1) report them."""
    if result.outcome is runner.Outcome.SUCCESS:
        return 0
    if result.outcome is runner.Outcome.TIMEOUT:
        return 124
    code = result.exit_code
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def run_once(job: LoadedJob, log: FilteringBoundLogger) -> int:
    """`crond run-job`: one run now (with its retries), as the daemon would; Ctrl-C stops it
    as for a timeout, a second Ctrl-C kills it."""

    async def main() -> int:
        clock = SystemClock()
        async with asyncio.TaskGroup() as tasks:  # the run's work is a task of this group
            spec = runner.spec_for(job)
            run = runner.start_run(spec, clock.now(), tasks=tasks, clock=clock, log=log)
            aio = asyncio.get_running_loop()
            stops = 0

            def on_signal() -> None:
                nonlocal stops
                stops += 1
                run.stop() if stops == 1 else run.kill()

            for signum in (signal.SIGTERM, signal.SIGINT):
                aio.add_signal_handler(signum, on_signal)
        return exit_status(await run.wait())  # done: the group has waited for it

    return asyncio.run(main())
