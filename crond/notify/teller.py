"""The Teller: what the daemon tells, and to whom (docs/alerting.md).

The daemon calls it at each start, end, miss, skip and lost run; it tells the notifiers
a job's `notify` subscribes to that event (plans.py), builds the body (body.py), keeps the
failing streaks (streaks.py), times long runs (long_running.py), sends the job's
healthchecks.io pings, and hands it all to Delivery. A job with no `notify` and no
`ping` costs one dict lookup: these calls come for every run of every job. No method
blocks or raises.

A success ends a failing streak, told as `recovered` (its `streak`: the failed runs it
ends) to a notifier that wants it, which then is not also told `succeeded`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from crond.clock import Clock
from crond.config.loaded import LoadedJob, NotifierSpec
from crond.config.model import NotifyEvent
from crond.notify import body as bodies
from crond.notify.delivery import Delivery
from crond.notify.long_running import LongRunning
from crond.notify.outbox import OutboxItem
from crond.notify.plans import Plan, plans
from crond.notify.streaks import Memory, Streaks
from crond.run.attempt import Outcome, RunResult

F = TypeVar("F", bound=Callable[..., None])


def _safe(method: F) -> F:
    """Telling must never stop scheduling: a bug here is logged, not raised."""

    @functools.wraps(method)
    def wrapper(self: Teller, *args: Any, **kwargs: Any) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            with contextlib.suppress(Exception):
                self.delivery.log.error("notify.error", error=type(exc).__name__)

    return wrapper  # type: ignore[return-value]


class Teller:
    """Turns the daemon's facts into notifications and pings; see the module docstring."""

    def __init__(
        self, delivery: Delivery, *, clock: Clock, memory: Memory | None, host: str | None = None
    ) -> None:
        self.delivery = delivery
        self.clock = clock
        self.streaks = Streaks(memory)
        self.host = host or socket.gethostname()
        self.notifiers: Mapping[str, NotifierSpec] = {}
        self._plans: dict[str, Plan] = {}
        self._long = LongRunning(clock)  # the runs' long_running timers

    @_safe
    def configure(
        self, notifiers: Mapping[str, NotifierSpec], jobs: Mapping[str, LoadedJob]
    ) -> None:
        """The file's notifiers and jobs (each load and reload); delivery's too."""
        self.notifiers = dict(notifiers)
        self._plans = plans(jobs, self.notifiers)
        pings = {name: job.ping for name, job in jobs.items() if job.ping}
        self.delivery.configure(notifiers, pings, jobs=jobs.keys())

    # -- the daemon's facts ----------------------------------------------------------

    @_safe
    def started(self, job: LoadedJob, run_id: str, slot: datetime, attempt: int) -> None:
        """An attempt started: `started`, the /start ping (a run's first attempt) and,
        once per run, the `long_running` timer."""
        plan = self._plans.get(job.name)
        if plan is None:
            return
        now = self.clock.now()
        subscribers = plan.events.get(NotifyEvent.STARTED, ())
        if subscribers:
            text = bodies.started_text(job.name, self.host)
            self._notify(subscribers, NotifyEvent.STARTED, job.name, now, text,
                         run_id=run_id, slot=slot, attempt=attempt)  # fmt: skip
        if plan.ping and attempt == 1:
            self._ping(job.name, "start", run_id, "", now)
        if plan.warn_after is not None and run_id not in self._long:
            after = plan.warn_after
            self._long.arm(
                run_id, after, functools.partial(self._long_running, job.name, run_id, slot, after)
            )

    @_safe
    def finished(
        self,
        job: LoadedJob,
        run_id: str,
        slot: datetime,
        result: RunResult,
        *,
        tail: Sequence[str],
        attempts_allowed: int,
    ) -> None:
        """A run ended (its last attempt): success, or failed after its retries."""
        self._long.disarm(run_id)
        plan = self._plans.get(job.name)
        if plan is None:
            return
        now = self.clock.now()
        output = bodies.tail_text(tail)
        if plan.ping:
            ok = result.outcome is Outcome.SUCCESS
            self._ping(job.name, "success" if ok else "fail", run_id, output, now)
        facts: dict[str, Any] = {
            "run_id": run_id,
            "slot": slot,
            "attempt": result.attempt,
            "outcome": result.outcome.value,
            "exit_code": result.exit_code,
            "duration_s": result.duration_s,
            "output_tail": output,
        }
        if result.outcome is Outcome.SUCCESS:
            self._succeeded(plan, job, now, facts)
        else:
            text = bodies.failure_text(
                job.name, self.host, result, attempts_allowed, job.settings.timeout
            )
            self._failed(plan, job, now, text, facts)

    def _failed(
        self, plan: Plan, job: LoadedJob, now: datetime, text: str, facts: dict[str, Any]
    ) -> None:
        told = plan.events.get(NotifyEvent.FAILED, ())
        for notifier in plan.streaked:
            streak = self.streaks.get(notifier, job.name)
            streak.failed += 1
            if notifier in told and streak.due(now, self.notifiers[notifier].repeat):
                streak.sent = now.timestamp()
                self._notify((notifier,), NotifyEvent.FAILED, job.name, now, text,
                             streak=streak.failed, **facts)  # fmt: skip
            self.streaks.save(notifier, job.name, streak)

    def _succeeded(self, plan: Plan, job: LoadedJob, now: datetime, facts: dict[str, Any]) -> None:
        recovered = set()
        wants_recovered = plan.events.get(NotifyEvent.RECOVERED, ())
        for notifier in plan.streaked:
            ended = self.streaks.end(notifier, job.name)
            if ended and notifier in wants_recovered:
                text = bodies.recovered_text(job.name, self.host, ended)
                self._notify((notifier,), NotifyEvent.RECOVERED, job.name, now, text,
                             streak=ended, **facts)  # fmt: skip
                recovered.add(notifier)
        succeeded = [n for n in plan.events.get(NotifyEvent.SUCCEEDED, ()) if n not in recovered]
        if succeeded:
            text = bodies.success_text(job.name, self.host, facts["duration_s"])
            self._notify(succeeded, NotifyEvent.SUCCEEDED, job.name, now, text, **facts)

    @_safe
    def missed(
        self, job: LoadedJob, count: int, first: datetime, last: datetime, reason: str | None = None
    ) -> None:
        """`count` slots, `first` to `last`, were not started."""
        plan = self._plans.get(job.name)
        if plan is None or count <= 0:
            return
        subscribers = plan.events.get(NotifyEvent.MISSED, ())
        if subscribers:
            text = bodies.missed_text(job.name, self.host, count, first, last, reason=reason)
            now = self.clock.now()
            self._notify(subscribers, NotifyEvent.MISSED, job.name, now, text, slot=first)

    @_safe
    def skipped(self, job: LoadedJob, slot: datetime, reason: str) -> None:
        """The run of `slot` was not started (the previous one still runs)."""
        plan = self._plans.get(job.name)
        if plan is None:
            return
        subscribers = plan.events.get(NotifyEvent.SKIPPED, ())
        if subscribers:
            text = bodies.skipped_text(job.name, self.host, reason)
            now = self.clock.now()
            self._notify(subscribers, NotifyEvent.SKIPPED, job.name, now, text, slot=slot)

    @_safe
    def lost(self, job_name: str, run_id: str, slot: datetime) -> None:
        """A run a dead daemon left: `lost`, and a /fail ping."""
        self._long.disarm(run_id)
        plan = self._plans.get(job_name)
        if plan is None:
            return
        now = self.clock.now()
        text = bodies.lost_text(job_name, self.host)
        subscribers = plan.events.get(NotifyEvent.LOST, ())
        if subscribers:
            self._notify(subscribers, NotifyEvent.LOST, job_name, now, text,
                         run_id=run_id, slot=slot, outcome="lost")  # fmt: skip
        if plan.ping:
            self._ping(job_name, "fail", run_id, text, now)

    def close(self) -> None:
        """Disarm every long_running timer (the daemon stops)."""
        self._long.close()

    # -- long_running ----------------------------------------------------------------

    @_safe
    def _long_running(self, job: str, run_id: str, slot: datetime, after: timedelta) -> None:
        self._long.fired(run_id)
        plan = self._plans.get(job)
        if plan is None:
            return
        subscribers = plan.events.get(NotifyEvent.LONG_RUNNING, ())
        if subscribers:
            text = bodies.long_running_text(job, self.host, after)
            now = self.clock.now()
            self._notify(subscribers, NotifyEvent.LONG_RUNNING, job, now, text,
                         run_id=run_id, slot=slot, duration_s=after.total_seconds())  # fmt: skip

    # -- the parts -------------------------------------------------------------------

    def _notify(
        self,
        notifiers: Sequence[str],
        event: NotifyEvent,
        job: str,
        now: datetime,
        text: str,
        **facts: Any,
    ) -> None:
        data = bodies.body(event.value, job, self.host, now, text, **facts)
        created = now.timestamp()
        for notifier in notifiers:
            self.delivery.put(OutboxItem("notify", notifier, job, event.value, data, created))

    def _ping(self, job: str, signal: str, run_id: str, tail: str, now: datetime) -> None:
        data = json.dumps({"rid": run_id, "tail": tail}, ensure_ascii=False)
        self.delivery.put(OutboxItem("ping", "", job, signal, data, now.timestamp()))
