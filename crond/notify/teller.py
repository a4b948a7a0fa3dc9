"""The Teller: what the daemon tells, and to whom (docs/alerting.md).

The daemon calls it at each start, end, miss, skip and lost run; it decides which
notifiers a job's `notify` subscribes to that event, builds the body (body.py), keeps the
failing streaks, sends the job's healthchecks.io pings, and hands it all to Delivery.
A job with no `notify` and no `ping` costs one dict lookup: these calls come for every
run of every job. No method blocks or raises.

Streaks, per notifier and job: the first `failed` run of a streak is told at once, later
ones at most once per the notifier's `repeat` (0s: every one), each with `streak`, the
failed runs so far. A success ends the streak, told as `recovered` (its `streak`: the
failed runs it ends) to a notifier that wants it, which then is not also told
`succeeded`. A streak survives a restart through `Memory` (the state store's meta table):
`streak:NOTIFIER:JOB` holds `{"failed": N, "sent": EPOCH}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from crond.clock import Clock, Timer
from crond.config.loaded import LoadedJob, NotifierSpec
from crond.config.model import NotifyEvent
from crond.notify import body as bodies
from crond.notify.delivery import Delivery
from crond.notify.outbox import OutboxItem
from crond.run.attempt import Outcome, RunResult

F = TypeVar("F", bound=Callable[..., None])


class Memory(Protocol):
    """Small strings kept across daemon restarts. Neither method raises."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


@dataclass(frozen=True)
class _Plan:
    """What one job tells: its subscribers per event, the notifiers whose streak it
    keeps, whether it pings, and when a run is long."""

    events: dict[NotifyEvent, tuple[str, ...]]
    streaked: tuple[str, ...]  # subscribed to failed or recovered
    ping: bool
    warn_after: timedelta | None  # only when someone is told `long_running`


@dataclass
class _Streak:
    failed: int = 0  # failed runs in a row
    sent: float | None = None  # epoch seconds of the last `failed` told


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
        self.memory = memory
        self.host = host or socket.gethostname()
        self.notifiers: Mapping[str, NotifierSpec] = {}
        self._plans: dict[str, _Plan] = {}
        self._streaks: dict[tuple[str, str], _Streak] = {}
        self._long: dict[str, Timer] = {}  # run_id -> its long_running timer

    @_safe
    def configure(
        self, notifiers: Mapping[str, NotifierSpec], jobs: Mapping[str, LoadedJob]
    ) -> None:
        """The file's notifiers and jobs (each load and reload); delivery's too."""
        self.notifiers = dict(notifiers)
        plans = {}
        for name, job in jobs.items():
            plan = self._plan(job)
            if plan is not None:
                plans[name] = plan
        self._plans = plans
        pings = {name: job.ping for name, job in jobs.items() if job.ping}
        self.delivery.configure(notifiers, pings, jobs=jobs.keys())

    def _plan(self, job: LoadedJob) -> _Plan | None:
        events: dict[NotifyEvent, list[str]] = {}
        for notifier, wanted in job.settings.notify.items():
            if notifier not in self.notifiers:
                continue  # the loader refuses this; a stale one must not fail here
            for event in dict.fromkeys(wanted):
                events.setdefault(NotifyEvent(event), []).append(notifier)
        if not events and not job.ping:
            return None
        failed = events.get(NotifyEvent.FAILED, [])
        recovered = events.get(NotifyEvent.RECOVERED, [])
        warn_after = job.settings.warn_after if NotifyEvent.LONG_RUNNING in events else None
        return _Plan(
            events={event: tuple(names) for event, names in events.items()},
            streaked=tuple(dict.fromkeys([*failed, *recovered])),
            ping=bool(job.ping),
            warn_after=warn_after or None,
        )

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
            self._arm(job.name, run_id, slot, plan.warn_after)

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
        self._disarm(run_id)
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
        self, plan: _Plan, job: LoadedJob, now: datetime, text: str, facts: dict[str, Any]
    ) -> None:
        told = plan.events.get(NotifyEvent.FAILED, ())
        for notifier in plan.streaked:
            streak = self._streak(notifier, job.name)
            streak.failed += 1
            if notifier in told and self._due(notifier, streak, now):
                streak.sent = now.timestamp()
                self._notify((notifier,), NotifyEvent.FAILED, job.name, now, text,
                             streak=streak.failed, **facts)  # fmt: skip
            self._save(notifier, job.name, streak)

    def _due(self, notifier: str, streak: _Streak, now: datetime) -> bool:
        """Is this failed run of a streak told? The first always; later ones once
        `repeat` has passed since the last told."""
        repeat = self.notifiers[notifier].repeat.total_seconds()
        if streak.failed == 1 or streak.sent is None or repeat <= 0:
            return True
        return now.timestamp() - streak.sent >= repeat

    def _succeeded(self, plan: _Plan, job: LoadedJob, now: datetime, facts: dict[str, Any]) -> None:
        recovered = set()
        wants_recovered = plan.events.get(NotifyEvent.RECOVERED, ())
        for notifier in plan.streaked:
            streak = self._streak(notifier, job.name)
            if not streak.failed:
                continue
            ended = streak.failed
            self._save(notifier, job.name, _Streak())
            self._streaks[notifier, job.name] = _Streak()
            if notifier in wants_recovered:
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
        self._disarm(run_id)
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
        for handle in self._long.values():
            handle.cancel()
        self._long.clear()

    # -- long_running ----------------------------------------------------------------

    def _arm(self, job: str, run_id: str, slot: datetime, after: timedelta) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a test, a tool): no timer
            return
        when = self.clock.now() + after
        self._long[run_id] = self.clock.call_at(
            when, functools.partial(self._long_running, job, run_id, slot, after)
        )

    def _disarm(self, run_id: str) -> None:
        handle = self._long.pop(run_id, None)
        if handle is not None:
            handle.cancel()

    @_safe
    def _long_running(self, job: str, run_id: str, slot: datetime, after: timedelta) -> None:
        self._long.pop(run_id, None)
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

    def _streak(self, notifier: str, job: str) -> _Streak:
        key = (notifier, job)
        streak = self._streaks.get(key)
        if streak is None:
            streak = self._streaks[key] = self._recall(notifier, job)
        return streak

    def _recall(self, notifier: str, job: str) -> _Streak:
        if self.memory is None:
            return _Streak()
        try:
            text = self.memory.get(_memory_key(notifier, job))
            if not text:
                return _Streak()
            data = json.loads(text)
            sent = data.get("sent")
            return _Streak(int(data.get("failed", 0)), None if sent is None else float(sent))
        except Exception:  # noqa: BLE001  (a damaged value: a new streak)
            return _Streak()

    def _save(self, notifier: str, job: str, streak: _Streak) -> None:
        if self.memory is None:
            return
        value = json.dumps({"failed": streak.failed, "sent": streak.sent})
        with contextlib.suppress(Exception):
            self.memory.set(_memory_key(notifier, job), value)


def _memory_key(notifier: str, job: str) -> str:
    return f"streak:{notifier}:{job}"
