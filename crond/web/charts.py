"""The two pictures, as numbers the templates draw as SVG (no script): a job's last runs
(a bar a run: height its duration, colour its outcome) and the next 24 hours of every
job's fires on one axis, in quarter hours (the 02:00 pile-up at a glance).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from crond.store.base import AttemptRow
from crond.when.timing import Timing

WIDTH = 600
HEIGHT = 120
SLOTS = 96  # quarter hours in 24 hours
MAX_FIRES = 200_000  # counted over all jobs, at most: beyond, the count says so
_PER_JOB = 24 * 60 * 60  # one a second at most a job (an `every: 1s` job)
_NAMES_SHOWN = 5
_FEWEST_BARS = 25


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    kind: str  # a CSS class: the outcome
    title: str


def run_bars(runs: Sequence[AttemptRow]) -> list[Bar]:
    """The runs oldest first, left to right; the longest fills the height."""
    shown = list(reversed(runs))
    if not shown:
        return []
    longest = max((r.duration_s or 0.0) for r in shown) or 1.0
    step = WIDTH / max(len(shown), _FEWEST_BARS)  # a few runs: narrow bars, at the left
    bars = []
    for i, run in enumerate(shown):
        seconds = run.duration_s or 0.0
        height = max(2.0, (HEIGHT - 4) * seconds / longest)
        outcome = run.outcome or "running"
        title = f"{run.started:%Y-%m-%d %H:%M:%S} UTC: {outcome}, {seconds:.2f}s"
        bars.append(Bar(i * step + 1, HEIGHT - height, max(step - 2, 1), height, outcome, title))
    return bars


@dataclass
class Slot:
    start: datetime
    count: int = 0
    names: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Timeline:
    start: datetime
    slots: list[Slot]
    bars: list[Bar]
    total: int
    cut: bool  # MAX_FIRES reached: later fires not counted


def timeline(names: Iterable[str], timing_of: Callable[[str], Timing], now: datetime) -> Timeline:
    """Fires of every job in the 24 hours after `now`, counted by quarter hour."""
    start = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
    end = now + timedelta(hours=24)
    slots = [Slot(start + timedelta(minutes=15 * i)) for i in range(SLOTS + 1)]
    total, cut = 0, False
    for name in names:
        for fire in itertools.islice(timing_of(name).fires(now), _PER_JOB):
            if fire.at > end:
                break
            slot = slots[int((fire.at - start).total_seconds() // 900)]
            slot.count += 1
            if len(slot.names) < _NAMES_SHOWN and name not in slot.names:
                slot.names.append(name)
            total += 1
            if total >= MAX_FIRES:
                cut = True
                break
        if cut:
            break
    most = max(s.count for s in slots) or 1
    step = WIDTH / len(slots)
    bars = []
    for i, s in enumerate(slots):
        height = 0.0 if not s.count else max(2.0, (HEIGHT - 4) * s.count / most)
        title = f"{s.start:%H:%M} UTC: {s.count} fire{'s' if s.count != 1 else ''}"
        bars.append(Bar(i * step, HEIGHT - height, max(step - 1, 1), height, "fires", title))
    return Timeline(start, slots, bars, total, cut)
