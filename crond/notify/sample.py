"""`crond notify FILE NOTIFIER`: one sample notification, sent as the daemon sends one
(docs/alerting.md, Testing a notifier). The body comes from the same builder
(crond/notify/body.py), the try from the same senders with the daemon's timeout; there is
one try, no retry and no outbox, so that the person at the command line sees at once
whether it went and, if not, why.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from crond.config.loaded import NotifierSpec
from crond.config.model import NotifyEvent
from crond.notify import body as bodies
from crond.notify.errors import SendError
from crond.notify.outbox import OutboxItem
from crond.notify.senders import Senders
from crond.run.attempt import Outcome, RunResult

TRY_TIMEOUT: Final = 10.0  # seconds: a try's bound in the daemon (Delivery's try_timeout)
SAMPLE_JOB: Final = "crond-sample"
SAMPLE_RUN_ID: Final = "00000000-0000-4000-8000-000000000000"


_FAILED_FACTS: Final = {
    "outcome": "failed",
    "exit_code": 1,
    "duration_s": 2.5,
    "streak": 1,
    "output_tail": "this is a sample: no job ran",
}


@dataclass(frozen=True)
class _One:
    """The Destinations of one try: this notifier, every job."""

    notifiers: Mapping[str, NotifierSpec]
    pings: Mapping[str, str] = field(default_factory=dict)
    jobs: Collection[str] | None = None


def sample_body(event: NotifyEvent, at: datetime, host: str | None = None) -> str:
    """The JSON body the daemon would send for `event` of a made-up job, marked as a
    sample in its text."""
    host = host or socket.gethostname()
    job = SAMPLE_JOB
    slot = at.replace(second=0, microsecond=0)
    run: dict[str, Any] = {"run_id": SAMPLE_RUN_ID, "slot": slot, "attempt": 1}
    failed = RunResult(Outcome.FAILED, 1, 2.5, 1)
    texts: dict[NotifyEvent, tuple[str, dict[str, Any]]] = {
        NotifyEvent.STARTED: (bodies.started_text(job, host), run),
        NotifyEvent.SUCCEEDED: (
            bodies.success_text(job, host, 2.5),
            {**run, "outcome": "success", "exit_code": 0, "duration_s": 2.5, "output_tail": ""},
        ),
        NotifyEvent.FAILED: (
            bodies.failure_text(job, host, failed, 1, None),
            {**run, **_FAILED_FACTS},
        ),
        NotifyEvent.RECOVERED: (bodies.recovered_text(job, host, 2), {**run, "streak": 2}),
        NotifyEvent.MISSED: (bodies.missed_text(job, host, 1, slot, slot, reason="grace"), {}),
        NotifyEvent.SKIPPED: (bodies.skipped_text(job, host, "overlap"), {"slot": slot}),
        NotifyEvent.LOST: (bodies.lost_text(job, host), run),
        NotifyEvent.LONG_RUNNING: (
            bodies.long_running_text(job, host, timedelta(hours=1)),
            {**run, "duration_s": 3600.0},
        ),
    }
    text, facts = texts[event]
    return bodies.body(event.value, job, host, at, f"[sample] {text}", **facts)


async def send_once(spec: NotifierSpec, event: NotifyEvent, data: str) -> str | None:
    """One try of `data` to `spec`, bounded as the daemon bounds one; None when sent,
    else why not (a sentence that holds no URL, header or command)."""
    senders = Senders(try_timeout=TRY_TIMEOUT, connections=1, threads=1)
    item = OutboxItem("notify", spec.name, SAMPLE_JOB, event.value, data, 0.0)
    try:
        async with asyncio.timeout(TRY_TIMEOUT + 1):  # the senders' own, + slack
            await senders.send(item, _One({spec.name: spec}))
    except SendError as exc:
        return exc.error
    except TimeoutError:
        return "timed out"
    except Exception as exc:  # noqa: BLE001  (the type only: a message may hold a URL)
        return type(exc).__name__
    finally:
        await senders.aclose()
    return None
