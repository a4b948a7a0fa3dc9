"""A claim whose commit is in doubt (crond/daemon/indoubt.py): it committed, but its
answer came after its deadline. Tried again with the same run id, it finds the slot
taken — by itself — and the run starts on the row its first claim made, instead of a
slot claimed by nobody's run. The store here stands in for a database whose first
answer is late (the real one, frozen: tests/daemon/test_worker.py and
tests/e2e/test_replicas_hung.py); its calls run off the loop, as a replica's do."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import structlog

from crond.clock import SystemClock
from crond.config import loader
from crond.daemon.recorder import StoreRecorder
from crond.daemon.spawning import Spawner
from crond.store.base import AttemptRow, Claim, Claimed, Start, StateError

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class LateFirstAnswer:
    """A cluster's claims: each (job, slot) once; the first claim commits, then answers
    only once `let_go` is set."""

    location = "late-first-answer"
    moved_aside = None

    def __init__(self) -> None:
        self.rows: list[AttemptRow] = []
        self.taken: dict[tuple[str, datetime], str] = {}
        self.let_go = threading.Event()
        self.asked: list[str] = []  # the run ids claimed, in order
        self.abandoned: list[str] = []  # the run ids closed as never started
        self.open_fails = False  # open_runs raises (the database goes away again)

    def claim(
        self,
        starts: Sequence[Start],
        told: Sequence[tuple[str, datetime]],
        at: datetime,
        *,
        copies: Sequence[str],
        exclusive: Collection[str],
        replacing: Collection[str],
        limits: object = None,
        locks: object = None,
    ) -> Claimed:
        got: list[Claim] = []
        for job, run_id, slot in starts:
            self.asked.append(run_id)
            if (job, slot) in self.taken:
                got.append(None)
                continue
            self.taken[(job, slot)] = run_id
            row = AttemptRow(len(self.rows) + 1, run_id, job, slot, 1, at, None, None, None,
                             None, [], "r1")  # fmt: skip
            self.rows.append(row)
            got.append(row.id)
        self.let_go.wait(10)  # committed; the answer is late
        return Claimed(got, [False] * len(told))

    def abandon(self, run_ids: Sequence[str]) -> int:
        self.abandoned += run_ids
        closed = [r for r in self.rows if r.run_id in run_ids and r.finished is None]
        self.rows = [r for r in self.rows if r not in closed]
        return len(closed)

    def open_runs(self) -> list[AttemptRow]:
        if self.open_fails:
            raise StateError("the connection broke")
        return [r for r in self.rows if r.finished is None]

    def beat(self, now: datetime, skew: float | None = None) -> datetime:
        return now  # a claim's beat first (crond/daemon/proof.py): the database's clock

    def close_lost(self, now: datetime) -> list[AttemptRow]:
        return []

    def close(self) -> None:
        pass


async def test_a_claim_committed_without_an_answer_is_found_ours_when_tried_again() -> None:
    cfg = loader.loads("jobs:\n  j: {every: 1m, command: x}\n")
    store = LateFirstAnswer()
    log = structlog.get_logger()
    recorder = StoreRecorder(lambda _aside: store, log, SystemClock(), replica="r1")  # type: ignore[arg-type,return-value]
    spawner = Spawner(log=log, clock=SystemClock(), recorder=recorder, database=True, cfg=cfg)
    recorder.open()
    assert recorder.opening is not None
    assert await recorder.opening
    try:
        job = cfg.jobs["j"]
        first = await spawner.claim([(job, T0)], [], T0)
        assert first.refused == {("j", T0): "database"}  # no answer within its deadline
        assert recorder.database() == "unavailable"
        store.let_go.set()  # the database answers again
        again = await spawner.claim([(job, T0)], [], T0)
        assert again.refused == {}  # the slot is this replica's: it runs
        assert store.asked == [store.taken[("j", T0)]] * 2  # tried again as it was
        run = cast(Any, SimpleNamespace(run_id=store.asked[0]))
        assert recorder.started(run, 1) == 1  # on the row its first claim made
        assert recorder.in_doubt.run_id(("j", T0)) is None
        assert recorder.database() == "ok"
    finally:
        recorder.close()


async def test_a_claim_in_doubt_whose_start_is_missed_is_closed_once_the_database_answers() -> None:
    """The start of a claim in doubt runs out of grace (missed) before it is tried again:
    had its claim committed, its run, never started, would hold the job "busy" in the
    database for as long as this replica lives. Given up, it is closed there, at the first
    claim the database answers after (the database is away when it is missed)."""
    cfg = loader.loads("jobs:\n  j: {every: 1m, command: x}\n")
    store = LateFirstAnswer()
    log = structlog.get_logger()
    recorder = StoreRecorder(lambda _aside: store, log, SystemClock(), replica="r1")  # type: ignore[arg-type,return-value]
    spawner = Spawner(log=log, clock=SystemClock(), recorder=recorder, database=True, cfg=cfg)
    recorder.open()
    assert recorder.opening is not None
    assert await recorder.opening
    try:
        job = cfg.jobs["j"]
        first = await spawner.claim([(job, T0)], [], T0)
        assert first.refused == {("j", T0): "database"}
        doubted = store.taken[("j", T0)]
        recorder.missed("j", T0 - timedelta(minutes=1), T0)  # job.missed, reason database
        assert store.abandoned == []  # the database away: not tried
        store.let_go.set()
        t1 = T0 + timedelta(minutes=1)
        assert (await spawner.claim([(job, t1)], [], t1)).refused == {}
        for _ in range(200):  # sent off the loop: back within the worker's turn
            if store.abandoned:
                break
            await asyncio.sleep(0.01)
        assert store.abandoned == [doubted]
        assert [r.run_id for r in store.open_runs()] == [store.taken[("j", t1)]]
        assert recorder.in_doubt.run_id(("j", T0)) is None
    finally:
        recorder.close()


async def _doubted(store: LateFirstAnswer) -> tuple[StoreRecorder, Spawner, Any]:
    """A replica whose first claim of j's T0 committed without an answer in time."""
    cfg = loader.loads("jobs:\n  j: {every: 1m, command: x}\n")
    log = structlog.get_logger()
    recorder = StoreRecorder(lambda _aside: store, log, SystemClock(), replica="r1")  # type: ignore[arg-type,return-value]
    spawner = Spawner(log=log, clock=SystemClock(), recorder=recorder, database=True, cfg=cfg)
    recorder.open()
    assert recorder.opening is not None
    assert await recorder.opening
    job = cfg.jobs["j"]
    assert (await spawner.claim([(job, T0)], [], T0)).refused == {("j", T0): "database"}
    store.let_go.set()
    return recorder, spawner, job


async def test_a_told_slot_whose_own_claim_is_in_doubt_is_told_here_and_its_run_given_up() -> None:
    """The start in doubt is missed (a newer slot starts) and its slot claimed as told: the
    claim found is this replica's own, not a peer's. So the slot is told here (not left
    to a peer that never had it: a slot neither started nor told), and its run, never
    started, removed."""
    store = LateFirstAnswer()
    recorder, spawner, job = await _doubted(store)
    try:
        doubted = store.taken[("j", T0)]
        t1 = T0 + timedelta(minutes=1)
        claims = await spawner.claim([(job, t1)], [("j", T0)], t1)  # the wake of the newer
        assert claims.refused == {}
        assert ("j", T0) not in claims.quiet  # told here
        for _ in range(200):
            if store.abandoned:
                break
            await asyncio.sleep(0.01)
        assert store.abandoned == [doubted]
        assert recorder.in_doubt.run_id(("j", T0)) is None
    finally:
        recorder.close()


async def test_a_claim_in_doubt_stays_in_doubt_while_its_own_run_cannot_be_looked_for() -> None:
    """Tried again, the slot is found taken, and the look for this replica's own run gets
    no answer: the start waits (refused `database`) and stays in doubt, never taken for a
    peer's slot (a start silently dropped, its run left holding the job busy)."""
    store = LateFirstAnswer()
    recorder, spawner, job = await _doubted(store)
    try:
        store.open_fails = True
        again = await spawner.claim([(job, T0)], [], T0)
        assert again.refused == {("j", T0): "database"}
        assert recorder.in_doubt.run_id(("j", T0)) == store.taken[("j", T0)]
        store.open_fails = False
        third = await spawner.claim([(job, T0)], [], T0)
        assert third.refused == {}  # its own, found: it runs on its row
    finally:
        recorder.close()
