"""A claim whose commit is in doubt (crond/daemon/indoubt.py): it committed, but its
answer came after its deadline. Tried again with the same run id, it finds the slot
taken — by itself — and the run starts on the row its first claim made, instead of a
slot claimed by nobody's run. The store here stands in for a database whose first
answer is late (the real one, frozen: tests/daemon/test_worker.py and
tests/e2e/test_replicas_hung.py); its calls run off the loop, as a replica's do."""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import structlog

from crond.clock import SystemClock
from crond.config import loader
from crond.daemon.recorder import StoreRecorder
from crond.daemon.spawning import Spawner
from crond.store.base import AttemptRow, Claim, Claimed, Start

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

    def open_runs(self) -> list[AttemptRow]:
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
