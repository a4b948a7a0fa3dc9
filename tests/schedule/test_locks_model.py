"""Lock granting in the scheduling core against a brute-force model (crond/schedule/locks.py).

A few jobs, each holding a random set of two locks (`p`, capacity 1; `q`, capacity 2),
waiting for them or skipping, one at a time or several; then random steps: wakes (at the
core's own next wake, or a little later, or past every grace), and runs that end. The
core is driven as the loop drives it (tests/schedule/shell.py). The model knows each
job's locks from the file alone, counts the runs going itself, and checks after every
step:

- no lock is ever held by more runs than its capacity (counted from the runs going);
- after each wake, no run waits while every lock it needs has room;
- slot order: no run started at a wake took a place a run of an older slot, still
  waiting after it, could have had (with that run's places given back, the older one
  would fit);
- a waiting run starts within its grace, or is missed (reason `lock`) only after it; a
  job of `overlap: skip` never has more than one run going or waiting;
- every run told to wait ends started or missed, once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crond.schedule.actions import LockWait, Start, Tell
from tests.schedule.shell import T0, Shell

CAPACITY = {"p": 1, "q": 2}


@dataclass(frozen=True)
class Spec:
    name: str
    every: int
    locks: tuple[str, ...]
    grace: int
    skip: bool
    overlap: str

    def yaml(self) -> str:
        parts = [
            f"every: {self.every}s",
            f"grace: {self.grace}s",
            f"locks: [{', '.join(self.locks)}]",
            f"on_lock: {'skip' if self.skip else 'wait'}",
            f"overlap: {self.overlap}",
        ]
        return f"  {self.name}: {{{', '.join(parts)}, command: x}}\n"


@st.composite
def specs(draw: st.DrawFn, name: str) -> Spec:
    return Spec(
        name,
        every=draw(st.sampled_from([10, 30, 60])),
        locks=draw(st.sampled_from([("p",), ("q",), ("p", "q"), ()])),
        grace=draw(st.sampled_from([5, 40, 300])),
        skip=draw(st.sampled_from([False, False, True])),
        overlap=draw(st.sampled_from(["skip", "allow"])),
    )


def secs(t: datetime) -> float:
    return (t - T0).total_seconds()


Key = tuple[str, float]


@dataclass
class Model:
    shell: Shell
    specs: dict[str, Spec]
    now: float = 0
    waiting: dict[Key, None] = field(default_factory=dict)  # in the order told
    fates: Counter[Key] = field(default_factory=Counter)

    def held(self, without: Key | None = None) -> Counter[str]:
        counts: Counter[str] = Counter()
        dropped = False
        for run in self.shell.runs:
            key = (run.job, secs(run.slot))
            if key == without and not dropped:
                dropped = True
                continue
            counts.update(self.specs[run.job].locks)
        return counts

    def fits(self, name: str, held: Counter[str]) -> bool:
        return all(held[lock] < CAPACITY[lock] for lock in self.specs[name].locks)

    def wake(self, t: float) -> None:
        self.now = t
        got = self.shell.wake(T0 + timedelta(seconds=t))
        started: list[Key] = []
        for action in got:
            if isinstance(action, LockWait):
                key = (action.job.name, secs(action.slot))
                assert key not in self.waiting
                assert self.specs[key[0]].locks, "a job without locks never waits"
                self.waiting[key] = None
            elif isinstance(action, Start):
                key = (action.job.name, secs(action.slot))
                started.append(key)
                if key in self.waiting:
                    del self.waiting[key]
                    assert t <= key[1] + self.specs[key[0]].grace, f"{key} started after grace"
                    self.fates[key] += 1
            elif isinstance(action, Tell) and (gone := _missed_for_lock(action)) is not None:
                key = (action.job.name, secs(gone))
                assert key in self.waiting, f"{key} missed for lock, never waited"
                assert t > key[1] + self.specs[key[0]].grace, f"{key} missed within grace"
                del self.waiting[key]
                self.fates[key] += 1
        self.check_capacity()
        held = self.held()
        for name, slot in self.waiting:
            assert not self.fits(name, held), f"{name}@{slot} waits with its locks free"
        for late in started:
            without = self.held(without=late)
            for name, slot in self.waiting:
                shares = set(self.specs[name].locks) & set(self.specs[late[0]].locks)
                if slot < late[1] and shares:
                    assert not self.fits(name, without), f"{late} took {name}@{slot}'s place"

    def check_capacity(self) -> None:
        for lock, count in self.held().items():
            assert count <= CAPACITY[lock], f"{lock} held by {count}"
        for name, spec in self.specs.items():
            if spec.overlap == "skip":
                going = sum(r.job == name for r in self.shell.runs)
                going += sum(k[0] == name for k in self.waiting)
                assert going <= 1, f"{name}: {going} going or waiting with overlap: skip"

    def end(self, i: int) -> None:
        if self.shell.runs:
            self.shell.end(self.shell.runs[i % len(self.shell.runs)].job)
        self.check_capacity()


def _missed_for_lock(tell: Tell) -> datetime | None:
    """The slot a Tell says was missed waiting for its locks, if it says so."""
    missed = tell.decision.missed
    return missed.last_slot if missed is not None and missed.reason == "lock" else None


STEP = st.one_of(
    st.tuples(st.just("wake")),
    st.tuples(st.just("end"), st.integers(0, 5)),
    st.tuples(st.just("end"), st.integers(0, 5)),
    st.tuples(st.just("tick"), st.sampled_from([0.5, 3, 11, 29, 61, 400])),
)


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    jobs=st.lists(st.sampled_from("abcd"), min_size=2, max_size=4, unique=True).flatmap(
        lambda names: st.tuples(*(specs(name) for name in sorted(names)))
    ),
    steps=st.lists(STEP, max_size=50),
)
def test_lock_granting_keeps_the_rules(
    jobs: tuple[Spec, ...], steps: list[tuple[Any, ...]]
) -> None:
    text = "locks: {p: 1, q: 2}\njobs:\n" + "".join(spec.yaml() for spec in jobs)
    model = Model(Shell(text), {spec.name: spec for spec in jobs})
    for step in steps:
        if step[0] == "wake":
            wake = model.shell.core.wake_at(timedelta(0))
            model.wake(max(model.now, secs(wake)) if wake else model.now + 60)
        elif step[0] == "tick":
            model.wake(model.now + step[1])
        else:
            model.end(step[1])
    # Everything ends, and the waiting runs start or are missed, once each.
    while model.shell.runs:
        model.end(0)
        model.wake(model.now + 0.5)
    model.wake(model.now + 400)
    while model.shell.runs:
        model.end(0)
    assert not model.waiting or all(k[1] + 300 >= model.now for k in model.waiting)
    assert all(n == 1 for n in model.fates.values())
