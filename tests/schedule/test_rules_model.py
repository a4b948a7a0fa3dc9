"""crond.schedule.rules against a brute-force model of R9 with overlap, `max_running` and
pauses (docs/schedules.md), over random jobs, cursors, clocks and running counts.

The model walks the slots of an `every` job one by one and applies the rules as the docs
write them; it shares nothing with the planner but the Decision it is compared with.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from crond.config import loader
from crond.schedule.rules import Decision, Missed, decide, make_entry
from crond.when.preview import PreviewRow, format_table, limit_notes
from crond.when.timing import Fire

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)  # a whole hour: the epoch-anchored slots fall on it


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


@dataclass(frozen=True)
class Job:
    every: int  # seconds
    grace: int
    catchup: int | None  # the catch-up window in seconds; None: catchup none
    overlap: str
    max_running: int | None

    def text(self) -> str:
        parts = [f"every: {self.every}s", f"grace: {self.grace}s", f"overlap: {self.overlap}"]
        if self.catchup is not None:
            parts += ["catchup: latest", f"catchup_window: {self.catchup}s"]
        if self.max_running is not None:
            parts.append(f"max_running: {self.max_running}")
        return "{" + ", ".join([*parts, "command: x"]) + "}"


def model(job: Job, cursor: int, now: int, running: int, paused: bool) -> Decision:
    """What the docs say, slot by slot."""
    first_after = (cursor // job.every + 1) * job.every
    after_now = (max(now, cursor) // job.every + 1) * job.every
    if now <= cursor:  # R9: the cursor never goes back; nothing is due
        return Decision("j", at(cursor), _fire(first_after))
    slots = list(range(first_after, now + 1, job.every))
    if not slots:
        return Decision("j", at(now), _fire(first_after))
    if paused:  # passed over, counted, not missed, never made up
        return Decision("j", at(now), _fire(after_now), paused=len(slots))
    latest, older = slots[-1], slots[:-1]
    late = now - latest
    catching_up = late > job.grace
    if catching_up and (job.catchup is None or late > job.catchup):
        every_slot = Missed(len(slots), at(slots[0]), at(latest))
        return Decision("j", at(now), _fire(after_now), missed=every_slot)
    missed = Missed(len(older), at(older[0]), at(older[-1])) if older else None
    reason = None
    if running and job.overlap == "skip":
        reason = "overlap"
    elif running and job.max_running is not None and running >= job.max_running:
        reason = "max_running"
    if reason is not None:
        return Decision(
            "j", at(now), _fire(after_now), skip=at(latest), skip_reason=reason, missed=missed
        )
    return Decision(
        "j",
        at(now),
        _fire(after_now),
        start=at(latest),
        replace=running > 0 and job.overlap == "replace",
        missed=None if catching_up else missed,
        caught_up=len(older) if catching_up else None,
    )


def _fire(seconds: int) -> Fire:
    return Fire(at(seconds), at(seconds), None)  # an `every` job's: its local time is UTC


@st.composite
def jobs(draw: st.DrawFn) -> Job:
    overlap = draw(st.sampled_from(["skip", "allow", "replace"]))
    limit = draw(st.none() | st.integers(1, 3)) if overlap == "allow" else None
    return Job(
        every=draw(st.sampled_from([1, 2, 5, 10, 60])),
        grace=draw(st.integers(1, 90)),
        catchup=draw(st.none() | st.integers(1, 300)),
        overlap=overlap,
        max_running=limit,
    )


@settings(max_examples=1000, deadline=None)
@given(
    job=jobs(),
    cursor=st.integers(0, 400),
    now=st.integers(0, 700),
    running=st.integers(0, 3),
    paused=st.booleans(),
)
def test_planner_matches_the_model(
    job: Job, cursor: int, now: int, running: int, paused: bool
) -> None:
    loaded = loader.loads(f"jobs:\n  j: {job.text()}\n").jobs["j"]
    entry = make_entry(loaded, at(cursor))
    assert decide(entry, at(now), running, paused=paused) == model(
        job, cursor, now, running, paused
    )


def test_the_model_sees_each_kind_of_decision() -> None:
    """The random cases above reach every branch: the model itself, on fixed points."""
    allow2 = Job(60, 5, None, "allow", 2)
    assert model(allow2, 0, 60, 2, False).skip_reason == "max_running"
    assert model(allow2, 0, 60, 1, False).start == at(60)
    assert model(allow2, 0, 125, 0, True).paused == 2
    assert model(Job(60, 5, 600, "skip", None), 0, 130, 0, False).caught_up == 1


# --- `crond next`: what max_running may do to the fires it lists ----------------------


def test_crond_next_says_a_fire_may_be_skipped_or_queued() -> None:
    cfg = loader.loads(
        "daemon: {max_running: 4}\n"
        "jobs:\n  poll: {every: 1m, overlap: allow, max_running: 3, command: x}\n"
        "  plain: {every: 1m, command: x}\n"
    )
    limits = {name: job.settings.max_running for name, job in cfg.jobs.items()}
    notes = limit_notes(limits, cfg.config.daemon.max_running)
    assert notes == [
        "max_running: a fire of poll (3) is skipped while that many of the job's runs are "
        "going (job.skipped, reason max_running)",
        "daemon.max_running: 4 runs at most at once; a fire beyond it waits (job.queued) and "
        "starts when a run ends, or is missed (reason queue) if its grace runs out first",
    ]
    row = PreviewRow("poll", _fire(60))
    assert format_table([row], notes).endswith("\n\n" + "\n".join(notes))
    assert format_table([row]) == format_table([row], limit_notes({"plain": None}, None))


def test_crond_next_names_ten_limited_jobs_and_counts_the_rest() -> None:
    (note,) = limit_notes({f"j{i}": 2 for i in range(12)}, None)
    assert "j9 (2) and 2 more is skipped" in note
    assert "j10" not in note
