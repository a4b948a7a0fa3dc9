"""What the daemon does for backfills (`crond backfill`, docs/schedules.md "Backfill"; the
rules: crond/schedule/backfills.py): begin one (checked, kept in the store, told), start
its slots at the loop's wakes (each recorded and, with replicas, claimed like any start,
its progress in the same commit), count their ends, stop it (`crond kill`), and at start
go on with those a previous daemon left unfinished.

Events: `backfill.started`, `backfill.slot_finished`, `backfill.finished`,
`backfill.cancelled`, `backfill.resumed` (docs/schedules.md, "Backfill").
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from crond.clock import iso_utc
from crond.daemon.stores import FAILED
from crond.schedule.backfills import Backfill
from crond.store.base import BackfillRecords, BackfillRow, Store
from crond.when.backfill import backfill_slots

if TYPE_CHECKING:
    from crond.config.loaded import LoadedJob
    from crond.daemon.loop import Loop
    from crond.daemon.recorder import StoreRecorder
    from crond.daemon.spawning import Spawner
    from crond.run.runner import Run, RunResult
    from crond.schedule.rules import Entry

# What a follower (`crond backfill --wait`) hears: a slot's end, or the backfill's end.
Heard = Callable[[dict[str, Any]], None]


class Backfilling:
    """The daemon's part in backfills, over its loop, recorder and spawner."""

    def __init__(self, loop: Loop[Run], recorder: StoreRecorder, spawner: Spawner) -> None:
        self.log = loop.log
        self.clock = loop.clock
        self.loop = loop
        self.recorder = recorder
        self.core = loop.core.backfills
        loop.backfill = self.step  # called at each wake
        spawner.backfills = self.core.starting  # the core's own map, shared
        self._runs: dict[str, Backfill] = {}  # run id -> its backfill, while it runs
        self.followers = Followers()  # `crond backfill --wait`'s
        self.adopting = Adopting(self)  # with replicas
        self.ended_here: set[str] = set()  # (with replicas: not taken up again)
        self._restored = False  # the backfills a previous daemon left: at the first wake

    # --- beginning one --------------------------------------------------------------

    async def begin(
        self, job: LoadedJob, start: datetime, end: datetime, by: Mapping[str, object]
    ) -> Backfill | str:
        """A backfill of `job` over [start, end), begun; or one sentence why not."""
        now = self.clock.now()
        backfill = self.core.refusal(job.name) or _planned(job, start, end, now)
        if isinstance(backfill, str):
            return backfill
        row = BackfillRow(
            backfill.id, job.name, start, end, backfill.total, 0, None, backfill.next_slot, 0,
            0, "running", now, None, json.dumps(dict(by)),
        )  # fmt: skip
        added = await self._ask(lambda store: _records(store).backfill_add(row))
        if added is FAILED:
            return "the state store did not take the backfill (see the daemon's log)"
        if added is False:
            return f"a backfill of {job.name} is already going on another replica"
        self.core.add(backfill)
        self.log.info(
            "backfill.started", backfill_id=backfill.id, job=job.name, **_range(backfill),
            slots=backfill.total, by=dict(by),
        )  # fmt: skip
        self.loop.wake()
        return backfill

    def restore(self, jobs: Mapping[str, Entry]) -> None:
        """The backfills a previous daemon left going on after the last slot each started."""
        if self.recorder.store is None or self.recorder.replica is not None:
            return
        rows = self.recorder.write(lambda store: _records(store).backfills(going=True))
        for row in [] if rows is FAILED else rows:
            entry = jobs.get(row.job)
            if entry is None:
                self._ended_row(row.id, "cancelled")
                self.log.warning(
                    "backfill.cancelled", backfill_id=row.id, job=row.job, done=row.started,
                    total=row.total, reason="removed", by=None,
                )  # fmt: skip
                continue
            backfill = self.take_up(row, entry.job)
            self._send(_lost_counted(row, backfill))  # (for `status`: it reads the store)
            if backfill.finished:
                self._finish(backfill)

    def take_up(self, row: BackfillRow, job: LoadedJob, **via: str) -> Backfill:
        """A backfill kept in the store, gone on with here after the last slot it started
        (`backfill.resumed`); unless all its slots were started (it is returned)."""
        backfill = _of_row(row, job, adopted=bool(via))
        if not backfill.finished:
            self.core.add(backfill)
            self.loop.wake()
        self.log.info(
            "backfill.resumed", backfill_id=row.id, job=row.job, done=backfill.done,
            total=row.total, next_slot=_iso(backfill.next_slot), **via,
        )  # fmt: skip
        return backfill

    # --- the loop's wakes -----------------------------------------------------------

    async def step(self, now: datetime) -> None:
        """At each wake: at the first, the backfills a previous daemon left; with replicas,
        those begun through another (`Adopting`); those of jobs a reload removed are
        cancelled; and the backfill slots that may start now start, each recorded
        (claimed) first, its end watched."""
        loop, entries = self.loop, self.loop.core.schedule.entries
        if not self._restored:
            self._restored = True
            self.restore(entries)
        self.adopting.beat()
        for gone in [b.job for b in self.core.by_job.values() if b.job not in entries]:
            self.cancel(gone, None, "removed")
        # Again while one is ready: a slot another replica ran (`taken`) is passed at once.
        while self.core and (ready := self.core.ready(now, loop.going.counts)):
            for job, slot in ready:
                claims = await loop.effects.claim([(job, slot)], [], now)
                reason = claims.refused.get((job.name, slot))
                if reason is None:
                    run = loop.going.start(job, slot)
                    self._runs[run.run_id] = self.core.by_job[job.name]
                    loop.going.own(self._watch(run))
                    continue
                if reason == "done":  # ended through another replica: not run here
                    self.core.refused(job.name, slot, "database", now)
                    self.adopting.ended(job.name)
                    continue
                done = self.core.refused(job.name, slot, reason, now)
                if done is not None:
                    self._counted(done, slot, None, None)

    async def _watch(self, run: Run) -> None:
        """A backfill's run: its end counted (and the loop woken for the next slot)."""
        result = await run.wait()
        backfill = self._runs.pop(run.run_id, None)
        if backfill is not None:
            self.ended(backfill, run, result)
        self.loop.wake()

    def ended(self, backfill: Backfill, run: Run, result: RunResult) -> None:
        """A backfill's run has ended: it is counted (and the backfill may end)."""
        outcome = result.outcome.value
        if self.core.by_job.get(run.job) is backfill:
            self.core.ended(run.job, run.slot, outcome)
        else:  # cancelled meanwhile: counted all the same
            backfill.failed += outcome != "success"
            backfill.succeeded += outcome == "success"
        self._counted(backfill, run.slot, run.run_id, outcome)

    def run_ids(self, backfill: Backfill) -> list[str]:
        """The run of `backfill` going, if any (its id)."""
        return [run_id for run_id, b in self._runs.items() if b is backfill]

    def _counted(
        self, backfill: Backfill, slot: datetime, run_id: str | None, outcome: str | None
    ) -> None:
        if outcome is not None:  # (another replica's run: counted there)
            tally = (backfill.id, outcome == "success", backfill.next_slot)
            self._send(lambda store: _records(store).backfill_counted(*tally))
        self.log.info(
            "backfill.slot_finished", backfill_id=backfill.id, job=backfill.job,
            slot=iso_utc(slot), run_id=run_id, outcome=outcome, done=backfill.done,
            total=backfill.total,
        )  # fmt: skip
        self.followers.tell(backfill, {"slot": iso_utc(slot), "run_id": run_id, "outcome": outcome})
        if backfill.finished and backfill.job not in self.core.by_job:
            self._finish(backfill)

    def _finish(self, backfill: Backfill) -> None:
        self.ended_here.add(backfill.id)
        self._ended_row(backfill.id, "finished")
        self.log.info(
            "backfill.finished", backfill_id=backfill.id, job=backfill.job,
            slots=backfill.total, succeeded=backfill.succeeded, failed=backfill.failed,
        )  # fmt: skip
        self.followers.end(backfill, "finished")

    # --- stopping one ---------------------------------------------------------------

    def cancel(self, target: str, by: Mapping[str, object] | None, reason: str) -> Backfill | None:
        """Stop the backfill of job `target` (or with id `target`): no slot of it starts
        any more (its run going is the caller's to stop). The backfill, or None."""
        found = self.core.find(target)
        if found is None:
            return None
        self.core.cancel(found.job)
        self.ended_here.add(found.id)
        if reason != "cluster":  # (else it ended there)
            self._ended_row(found.id, "cancelled")
        self.log.warning(
            "backfill.cancelled", backfill_id=found.id, job=found.job, done=found.done,
            total=found.total, reason=reason, by=None if by is None else dict(by),
        )  # fmt: skip
        self.followers.end(found, "cancelled")
        return found

    def kill(self, target: str, by: Mapping[str, object]) -> tuple[dict[str, Any], list[Run]]:
        """`crond kill TARGET`: the backfill of job `target` (or with id `target`) stopped
        first, so the end of its run starts no next slot; then the job's runs (with the
        backfill's id: its run alone) stopped, as a timeout does. What `kill` answers of
        the backfill (`{"backfills": [...]}`, or nothing), and the runs stopped here."""
        cancelled = self.cancel(target, by, "kill")
        if cancelled is None or target == cancelled.job:
            told = {} if cancelled is None else {"backfills": [summary(cancelled)]}
            return told, self.loop.kill(target)
        runs = [run for rid in self.run_ids(cancelled) for run in self.loop.kill(rid)]
        return {"backfills": [summary(cancelled)]}, runs

    # --- the store --------------------------------------------------------------------

    def _ended_row(self, backfill_id: str, state: str) -> None:
        now = self.clock.now()
        self._send(lambda store: _records(store).backfill_end(backfill_id, state, now))

    async def _ask(self, write: Callable[[Store], object]) -> object:
        """`write` done (None: the store is off, the backfill lasts until the daemon stops)."""
        if self.recorder.store is None and self.recorder.replica is None:
            return None
        return await self.recorder.ask(write, force=True)

    def _send(self, write: Callable[[Store], object]) -> None:
        if self.recorder.store is not None or self.recorder.replica is not None:
            self.recorder.send(write)


class Adopting:
    """With replicas (docs/schedules.md, "Backfill"): once a heartbeat, the backfills begun
    through another replica are driven here too (each slot's claim decides which replica
    runs it), and those ended through another one end here as they ended there: finished
    (whichever replica ran the last slot, each logs it finished) or cancelled."""

    def __init__(self, filling: Backfilling) -> None:
        self.filling = filling
        self._next = 0.0  # (monotonic) the next poll: once a heartbeat

    def beat(self) -> None:
        filling = self.filling
        if filling.recorder.replica is not None and filling.clock.monotonic() >= self._next:
            self._next = filling.clock.monotonic() + filling.loop.heartbeat.total_seconds()
            known = {b.id for b in filling.core.by_job.values()}  # (not one begun since)
            read = lambda store: _records(store).backfills(going=True)  # noqa: E731
            filling.recorder.send(read, then=lambda rows: self._polled(rows, known))

    def _polled(self, rows: list[BackfillRow] | object, known: set[str]) -> None:
        if not isinstance(rows, list):
            return  # (the database did not answer: next beat)
        filling, going = self.filling, {row.id for row in rows}
        for backfill in list(filling.core.by_job.values()):
            if backfill.id in known and backfill.id not in going and backfill.current is None:
                self.ended(backfill.job)
        jobs = filling.loop.core.schedule.entries
        for row in rows:
            entry = jobs.get(row.job)
            taken = row.job in filling.core.by_job or row.id in filling.ended_here
            if entry is not None and not taken:
                filling.take_up(row, entry.job, via="cluster")

    def ended(self, name: str) -> None:
        """`name`'s backfill runs no more in the cluster: it starts nothing here while the
        store is asked how it ended."""
        backfill = self.filling.core.by_job.get(name)
        if backfill is None or backfill.ending:
            return
        backfill.ending = True
        read = lambda store: _records(store).backfills(going=False)  # noqa: E731
        self.filling.recorder.send(read, then=lambda rows: self._ended_as(backfill, rows))

    def _ended_as(self, backfill: Backfill, rows: list[BackfillRow] | object) -> None:
        """Finished there: every slot was started, those left here on another replica
        (each told, `outcome` null), and it finishes here; cancelled there (`crond kill`):
        cancelled here, reason `cluster`. The store not answering: asked again."""
        filling, core = self.filling, self.filling.core
        backfill.ending = False
        if core.by_job.get(backfill.job) is not backfill or not isinstance(rows, list):
            return  # (stopped here meanwhile; or no answer: the next claim or poll asks)
        if next((r.state for r in rows if r.id == backfill.id), None) != "finished":
            filling.cancel(backfill.job, None, "cluster")
            return
        while backfill.left:
            slot = backfill.current = backfill.left.popleft()
            core.ended(backfill.job, slot, None)
            filling._counted(backfill, slot, None, None)


class Followers:
    """Who follows each backfill (`crond backfill --wait`): told at each slot's end and
    at the backfill's end."""

    def __init__(self) -> None:
        self._followers: dict[str, list[Heard]] = {}  # backfill id -> who follows it

    def follow(self, backfill: Backfill, heard: Heard) -> Callable[[], None]:
        """`heard` is called at each slot's end and at the backfill's end; returns the
        call that stops following."""
        followers = self._followers.setdefault(backfill.id, [])
        followers.append(heard)

        def unfollow() -> None:
            if heard in followers:
                followers.remove(heard)

        return unfollow

    def tell(self, backfill: Backfill, what: dict[str, Any]) -> None:
        for heard in list(self._followers.get(backfill.id, ())):
            heard(what)

    def end(self, backfill: Backfill, state: str) -> None:
        self.tell(backfill, {"end": state, **summary(backfill)})
        self._followers.pop(backfill.id, None)


def summary(backfill: Backfill) -> dict[str, Any]:
    """A backfill as `crond backfill` and `crond status` show it."""
    return {
        "id": backfill.id,
        "job": backfill.job,
        **_range(backfill),
        "total": backfill.total,
        "done": backfill.done,
        "succeeded": backfill.succeeded,
        "failed": backfill.failed,
        "next_slot": _iso(backfill.next_slot),
    }


def _range(backfill: Backfill) -> dict[str, str]:
    return {"from": iso_utc(backfill.start), "to": iso_utc(backfill.end)}


def _iso(when: datetime | None) -> str | None:
    return None if when is None else iso_utc(when)


def _planned(job: LoadedJob, start: datetime, end: datetime, now: datetime) -> Backfill | str:
    """A backfill of `job`'s slots in [start, end), not begun; or why there is none."""
    if end <= start:
        return f"--to ({iso_utc(end)}) must be after --from ({iso_utc(start)})"
    if end > now:
        return (
            f"--to ({iso_utc(end)}) is in the future: a backfill runs {job.name}'s past slots "
            f"(give --to {iso_utc(now.replace(microsecond=0))} or earlier)"
        )
    try:
        fires = backfill_slots(job.make_timing(), start, end)
    except ValueError as exc:
        return str(exc)
    if not fires:
        return f"{job.name} has no slot in [{iso_utc(start)}, {iso_utc(end)})"
    from crond.run.runner import new_run_id  # noqa: PLC0415  (the daemon has it loaded)

    slots = deque(fire.at for fire in fires)
    return Backfill(new_run_id(now), job.name, start, end, slots, len(slots))


def _of_row(row: BackfillRow, job: LoadedJob, *, adopted: bool = False) -> Backfill:
    """A backfill kept in the store, as it goes on: the slots after its last started. Its
    runs not counted yet were left going by a previous daemon (closed `lost`: failed);
    `adopted` from another replica, they go on there (counted there: elsewhere)."""
    fires = backfill_slots(job.make_timing(), row.range_from, row.range_to)
    after = row.last_slot
    left = deque(f.at for f in fires if after is None or f.at > after)
    going = max(0, row.started - row.succeeded - row.failed)
    return Backfill(
        row.id, row.job, row.range_from, row.range_to, left, row.total,
        succeeded=row.succeeded, failed=row.failed + (0 if adopted else going),
        elsewhere=going if adopted else 0,
    )  # fmt: skip


def _lost_counted(row: BackfillRow, backfill: Backfill) -> Callable[[Store], object]:
    """The runs of `row` a previous daemon left going (closed `lost`), counted failed in
    the store as in `backfill` (`_of_row`) and the log: each a slot done, and failed."""
    lost, tally = backfill.failed - row.failed, (row.id, False, backfill.next_slot)

    def write(store: Store) -> None:
        for _ in range(lost):
            _records(store).backfill_counted(*tally)

    return write


def _records(store: Store) -> BackfillRecords:
    return cast(BackfillRecords, store)
