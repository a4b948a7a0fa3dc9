"""The loop's side of claims (crond/schedule/unclaimed.py, core.py) on a fake clock: what
it does with a start its `prepare` refused. The store behind `prepare` is a small
stand-in here (a set of claims, a switch for the database): the loop is under test, and
tests/e2e/test_replicas.py runs the real thing with real replicas and a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from crond.config.loaded import LoadedJob
from crond.schedule.actions import Claims, Refusal
from tests.daemon.test_loop import T0, harness


class Database:
    """Claims as a shared database keeps them: each (job, slot) once; `down`: no answer."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, datetime], str] = {}
        self.down = False
        self.busy: set[str] = set()  # jobs with a run going on another replica
        self.tries: list[datetime] = []

    def prepare(
        self, starts: Sequence[tuple[LoadedJob, datetime]], at: datetime
    ) -> dict[tuple[str, datetime], Refusal]:
        self.tries.append(at)
        if self.down:
            return {(job.name, slot): "database" for job, slot in starts}
        refused: dict[tuple[str, datetime], Refusal] = {}
        for job, slot in starts:
            key = (job.name, slot)
            if key in self.claims:
                refused[key] = "taken"
                continue
            self.claims[key] = "here"
            if job.name in self.busy:
                refused[key] = "busy"
        return refused


MINUTE = timedelta(minutes=1)
SLOT = T0 + MINUTE


async def test_a_start_the_database_did_not_answer_for_runs_when_it_answers_within_grace() -> None:
    async with harness("jobs:\n  a: {every: 1m, grace: 1m, command: x}\n") as h:
        db = Database()
        h.effects.prepare = db.prepare
        db.down = True
        await h.run_until(SLOT + timedelta(seconds=3))
        assert h.runs == []  # no claim, no run
        # tried at the slot, then after 0.5 s, 1 s, 2 s more (the backoff doubles)
        assert db.tries == [SLOT + timedelta(seconds=s) for s in (0, 0.5, 1.5, 3.5)][:3]
        db.down = False
        await h.run_until(SLOT + timedelta(seconds=10))
        assert [(r.slot, r.launched_at) for r in h.runs] == [(SLOT, SLOT + timedelta(seconds=3.5))]
        assert h.events.named("job.missed") == []


async def test_a_start_not_claimed_within_its_grace_is_missed_with_reason_database() -> None:
    async with harness("jobs:\n  a: {every: 1h, grace: 30s, command: x}\n") as h:
        db = Database()
        h.effects.prepare = db.prepare
        db.down = True
        slot = T0 + timedelta(hours=1)
        await h.run_until(slot + timedelta(minutes=5))
        assert h.runs == []
        iso = "2026-03-01T13:00:00Z"
        assert h.events.named("job.missed") == [
            {"job": "a", "count": 1, "first_slot": iso, "last_slot": iso, "reason": "database"}
        ]
        # the backoff is bounded (5 s): tries until the grace ran out, then no more
        assert all(t <= slot + timedelta(seconds=30) for t in db.tries)
        assert max(b - a for a, b in zip(db.tries, db.tries[1:], strict=False)) <= timedelta(
            seconds=5
        )
        db.down = False  # the next slot runs as usual
        await h.run_until(T0 + timedelta(hours=2, seconds=1))
        assert [r.slot for r in h.runs] == [T0 + timedelta(hours=2)]


async def test_one_start_a_job_waits_a_newer_slot_takes_the_place_of_an_older() -> None:
    async with harness("jobs:\n  a: {every: 1m, grace: 5m, command: x}\n", heartbeat=3600) as h:
        db = Database()
        h.effects.prepare = db.prepare
        db.down = True
        await h.run_until(T0 + timedelta(minutes=3, seconds=30))
        missed = h.events.named("job.missed")
        assert [m["first_slot"] for m in missed] == ["2026-03-01T12:01:00Z", "2026-03-01T12:02:00Z"]
        assert {m["reason"] for m in missed} == {"database"}
        db.down = False
        await h.run_until(T0 + timedelta(minutes=3, seconds=40))
        assert [r.slot for r in h.runs] == [T0 + timedelta(minutes=3)]  # the newest only


async def test_a_slot_another_replica_claimed_is_not_run_nor_told() -> None:
    async with harness("jobs:\n  a: {every: 1m, command: x}\n  b: {every: 1m, command: x}\n") as h:
        db = Database()
        db.claims[("a", SLOT)] = "elsewhere"
        h.effects.prepare = db.prepare
        await h.run_until(SLOT + timedelta(seconds=1))
        assert [r.job for r in h.runs] == ["b"]
        assert h.events.items == []  # the other replica logs and tells of its run


async def test_a_skip_job_running_on_another_replica_is_skipped_by_the_claims_holder() -> None:
    """Refused as busy, this replica holds the slot's claim: it runs nothing and tells of
    the skip (the replica running the job finds the slot claimed, and says nothing)."""
    async with harness("jobs:\n  a: {every: 1m, command: x}\n") as h:
        db = Database()
        db.busy.add("a")
        h.effects.prepare = db.prepare
        await h.run_until(SLOT + timedelta(seconds=1))
        assert h.runs == []
        assert h.events.named("job.skipped") == [
            {"job": "a", "slot": "2026-03-01T12:01:00Z", "reason": "overlap"}
        ]
        db.busy.clear()  # its run ended: the next slot is claimed and run as usual
        await h.run_until(SLOT + MINUTE + timedelta(seconds=1))
        assert h.starts() == [SLOT + MINUTE]


async def test_what_another_replica_claimed_first_is_not_told_here() -> None:
    """A slot skipped or missed here that another replica claimed (and tells of)."""
    text = "jobs:\n  a: {every: 1m, command: x}\n  b: {every: 1m, grace: 1s, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        db = Database()
        h.effects.prepare = db.prepare
        asked: list[tuple[str, datetime]] = []

        def dedupe(keys: list[tuple[str, datetime]]) -> set[tuple[str, datetime]]:
            asked.extend(keys)
            return {key for key in keys if key in db.claims}

        h.effects.dedupe = dedupe
        await h.run_until(SLOT + timedelta(seconds=1))  # a and b run (b stays running)
        db.claims[("a", SLOT + MINUTE)] = "elsewhere"
        h.runs[0].done.set()
        # b's next slot is skipped (its run goes on): told here, nobody else claimed it;
        # a's slot was claimed elsewhere: not run, not told
        await h.run_until(SLOT + MINUTE + timedelta(seconds=1))
        assert asked == [("b", SLOT + MINUTE)]
        assert [kw["job"] for kw in h.events.named("job.skipped")] == ["b"]
        db.claims[("b", SLOT + 2 * MINUTE)] = "elsewhere"  # another replica told of it
        await h.run_until(SLOT + 2 * MINUTE + timedelta(seconds=1))
        assert [kw["job"] for kw in h.events.named("job.skipped")] == ["b"]


async def test_a_trigger_without_a_claim_is_refused_and_says_why() -> None:
    async with harness("jobs:\n  a: {every: 1h, command: x}\n") as h:
        db = Database()
        h.effects.prepare = db.prepare
        await h.settle()
        db.down = True
        assert await h.loop.trigger("a") == (
            "the database is unavailable, and no run starts without a claim"
        )
        db.down = False
        db.busy.add("a")
        assert await h.loop.trigger("a") == "a has a run going on another replica and overlap: skip"
        assert h.runs == []


async def test_a_queued_start_claims_when_its_place_frees_and_not_before() -> None:
    text = "jobs:\n  a: {every: 1h, command: x}\n  b: {every: 1h, command: x}\n"
    async with harness(text, finish_at_once=False, heartbeat=3600) as h:
        db = Database()
        h.effects.prepare = db.prepare
        h.loop.limit(1)
        slot = T0 + timedelta(hours=1)
        await h.run_until(slot)
        assert list(db.claims) == [("a", slot)]  # b waits unclaimed: another may take it
        db.claims[("b", slot)] = "elsewhere"
        h.runs[0].done.set()
        await h.settle()
        assert [r.job for r in h.runs] == ["a"]


async def test_a_jobs_own_max_running_claims_nothing_so_another_replica_may_run_it() -> None:
    text = "jobs:\n  a: {every: 1m, overlap: allow, max_running: 1, command: x}\n"
    async with harness(text, finish_at_once=False) as h:
        db = Database()
        h.effects.prepare = db.prepare
        asked: list[tuple[str, datetime]] = []

        def dedupe(keys: list[tuple[str, datetime]]) -> set[tuple[str, datetime]]:
            asked.extend(keys)
            return set()

        h.effects.dedupe = dedupe
        await h.run_until(SLOT + MINUTE + timedelta(seconds=1))
        assert h.starts() == [SLOT]  # its run goes on: the next slot is passed over here
        assert [kw["reason"] for kw in h.events.named("job.skipped")] == ["max_running"]
        assert asked == []  # and not claimed: a replica with room may claim and run it
        assert ("a", SLOT + MINUTE) not in db.claims


async def test_while_a_wake_awaits_its_claims_the_core_is_its_own_and_no_slot_is_lost() -> None:
    """With replicas a wake's claims are awaited (the database off the loop): meanwhile a
    trigger waits for the loop's lock, and the slots that fall due meanwhile are the next
    wake's (docs/design.md, "The store off the loop")."""
    async with harness("jobs:\n  a: {every: 1m, overlap: allow, command: x}\n") as h:
        answer = asyncio.Event()
        claimed: list[list[datetime]] = []
        slow = h.effects.claim

        async def claim(starts: Any, told: Any, at: datetime, **_: object) -> Claims:
            claimed.append([slot for _, slot in starts])
            if len(claimed) == 1:
                await answer.wait()  # the database takes its time
            return await slow(starts, told, at)

        h.effects.claim = claim  # type: ignore[method-assign]
        await h.run_until(SLOT - timedelta(seconds=1))
        h.clock.set(SLOT)
        for _ in range(20):
            await asyncio.sleep(0)
        assert claimed == [[SLOT]]
        assert h.runs == []  # the wake awaits its claims
        trigger = asyncio.ensure_future(h.loop.trigger("a"))
        h.clock.set(SLOT + MINUTE + timedelta(seconds=1))  # a slot falls due meanwhile
        for _ in range(20):
            await asyncio.sleep(0)
        assert not trigger.done()  # the core is the wake's until it is done
        assert h.loop.lock.locked()
        answer.set()
        ran = await trigger
        await h.settle()
        assert claimed[:2] == [[SLOT], [SLOT + MINUTE + timedelta(seconds=1)]]
        assert h.runs[0].slot == SLOT
        assert h.runs[1] is ran
        await h.run_until(SLOT + MINUTE + timedelta(seconds=2))
        assert h.starts() == [SLOT, SLOT + MINUTE + timedelta(seconds=1), SLOT + MINUTE]
