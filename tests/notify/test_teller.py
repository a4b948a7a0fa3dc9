"""The Teller: who is told what, failing streaks (with a clock the test moves), memory
across a new Teller, pings and long_running (crond/notify/teller.py)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from crond.clock import FakeClock
from crond.notify.delivery import Delivery
from crond.notify.outbox import OutboxItem
from crond.notify.teller import Teller
from crond.run.attempt import Outcome, RunResult
from tests.notify_server import DictMemory, Events, job, notifier

START = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
SLOT = START
FAIL = RunResult(Outcome.FAILED, 1, 0.5, 1)
OK = RunResult(Outcome.SUCCESS, 0, 12.3, 1)


class Kept(Delivery):
    """A Delivery that keeps what it is given (its sending is tested elsewhere)."""

    def __init__(self) -> None:
        super().__init__(Events().log, outbox=None)
        self.items: list[OutboxItem] = []

    def put(self, item: OutboxItem) -> None:
        self.items.append(item)

    def told(self, name: str | None = None) -> list[dict[str, Any]]:
        return [
            json.loads(i.body)
            for i in self.items
            if i.kind == "notify" and (name is None or i.notifier == name)
        ]

    def events(self, name: str | None = None) -> list[str]:
        return [b["event"] for b in self.told(name)]


def teller(
    *, repeat: timedelta = timedelta(hours=1), memory: DictMemory | None = None, **notify: Any
) -> tuple[Teller, Kept, FakeClock]:
    kept = Kept()
    clock = FakeClock(START)
    t = Teller(kept, clock=clock, memory=memory, host="web-1")
    notifiers = {n: notifier(n, "webhook", "http://127.0.0.1:9/x", repeat=repeat) for n in notify}
    t.configure(notifiers, {"backup": job(notify=notify), "quiet": job("quiet")})
    return t, kept, clock


def run(t: Teller, result: RunResult, clock: FakeClock, n: int = 1) -> None:
    for _ in range(n):
        t.finished(job(), "r", SLOT, result, tail=["out"], attempts_allowed=1)
        clock.advance(timedelta(minutes=10))


def test_failed_streak_is_told_first_then_once_per_repeat() -> None:
    t, kept, clock = teller(hook=["failed"])
    run(t, FAIL, clock, 7)  # every 10 minutes: 0, 10, ..., 60
    told = kept.told()
    assert [b["streak"] for b in told] == [1, 7]  # the first, then one an hour later
    assert told[0]["text"] == "backup failed on web-1: exit 1, attempt 1 of 1"
    assert told[0]["output_tail"] == "out"
    assert told[0]["outcome"] == "failed"
    assert told[0]["exit_code"] == 1


def test_repeat_0s_tells_every_failed_run() -> None:
    t, kept, clock = teller(repeat=timedelta(0), hook=["failed"])
    run(t, FAIL, clock, 3)
    assert [b["streak"] for b in kept.told()] == [1, 2, 3]


def test_recovered_ends_the_streak_and_replaces_succeeded() -> None:
    t, kept, clock = teller(hook=["failed", "recovered", "succeeded"])
    run(t, FAIL, clock, 3)
    run(t, OK, clock)
    run(t, OK, clock)
    assert kept.events() == ["failed", "recovered", "succeeded"]
    recovered = kept.told()[1]
    assert recovered["streak"] == 3
    assert recovered["text"] == "backup recovered on web-1 after 3 failed runs"
    assert kept.told()[2]["text"] == "backup succeeded on web-1 in 12.3s"
    run(t, FAIL, clock)  # a new streak: told at once
    assert kept.told()[-1]["streak"] == 1


def test_a_success_ends_the_streak_of_a_notifier_without_recovered() -> None:
    t, kept, clock = teller(hook=["failed"], other=["succeeded"])
    run(t, FAIL, clock, 2)
    run(t, OK, clock)  # not told as recovered, but the streak is over
    run(t, FAIL, clock)
    assert [b["streak"] for b in kept.told("hook")] == [1, 1]
    assert kept.events("other") == ["succeeded"]  # no recovered subscription: succeeded


def test_recovered_only_counts_failed_runs_even_without_failed() -> None:
    t, kept, clock = teller(hook=["recovered"])
    run(t, OK, clock)
    run(t, FAIL, clock, 2)
    run(t, OK, clock)
    assert kept.events() == ["recovered"]
    assert kept.told()[0]["streak"] == 2


def test_the_streak_survives_a_new_teller_through_memory() -> None:
    memory = DictMemory()
    t, _kept, clock = teller(memory=memory, hook=["failed", "recovered"])
    run(t, FAIL, clock, 2)
    assert json.loads(memory.values["streak:hook:backup"])["failed"] == 2
    t2, kept2, clock2 = teller(memory=memory, hook=["failed", "recovered"])
    clock2.set(clock.now())
    run(t2, FAIL, clock2)  # 20 minutes after the last told: not yet
    assert kept2.told() == []
    run(t2, OK, clock2)
    assert kept2.events() == ["recovered"]
    assert kept2.told()[0]["streak"] == 3
    assert json.loads(memory.values["streak:hook:backup"])["failed"] == 0


def test_a_damaged_memory_value_starts_a_new_streak() -> None:
    memory = DictMemory()
    memory.values["streak:hook:backup"] = "{not json"
    t, kept, clock = teller(memory=memory, hook=["failed"])
    run(t, FAIL, clock)
    assert [b["streak"] for b in kept.told()] == [1]


def test_each_event_to_its_subscribers_only() -> None:
    t, kept, _ = teller(a=["started", "missed", "skipped", "lost"], b=["failed"], c=["succeeded"])
    backup = job(notify={"a": ["started"]})
    t.started(backup, "r1", SLOT, 1)
    first = datetime(2026, 3, 8, 2, 30, tzinfo=UTC)
    t.missed(backup, 4, first, first + timedelta(hours=3))
    t.skipped(backup, SLOT, "the previous run is still going")
    t.lost("backup", "r0", SLOT)
    assert kept.events("a") == ["started", "missed", "skipped", "lost"]
    assert kept.told("b") == []
    assert kept.told("c") == []
    started, missed, skipped, lost = kept.told("a")
    assert (started["run_id"], started["attempt"], started["text"]) == (
        "r1", 1, "backup started on web-1")  # fmt: skip
    assert missed["text"] == "backup missed 4 slots on web-1 (02:30 to 05:30 UTC)"
    assert missed["slot"] == "2026-03-08T02:30:00Z"
    assert skipped["text"] == "backup skipped on web-1: the previous run is still going"
    assert lost["text"] == "backup lost on web-1: its daemon died during the run"
    assert lost["at"] == "2026-03-08T07:00:00Z"
    assert lost["host"] == "web-1"


def test_a_job_without_notify_or_ping_makes_nothing_and_costs_little() -> None:
    t, kept, _ = teller(hook=["failed", "started", "succeeded"])
    quiet = job("quiet")
    began = time.perf_counter()
    for _ in range(10_000):
        t.started(quiet, "r", SLOT, 1)
        t.finished(quiet, "r", SLOT, FAIL, tail=["x"], attempts_allowed=1)
    per_run = (time.perf_counter() - began) / 10_000
    assert kept.items == []
    assert per_run < 50e-6  # two dict lookups and the safety wrapper


def test_pings_start_success_fail_and_lost() -> None:
    kept = Kept()
    t = Teller(kept, clock=FakeClock(START), memory=None, host="web-1")
    pinged = job(ping="https://hc-ping.com/uuid")
    t.configure({}, {"backup": pinged})
    t.started(pinged, "r1", SLOT, 1)
    t.started(pinged, "r1", SLOT, 2)  # a retry: /start only once per run
    t.finished(pinged, "r1", SLOT, OK, tail=["a", "b"], attempts_allowed=2)
    t.finished(pinged, "r2", SLOT, FAIL, tail=["boom"], attempts_allowed=1)
    t.lost("backup", "r3", SLOT)
    pings = [(i.kind, i.notifier, i.job, i.event, json.loads(i.body)) for i in kept.items]
    assert pings == [
        ("ping", "", "backup", "start", {"rid": "r1", "tail": ""}),
        ("ping", "", "backup", "success", {"rid": "r1", "tail": "a\nb"}),
        ("ping", "", "backup", "fail", {"rid": "r2", "tail": "boom"}),
        ("ping", "", "backup", "fail", {"rid": "r3", "tail": "backup lost on web-1: its "
                                        "daemon died during the run"}),
    ]  # fmt: skip
    assert all(i.created == START.timestamp() for i in kept.items)


def test_long_running_once_per_run_and_not_after_the_end() -> None:
    """The timers are the clock's: on a fake one, time is moved, nothing is slept."""

    async def main() -> None:
        kept = Kept()
        clock = FakeClock(START)
        t = Teller(kept, clock=clock, memory=None, host="web-1")
        slow = job(notify={"hook": ["long_running"]}, warn_after="50ms")
        t.configure({"hook": notifier("hook", "webhook", "http://x/")}, {"backup": slow})
        t.started(slow, "r1", SLOT, 1)
        t.started(slow, "r1", SLOT, 2)  # the same run: one timer
        t.started(slow, "r2", SLOT, 1)
        t.finished(slow, "r2", SLOT, OK, tail=[], attempts_allowed=1)  # ends before it
        clock.advance(timedelta(milliseconds=49))
        await asyncio.sleep(0)
        assert kept.events() == []  # not yet
        clock.advance(timedelta(milliseconds=1))
        await asyncio.sleep(0)
        assert kept.events() == ["long_running"]  # once, of r1 (r2 ended before)
        told = kept.told()[0]
        assert told["run_id"] == "r1"
        assert told["text"] == "backup still running on web-1 after 50ms"
        clock.advance(timedelta(hours=1))  # no second one
        t.started(slow, "r3", SLOT, 1)
        t.close()  # disarmed
        clock.advance(timedelta(hours=1))
        await asyncio.sleep(0)
        assert len(kept.items) == 1

    asyncio.run(main())


def test_a_notifier_gone_at_a_reload_is_not_told() -> None:
    t, kept, clock = teller(hook=["failed"])
    t.configure({}, {"backup": job(notify={"hook": ["failed"]})})
    run(t, FAIL, clock)
    assert kept.items == []
