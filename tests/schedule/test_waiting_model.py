"""`overlap: queue` and `catchup: all` against a brute-force model, over random steps of
a daemon's life: time moves on (a little, or far: a suspend), the run going ends or not.
The core is driven as the loop drives it (tests/schedule/shell.py).

The model knows nothing of the core: it lists the job's slots by walking every second,
and checks what the core did against docs/schedules.md:

- every slot is accounted for exactly once: started, skipped, missed, or still waiting;
  none twice, none that is not a slot;
- never two runs at once; started slots only ever increase (oldest first);
- `overlap: queue`: a slot is skipped only while another waits; a slot starts no later
  than its grace after it; at most one waits;
- `catchup: all`: a slot starts no later than its catch-up window after it; a slot is
  missed only when it was older than the window, or beyond `catchup_max` of a catch-up,
  or when R9 would (not caught up: no downtime) ... and while runs end promptly and no
  slot is older than the window, none is missed at all.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from crond.schedule.actions import Queued, Start, Tell
from tests.schedule.shell import T0, Shell

EVERY = 10  # seconds; T0 is a multiple of it since the epoch


def _slot(t: datetime) -> int:
    return int((t - T0).total_seconds())


def _is_slot(s: int) -> bool:
    return s > 0 and s % EVERY == 0


steps = st.lists(
    st.tuples(
        st.one_of(st.integers(1, 25), st.integers(60, 400)),  # a little, or a suspend
        st.booleans(),  # the run going ends before the step
    ),
    min_size=1,
    max_size=25,
)


def _drive(text: str, moves: list[tuple[int, bool]]) -> tuple[Shell, dict[str, list[int]], int]:
    shell = Shell(text)
    seen: dict[str, list[int]] = {"started": [], "skipped": [], "missed": [], "queued": []}
    now = 0
    for dt, ends in moves:
        if ends and shell.runs:
            shell.end(shell.runs[0].job)
        now += dt
        running_before = len(shell.runs)
        waiting_before = shell.core.backlog.count("j")
        for action in shell.wake(T0 + timedelta(seconds=now)):
            if isinstance(action, Start):
                s = _slot(action.slot)
                seen["started"].append(s)
                assert now - s <= _limit(shell), (s, now)
            elif isinstance(action, Queued):
                seen["queued"].append(_slot(action.slot))
            elif isinstance(action, Tell):
                d = action.decision
                if d.skip is not None:
                    assert running_before or waiting_before  # a run going or waiting
                    seen["skipped"].append(_slot(d.skip))
                if d.missed is not None:
                    first, last = _slot(d.missed.first_slot), _slot(d.missed.last_slot)
                    slots = [s for s in range(first, last + 1) if _is_slot(s)]
                    assert len(slots) == d.missed.count
                    seen["missed"] += slots
        assert len(shell.runs) <= 1  # never two at once
        assert shell.core.backlog.count("j") <= _most_waiting(shell)
    return shell, seen, now


def _limit(shell: Shell) -> int:
    settings_ = shell.jobs["j"].settings
    if settings_.catchup.value == "all":
        return int(settings_.catchup_window.total_seconds())
    return int(settings_.grace.total_seconds())


def _most_waiting(shell: Shell) -> int:
    settings_ = shell.jobs["j"].settings
    return settings_.catchup_max if settings_.catchup.value == "all" else 1


def _accounted(shell: Shell, seen: dict[str, list[int]], now: int) -> None:
    waiting = [_slot(t) for t in shell.core.backlog.slots("j")]
    done = seen["started"] + seen["skipped"] + seen["missed"] + waiting
    assert sorted(done) == [s for s in range(1, now + 1) if _is_slot(s)]  # each once
    assert seen["started"] == sorted(seen["started"])  # oldest first, never back


@settings(max_examples=150, deadline=None, derandomize=True)
@given(moves=steps, grace=st.sampled_from([5, 15, 30]))
def test_overlap_queue_against_the_model(moves: list[tuple[int, bool]], grace: int) -> None:
    text = f"jobs:\n  j: {{every: {EVERY}s, grace: {grace}s, overlap: queue, command: x}}\n"
    shell, seen, now = _drive(text, moves)
    _accounted(shell, seen, now)
    waiting = [_slot(t) for t in shell.core.backlog.slots("j")]
    for s in seen["queued"]:  # each waited once, then started, was missed, or waits still
        assert s in seen["started"] or s in seen["missed"] or s in waiting


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    moves=steps,
    window=st.sampled_from([50, 200, 1000]),
    most=st.sampled_from([1, 3, 100]),
)
def test_catchup_all_against_the_model(
    moves: list[tuple[int, bool]], window: int, most: int
) -> None:
    text = (
        f"jobs:\n  j: {{every: {EVERY}s, grace: 5s, catchup: all, catchup_window: {window}s,"
        f" catchup_max: {most}, command: x}}\n"
    )
    shell, seen, now = _drive(text, moves)
    _accounted(shell, seen, now)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(gaps=st.lists(st.integers(1, 150), min_size=1, max_size=10))
def test_catchup_all_with_prompt_runs_and_a_wide_window_misses_nothing(gaps: list[int]) -> None:
    """Runs end at once, the window is wider than any gap and catchup_max is never
    reached: every slot runs, oldest first, however the wakes fall."""
    text = (
        f"jobs:\n  j: {{every: {EVERY}s, grace: 5s, catchup: all, catchup_window: 1000s,"
        " command: x}\n"
    )
    shell = Shell(text)
    started: list[int] = []
    missed: list[int] = []
    now = 0
    for gap in gaps:
        now += gap
        shell.now = T0 + timedelta(seconds=now)
        while True:  # each run ends at once: the loop wakes again at the same instant
            for action in shell.wake(shell.now):
                if isinstance(action, Start):
                    started.append(_slot(action.slot))
                elif isinstance(action, Tell) and action.decision.missed is not None:
                    missed.append(_slot(action.decision.missed.first_slot))
            if not shell.runs:
                break
            shell.end(shell.runs[0].job)
    assert missed == []
    assert started == [s for s in range(1, now + 1) if _is_slot(s)]
