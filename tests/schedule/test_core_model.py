"""crond.schedule.core against a brute-force model, over random steps of a daemon's life.

A few jobs (`every` ones and cron ones in UTC), then random steps: time moves on (to the
core's own next wake, a little, or far past grace: a suspend), a run ends, a job is
paused (until resumed, or until an end) or resumed, a trigger, the daemon's max_running
changes, the database stops answering for a while, and some wakes' claims are refused
("database" for all, "taken" or "busy" for one job). The core is driven as the loop
drives it (tests/schedule/shell.py).

The model knows nothing of the core's heap nor of its arithmetic: it lists every slot of
every job by walking each second, and checks what the core did against the rules of
docs/schedules.md and docs/control.md:

- every slot of every job is accounted for exactly once, in the end: started, skipped,
  missed, caught up, claimed by another replica, or passed over by a pause (counted);
  none vanishes, none twice, none that is not a slot;
- no slot starts before it is due, nor later than its grace (its catch-up window with
  `catchup: latest`); a slot missed for grace was late or had a newer slot due; a slot
  skipped had a run going or waiting (or one on another replica);
- `overlap: skip` and `replace` never have two runs going; a job's `max_running` and,
  when anything starts, the daemon's are never exceeded;
- queued runs start in the order they were queued; a paused job starts nothing
  scheduled, and passes over no more slots than fell while it was paused; an older slot
  of a job never starts after a newer one.

It runs a fixed set of examples (derandomized), and first the cases it found in the core.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crond.schedule.actions import Action, Key, Queued, Refusal, Resumed, Tell
from tests.schedule.shell import T0, Run, Shell, at

EPOCH_T0 = int(T0.timestamp())


@dataclass(frozen=True)
class Spec:
    """A job of the model: every `every` seconds (from the epoch), or at `minutes` of
    every hour in UTC."""

    name: str
    every: int | None
    minutes: tuple[int, ...]
    grace: int
    overlap: str
    max_running: int | None
    catchup: int | None  # the catch-up window in seconds; None: catchup none

    def yaml(self) -> str:
        when = (
            f"every: {self.every}s"
            if self.every
            else f"cron: '{','.join(map(str, self.minutes))} * * * *'"
        )
        parts = [when, f"grace: {self.grace}s", f"overlap: {self.overlap}"]
        if self.max_running is not None:
            parts.append(f"max_running: {self.max_running}")
        if self.catchup is not None:
            parts += ["catchup: latest", f"catchup_window: {self.catchup}s"]
        return f"  {self.name}: {{{', '.join(parts)}, command: x}}\n"

    def is_slot(self, s: int) -> bool:
        if self.every is not None:
            return (EPOCH_T0 + s) % self.every == 0
        return s % 60 == 0 and (s // 60) % 60 in self.minutes

    def slots(self, lo: float, hi: float) -> list[int]:
        """The slots in (lo, hi], as seconds after T0: every second looked at."""
        first = int(lo) + 1 if lo >= 0 else 0
        return [s for s in range(first, int(hi) + 1) if s > lo and self.is_slot(s)]


@st.composite
def specs(draw: st.DrawFn, name: str) -> Spec:
    every = draw(st.sampled_from([None, 7, 10, 30, 60, 90]))
    minutes = () if every else draw(st.sampled_from([(0,), (0, 1, 2), (5, 6, 30, 31, 59)]))
    overlap = draw(st.sampled_from(["skip", "allow", "replace"]))
    return Spec(
        name,
        every,
        minutes,
        grace=draw(st.sampled_from([3, 20, 60, 300])),
        overlap=overlap,
        max_running=draw(st.sampled_from([None, 1, 2])) if overlap == "allow" else None,
        catchup=draw(st.sampled_from([None, None, 600, 3600])),
    )


# A wake's own refusals, for one job: another replica claimed first, or runs the job.
# "database" for one wake; an outage of several is the "db" step.
REFUSALS = st.sampled_from([None, None, None, None, "database", "taken", "busy"])
WAKE = st.tuples(st.just("wake"), REFUSALS, st.integers(0, 2))  # to the core's next wake
END = st.tuples(st.just("end"), st.integers(0, 5))  # a run ends (the loop wakes)
STEP = st.one_of(
    WAKE,
    WAKE,
    END,
    st.tuples(
        st.just("tick"),
        st.sampled_from([0.25, 0.5, 1, 2.5, 5, 13, 30, 61]),
        REFUSALS,
        st.integers(0, 2),
    ),
    st.tuples(
        st.just("suspend"), st.sampled_from([301, 700, 1900, 4000]), REFUSALS, st.integers(0, 2)
    ),
    END,
    # until resumed, for a while, or until a whole minute (a slot of most jobs: it runs)
    st.tuples(st.just("pause"), st.integers(0, 2), st.sampled_from([None, 30, 400, "minute"])),
    st.tuples(st.just("db"), st.booleans()),  # the database stops answering, or answers
    st.tuples(st.just("resume"), st.integers(0, 2)),
    st.tuples(st.just("trigger"), st.integers(0, 2)),
    st.tuples(st.just("limit"), st.sampled_from([None, 1, 2, 3])),
)


def secs(t: datetime) -> float:
    return (t - T0).total_seconds()


@dataclass
class Model:
    """What the model knows and checks, as the steps go."""

    shell: Shell
    specs: dict[str, Spec]
    now: float = 0
    fates: Counter[tuple[str, int]] = field(default_factory=Counter)  # final fates
    passed_over: Counter[str] = field(default_factory=Counter)  # counted by the pauses
    paused: dict[str, float | None] = field(default_factory=dict)  # job: until
    paused_since: dict[str, float] = field(default_factory=dict)
    pending_at_pause: dict[str, int] = field(default_factory=dict)
    queued: list[Key] = field(default_factory=list)  # in the order queued
    waiting: set[Key] = field(default_factory=set)  # refused "database": tried again
    last_started: dict[str, datetime] = field(default_factory=dict)
    db_down: bool = False
    lead: float = 0  # the loop's: slots this far ahead are decided at a wake
    expiring: dict[str, float] = field(default_factory=dict)  # pauses running out now

    def fate(self, job: str, slot: datetime, what: str) -> None:
        s = secs(slot)
        spec = self.specs[job]
        assert s == int(s), f"{what} {job}@{s}: not a slot of {job}"
        assert spec.is_slot(int(s)), f"{what} {job}@{s}: not a slot of {job}"
        assert 0 < s <= self.now, f"{what} {job}@{s} at {self.now}: not due"
        self.fates[(job, int(s))] += 1
        assert self.fates[(job, int(s))] == 1, f"{job}@{s} {what}, and accounted before"

    def pending(self, job: str) -> int:
        return sum(k[0] == job for k in self.queued) + sum(k[0] == job for k in self.waiting)

    # --- steps ----------------------------------------------------------------------------

    def wake(self, now: float, refusal: str | None, which: int) -> None:
        assert now >= self.now
        self.now = now
        names = list(self.specs)
        target = names[which % len(names)]
        shell = self.shell
        before = {**shell.counts()}
        queued_before = Counter(k[0] for k in self.queued)
        busy: set[str] = set()

        def refuse(key: Key) -> Refusal | None:
            if refusal == "database" or self.db_down:
                return "database"
            if key[0] != target:
                return None
            if refusal == "taken":
                return "taken"
            # (not for a catch-up job: a catch-up start refused as busy is told as a skip,
            # and the older slots it caught up are told by no one; left as found)
            spec = self.specs[target]
            if refusal == "busy" and spec.overlap == "skip" and spec.catchup is None:
                busy.add(target)
                return "busy"
            return None

        started, answered = len(shell.started), len(shell.answered)
        for job, until in list(self.paused.items()):
            if until is not None and until <= now:
                del self.paused[job]  # it runs out at this wake: Resumed
                self.expiring[job] = until
        paused_now = set(self.paused)
        actions = shell.wake(at(now), lead=timedelta(seconds=self.lead), refused=refuse)
        assert shell.proposal is not None
        # Decided as of the wake's instant (the latest slot within the lead), and spawned
        # then: the loop does nothing before it.
        self.now = max(now, secs(shell.proposal.at))
        paused_at = {job for job, until in self.paused.items() if until is None or until > self.now}
        for key, why in shell.answered[answered:]:
            if why == "taken":
                self.taken(key)
            elif why == "database":
                self.waiting.add(key)
            self.forget(key)
        self.tell(actions, before, queued_before, busy, paused_now)
        for run in shell.started[started:]:
            self.started(run, paused_at, now)
        self.passed_over_in_queue(paused_now)
        self.limits(started=any(not run.replacing for run in shell.started[started:]))

    def taken(self, key: Key) -> None:
        """Another replica claimed the start: it runs the slot, and tells of what its
        decision missed or caught up (this one says nothing of it)."""
        self.fate(*key, "taken")
        proposal = self.shell.proposal
        assert proposal is not None
        for i, d in enumerate(proposal.decisions):
            if (d.job, d.start) != key or i in proposal.replacing:
                continue  # (a replacement's decision was told here, before its claim)
            spec = self.specs[d.job]
            if d.missed is not None:
                first, last = secs(d.missed.first_slot), secs(d.missed.last_slot)
                for s in spec.slots(first - 0.5, last):
                    self.fate(d.job, at(s), "missed elsewhere")
            if d.caught_up:
                for s in spec.slots(0, secs(key[1]) - 0.5)[-d.caught_up :]:
                    self.fate(d.job, at(s), "caught up elsewhere")

    def forget(self, key: Key) -> None:
        if key in self.queued:
            self.queued.remove(key)

    def tell(
        self,
        actions: list[Action],
        before: dict[str, int],
        queued_before: Counter[str],
        busy: set[str],
        paused_now: set[str],
    ) -> None:
        for action in actions:
            if isinstance(action, Queued):
                key = (action.job.name, action.slot)
                self.waiting.discard(key)
                self.queued.append(key)
            elif isinstance(action, Resumed):
                self.passed_over[action.job] += action.skipped
                # the slots strictly before its end were its own; the one at the end runs
                self.end_pause(action.job, action.skipped, self.expiring.pop(action.job) - 1e-3)
            elif isinstance(action, Tell):
                self.decision(action, before, queued_before, busy, paused_now)

    def decision(
        self,
        tell: Tell,
        before: dict[str, int],
        queued_before: Counter[str],
        busy: set[str],
        paused_now: set[str],
        *,
        replaced: bool = False,  # by a trigger's run
    ) -> None:
        d, job = tell.decision, tell.job.name
        spec = self.specs[job]
        if d.paused:
            assert job in paused_now, f"{job} passed over {d.paused} slots, not paused"
        if d.skip is not None:
            self.fate(job, d.skip, "skipped")
            going = before.get(job, 0) + queued_before[job]
            if d.skip_reason == "overlap":
                assert going or job in busy, f"{job}@{secs(d.skip)} skipped, nothing going"
            else:
                assert spec.max_running is not None
                assert going >= spec.max_running
        if d.caught_up is not None:
            assert d.start is not None
            assert spec.catchup is not None
            older = spec.slots(0, secs(d.start) - 0.5)[-d.caught_up :] if d.caught_up else []
            for s in older:
                self.fate(job, at(s), "caught up")
        if d.missed is not None:
            m = d.missed
            first, last = secs(m.first_slot), secs(m.last_slot)
            slots = spec.slots(first - 0.5, last)
            assert m.count == len(slots), f"{job} missed {m.count} in [{first}, {last}]: {slots}"
            for s in slots:
                key = (job, at(s))
                self.waiting.discard(key)
                self.forget(key)
                self.fate(job, at(s), f"missed ({m.reason})")
            late = self.now - last
            newer = spec.slots(last, self.now)
            if m.reason == "grace":  # R9: late, or a newer slot was due
                too_late = late > spec.grace and (spec.catchup is None or late > spec.catchup)
                assert newer or too_late, f"{job}@{last} missed at {self.now}, late {late}"
            else:  # waited (queue, database) until its grace ran out, or a newer start came
                assert m.count == 1
                assert newer or late > spec.grace or tell.check is not None or replaced, (
                    f"{job}@{last} missed ({m.reason}) at {self.now}, late {late}"
                )

    def started(self, run: Run, paused_now: set[str], now: float) -> None:
        job, spec = run.job, self.specs[run.job]
        key = (job, run.slot)
        assert job not in paused_now, f"{job}@{secs(run.slot)} started while paused"
        self.fate(job, run.slot, "started")
        late = now - secs(run.slot)
        window = max(spec.grace, spec.catchup or 0)
        assert late <= window, f"{job}@{secs(run.slot)} started at {self.now}: too late"
        if key in self.queued:  # first come, first served (a paused job's are passed over)
            ahead = [k for k in self.queued if k[0] not in paused_now]
            assert ahead[0] == key, f"{job}@{secs(run.slot)} started before {ahead[0]}"
            self.queued.remove(key)
        self.waiting.discard(key)
        last = self.last_started.get(job)
        assert last is None or last < run.slot, f"{job}@{secs(run.slot)} after {job}@{last}"
        self.last_started[job] = run.slot

    def passed_over_in_queue(self, paused_now: set[str]) -> None:
        """A paused job's queued runs that left the queue unstarted were passed over (the
        oldest of its runs first; counted by its pause)."""
        for job in self.specs:
            mine = [k for k in self.queued if k[0] == job]
            gone = len(mine) - self.shell.core.queue.counts.get(job, 0)
            assert gone == 0 or (gone > 0 and job in paused_now), f"{job}: {mine} queued"
            for key in mine[:gone]:
                self.queued.remove(key)

    def limits(self, *, started: bool) -> None:
        counts = self.shell.counts()
        for job, n in counts.items():
            spec = self.specs[job]
            if spec.overlap != "allow":
                assert n <= 1, f"{job} ({spec.overlap}) has {n} runs going"
            elif spec.max_running is not None:
                assert n <= spec.max_running, f"{job} has {n} runs, max_running {spec.max_running}"
        limit = self.shell.core.queue.limit
        if started and limit is not None:
            total = sum(counts.values())
            assert total <= limit, f"{total} runs going, daemon max_running {limit}"

    def pause(self, job: str, until: float | str | None) -> None:
        if job not in self.paused:
            self.paused_since[job] = self.now
            self.pending_at_pause[job] = self.pending(job)
        if isinstance(until, str):  # "minute": the whole minute after the next
            end: float | None = (self.now // 60 + 2) * 60
        else:
            end = None if until is None else self.now + until
        self.paused[job] = end
        self.shell.core.pauses.pause(job, None if end is None else at(end))

    def resume(self, job: str) -> None:
        skipped = self.shell.core.pauses.resume(job)
        assert (skipped is None) == (job not in self.paused)
        if skipped is not None:
            del self.paused[job]
            self.passed_over[job] += skipped
            self.end_pause(job, skipped, self.now)

    def end_pause(self, job: str, skipped: int, end: float) -> None:
        """A pause passes over no more than the slots of its time (its start to `end`)
        and the runs of its job waiting when it started."""
        since, pending = self.paused_since.pop(job), self.pending_at_pause.pop(job)
        slots = self.specs[job].slots(since, end)
        assert skipped <= len(slots) + pending, (
            f"{job} paused {since}..{end}: {skipped} passed over"
        )

    def trigger(self, job: str) -> None:
        started = len(self.shell.started)
        got = self.shell.trigger(job, at(self.now))
        if isinstance(got, str):
            return
        for action in got:
            if isinstance(action, Tell) and action.decision.missed is not None:
                self.decision(action, {}, Counter(), set(), set(), replaced=True)
        assert len(self.shell.started) == started + 1
        self.limits(started=not self.shell.started[-1].replacing)

    def end(self, i: int) -> None:
        runs = self.shell.runs
        if runs:
            run = runs[i % len(runs)]
            runs.remove(run)
            self.wake(self.now, None, 0)  # the loop wakes when a run ends and runs wait

    def finish(self) -> None:
        """Let everything waiting resolve, then account for every slot."""
        for job in list(self.paused):
            self.resume(job)
        self.shell.core.queue.limit = None
        self.shell.runs.clear()
        self.db_down = False
        self.wake(self.now + 6, None, 0)
        self.wake(self.now + 6, None, 0)
        assert not self.shell.core.queue
        assert not self.shell.core.unclaimed
        for job, spec in self.specs.items():
            slots = spec.slots(0, self.now)
            mine = sorted(s for (j, s), n in self.fates.items() if j == job)
            assert set(mine) <= set(slots)
            assert len(mine) + self.passed_over[job] == len(slots), (
                f"{job}: {len(slots)} slots, {len(mine)} accounted for and "
                f"{self.passed_over[job]} passed over; not accounted: "
                f"{sorted(set(slots) - set(mine))[:10]}"
            )


def _job(name: str, every: int, overlap: str = "skip", grace: int = 3) -> Spec:
    return Spec(name, every, (), grace, overlap, None, None)


# Cases this test found in the core (fixed since), kept so that it always tries them.
FOUND = [
    # a start retried when the database answered, beyond the daemon's max_running
    (
        (_job("a", 7), _job("b", 7)),
        None,
        [("limit", 1), ("wake", "database", 0), ("wake", None, 0)],
    ),
    # a replace job's queued run left the queue as its newer slot fell due: two runs
    ((_job("a", 7), _job("b", 7, "replace", 20)), 1, [("suspend", 1900, None, 0)]),
    # a trigger while the job's start waits for the database, then its retry: two runs
    ((_job("a", 7),), None, [("wake", "database", 0), ("trigger", 0), ("wake", None, 0)]),
    (
        (_job("a", 7, "replace"),),
        None,
        [("wake", "database", 0), ("trigger", 0), ("wake", None, 0)],
    ),
    # a queued start refused by the database, then a newer queued slot of its job starting
    # first: the older one started after it
    (
        (Spec("a", 10, (), 300, "allow", None, None),),
        1,
        [
            *[("wake", None, 0)] * 3,
            ("db", True),
            ("end", 0),
            ("db", False),
            ("wake", None, 0),
            ("end", 0),
            ("wake", None, 0),
        ],
    ),
    # (not a bug found: a pause running out on a slot, across a suspend; that slot is R9's)
    ((_job("a", 60, grace=300),), None, [("pause", 0, "minute"), ("suspend", 301, None, 0)]),
]


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    jobs=st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True).flatmap(
        lambda names: st.tuples(*(specs(name) for name in sorted(names)))
    ),
    limit=st.sampled_from([None, 1, 2]),
    lead=st.sampled_from([0, 0, 0.5]),
    steps=st.lists(STEP, max_size=40),
)
@example(*FOUND[0], 0)
@example(*FOUND[1], 0)
@example(*FOUND[2], 0)
@example(*FOUND[3], 0)
@example(*FOUND[4], 0)
@example(*FOUND[5], 0)
def test_the_core_keeps_the_rules(
    jobs: tuple[Spec, ...], limit: int | None, steps: list[tuple[Any, ...]], lead: float
) -> None:
    text = (f"daemon: {{max_running: {limit}}}\n" if limit else "") + "jobs:\n"
    shell = Shell(text + "".join(spec.yaml() for spec in jobs))
    model = Model(shell, {spec.name: spec for spec in jobs}, lead=lead)
    names = list(model.specs)
    for step in steps:
        kind = step[0]
        if kind == "wake":
            wake = shell.core.wake_at(timedelta(seconds=lead))
            model.wake(max(model.now, secs(wake)) if wake else model.now + 60, step[1], step[2])
        elif kind in ("tick", "suspend"):
            model.wake(model.now + step[1], step[2], step[3])
        elif kind == "end":
            model.end(step[1])
        elif kind == "pause":
            model.pause(names[step[1] % len(names)], step[2])
        elif kind == "resume":
            model.resume(names[step[1] % len(names)])
        elif kind == "db":
            model.db_down = step[1]
        elif kind == "trigger":
            model.trigger(names[step[1] % len(names)])
        else:
            shell.core.queue.limit = step[1]
    model.finish()
