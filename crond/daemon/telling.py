"""What the daemon tells, wired to its loop: notifiers and pings (crond/notify/teller.py
and delivery.py) and metrics (crond/notify/metrics.py, served with /healthz by
crond/daemon/serving.py).

`Telling` hears, through the daemon (the loop's Effects), each slot's decision and
each run's start and end, synchronously, and it hands them on — a notification to the
delivery queue, a count to the metrics — without ever waiting. Each part exists only
when the file (or `crond run --metrics`) asks for it, and its library is imported only
then: a daemon without notifiers, pings or metrics pays nothing for them.

docs/alerting.md is the user's side of this.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator, Sequence
from typing import TYPE_CHECKING, Literal

from structlog.typing import FilteringBoundLogger

from crond import __version__
from crond.clock import Clock
from crond.config.loaded import LoadedConfig, LoadedJob, secret_names
from crond.daemon.loop import Loop
from crond.daemon.offloop import SLOW  # the start's reads: the loop is not yet scheduling
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED, Failed
from crond.notify import command
from crond.run import runner
from crond.schedule.rules import Decision
from crond.store.base import AttemptRow, OutboxRow

if TYPE_CHECKING:
    from crond.notify.delivery import Delivery
    from crond.notify.metrics import Metrics
    from crond.notify.outbox import OutboxItem, StoredItem
    from crond.notify.teller import Teller

# At a stop, what is still queued is tried for at most this long (what is left stays in
# the state store, for the next start).
SHUTDOWN_GRACE_S = 5.0


class Telling:
    """Notifiers, pings and metrics for one daemon; `configure` at each load."""

    def __init__(
        self,
        *,
        log: FilteringBoundLogger,
        clock: Clock,
        loop: Loop[runner.Run],
        recorder: StoreRecorder,
    ) -> None:
        self.log = log
        self.clock = clock
        self.loop = loop
        self.recorder = recorder
        self.teller: Teller | None = None
        self.delivery: Delivery | None = None
        self.metrics: Metrics | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._sending: asyncio.Task[None] | None = None
        self._memory: _StoreMemory | None = None  # the streaks' (with a teller)

    # --- configuration ----------------------------------------------------------------

    def configure(self, cfg: LoadedConfig, metrics: str | None) -> None:
        """A file just loaded: its notifiers and pings; metrics when they are served, at
        `metrics` (HOST:PORT, the flag's or the file's: crond/daemon/serving.py)."""
        wants = bool(cfg.notifiers) or any(job.ping for job in cfg.jobs.values())
        if wants and self.teller is None:
            self._make_teller()
        if self.teller is not None:
            command.withhold(secret_names(cfg))
            self.teller.configure(cfg.notifiers, cfg.jobs)
        if metrics is not None and self.metrics is None:
            from crond.notify.metrics import Metrics  # noqa: PLC0415  (only when on)

            self.metrics = Metrics(__version__, self._live, clock=self.clock, locks=self._locks)
        if self.metrics is not None:
            self.metrics.set_jobs(cfg.jobs)
            self.metrics.set_notifiers(cfg.notifiers)  # and "ping", always
        self._start_delivery()

    def _make_teller(self) -> None:
        from crond.notify.delivery import Delivery  # noqa: PLC0415  (only when used)
        from crond.notify.teller import Teller  # noqa: PLC0415

        outbox = _StoreOutbox(self.recorder) if self.recorder.opener is not None else None
        self.delivery = Delivery(
            self.log, outbox=outbox, on_result=self._notified, clock=self.clock
        )
        self._memory = _StoreMemory(self.recorder)
        self.teller = Teller(self.delivery, clock=self.clock, memory=self._memory)
        if self._tasks is not None:  # made by a reload: the streaks recalled beside the loop
            self._tasks.create_task(self._memory.recall(), name="crond-streaks")

    def reloaded(self, ok: bool) -> None:
        if self.metrics is not None:
            self.metrics.reloaded(ok, self.clock.now().timestamp())

    # --- delivering -------------------------------------------------------------------

    async def start(self, tasks: asyncio.TaskGroup) -> None:
        """Recall the failure streaks, then start delivering, in a task of `tasks`
        (/metrics is crond/daemon/serving.py's)."""
        if self._memory is not None:
            await self._memory.recall()
        self._tasks = tasks
        self._start_delivery()

    def _start_delivery(self) -> None:
        """Also after a reload: delivery started if the file now has notifiers or pings."""
        if self._tasks is not None and self.delivery is not None and self._sending is None:
            self._sending = self._tasks.create_task(self.delivery.run(), name="crond-delivery")

    async def aclose(self) -> None:
        """At a stop: the long_running timers disarmed, what is queued tried for a few
        seconds (the rest stays in the store)."""
        if self.teller is not None:
            self.teller.close()
        if self.delivery is not None:
            await self.delivery.aclose(SHUTDOWN_GRACE_S)

    def _live(self) -> Iterator[tuple[str, int, float | None]]:
        """Each job's running runs and next fire, read at a scrape."""
        running = self.loop.running
        for name, entry in self.loop.core.schedule.entries.items():
            fire = entry.next_fire
            at = fire.at.timestamp() if fire is not None and entry.job.settings.enabled else None
            yield name, len(running.get(name, ())), at

    def _locks(self) -> Iterator[tuple[str, int, int, int]]:
        """Each lock's capacity, holders and waiting runs, read at a scrape."""
        locks = self.loop.core.locks
        waiting: dict[str, int] = {}
        for item in locks.waiting():
            for name in item.job.settings.locks or ():
                waiting[name] = waiting.get(name, 0) + 1
        for name, capacity in locks.capacity.items():
            yield name, capacity, locks.held.get(name, 0), waiting.get(name, 0)

    def paused(self, job: str, paused: bool) -> None:
        """A pause began or ended (crond/daemon/pausing.py): crond_job_paused."""
        if self.metrics is not None:
            self.metrics.set_paused(job, paused)

    def _notified(self, notifier: str, result: str) -> None:
        if self.metrics is not None:
            self.metrics.notification(notifier, result)

    # --- what the loop tells (through the daemon's Effects) ----------------------------

    def decided(self, job: LoadedJob, decision: Decision) -> None:
        if decision.missed:
            m = decision.missed
            if self.teller is not None:
                self.teller.missed(job, m.count, m.first_slot, m.last_slot, m.reason)
            if self.metrics is not None:
                self.metrics.missed(job.name, m.count)
        if decision.skip is not None:
            reason = decision.skip_reason or "overlap"
            if self.teller is not None:
                self.teller.skipped(job, decision.skip, reason)
            if self.metrics is not None:
                self.metrics.skipped(job.name, reason)
        if decision.paused and self.metrics is not None:
            # Slots passed over while paused: counted, never notified (someone chose it).
            self.metrics.skipped(job.name, "paused", decision.paused)

    def _keep(self) -> None:
        """What a run's end made is in the state store before anything else happens."""
        if self.delivery is not None:
            self.delivery.keep()

    def run_started(self, job: LoadedJob, run: runner.Run) -> None:
        if self.teller is not None:
            self.teller.started(job, run.run_id, run.slot, 1)
        if self.metrics is not None:
            self.metrics.run_started(job.name, max(0.0, run.lag_ms / 1000))

    def ending(self, run: runner.Run, result: runner.RunResult, tail: Sequence[str]) -> None:
        """A run's last attempt ended (the recorder's `before_end`): its notifications and
        pings are made and written to the state store before the run's end is (with
        replicas: queued on the store's thread before it, in order), so a crash between
        the two can only repeat them (the run is then `lost` too), never lose them.
        Without a store it is the same, minus the store."""
        if self.teller is None:
            return
        job = self.loop.core.schedule.entries.get(run.job)
        if job is None:
            return
        self.teller.finished(
            job.job,
            run.run_id,
            run.slot,
            result,
            tail=tail,
            attempts_allowed=run.spec.retry.attempts + 1,
        )
        self._keep()

    def run_ended(self, job: LoadedJob, run: runner.Run, result: runner.RunResult) -> None:
        self.recorder.run_ended(run.run_id)
        if self.metrics is not None:
            now = self.clock.now().timestamp()
            self.metrics.run_finished(job.name, result.outcome.value, result.duration_s, now)

    def lost(self, row: AttemptRow) -> None:
        """A run the previous daemon left unfinished (the store closed it as lost)."""
        if self.teller is not None:
            self.teller.lost(row.job, row.run_id, row.slot)
            self._keep()


class _StoreOutbox:
    """The delivery's Outbox in the state store, through the recorder: a failing store
    says so (None, nothing) and delivery goes on from memory."""

    def __init__(self, recorder: StoreRecorder) -> None:
        self.recorder = recorder

    def add(self, items: Sequence[OutboxItem]) -> Awaitable[list[int] | None]:
        rows = [OutboxRow(0, i.kind, i.notifier, i.job, i.event, i.body, i.created) for i in items]
        return _ids(self.recorder.asked(lambda store: store.outbox_add(rows)))

    async def pending(self, limit: int) -> list[StoredItem]:
        from crond.notify.outbox import OutboxItem, StoredItem  # noqa: PLC0415

        got = await self.recorder.ask(lambda store: store.outbox_pending(limit))
        rows = [] if got is FAILED else got
        return [
            StoredItem(
                r.id, OutboxItem(_kind(r.kind), r.notifier, r.job, r.event, r.body, r.created)
            )
            for r in rows
            if r.kind in ("notify", "ping")
        ]

    def done(self, ids: Sequence[int]) -> None:
        done = list(ids)
        self.recorder.send(lambda store: store.outbox_done(done))


async def _ids(written: Awaitable[list[int] | Failed]) -> list[int] | None:
    ids = await written
    return None if ids is FAILED else ids


def _kind(text: str) -> Literal["notify", "ping"]:
    return "ping" if text == "ping" else "notify"


class _StoreMemory:
    """Where the streaks keep what they must remember across a restart: the store's meta,
    read in one call (`recall`: at the start, awaited off the loop with replicas) and kept
    here, so that telling of a failed run never waits on the store. A streak asked for
    before the recall came back starts anew."""

    def __init__(self, recorder: StoreRecorder) -> None:
        self.recorder = recorder
        self.known: dict[str, str] = {}

    async def recall(self) -> None:
        from crond.notify.streaks import MEMORY_PREFIX  # noqa: PLC0415  (only when used)

        got = await self.recorder.ask(lambda store: store.metas(MEMORY_PREFIX), deadline=SLOW)
        for key, value in ({} if got is FAILED else got).items():
            self.known.setdefault(key, value)  # what was set since is newer

    def get(self, key: str) -> str | None:
        return self.known.get(key)

    def set(self, key: str, value: str) -> None:
        self.known[key] = value
        self.recorder.mark(key, value)
