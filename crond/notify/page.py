"""The metrics page (crond/notify/metrics.py keeps the numbers): the families, a job's
numbers, and the page written from a `Reading`, in the Prometheus text format
(exposition.py writes its numbers, label values and histograms).

A scrape of 10,000 jobs is 22 MB and a quarter second of work. The daemon serves it
from its own loop, so `sliced` writes it in slices of at most WORK_S, with a rest of
REST_S for the loop between two, as crond/daemon/pausing.py does for a pause of many
jobs: a run due meanwhile starts as if there were no scrape (docs/performance.md). The
slices are kept as they are (byte strings of ~100 KB) and written one after the other:
joining 22 MB would be a stall of its own.

A `Reading` is taken at once at the start: which jobs, the live numbers (runs going on,
next fires), the rest of the small numbers. A job's own counters are read when its
samples are written, so a run that ends during a scrape may be in one family of the
page and not yet in another; a job's histogram is always whole.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from crond.notify.exposition import escaped, go_float, histogram, label_value, number, whole

OUTCOMES = ("success", "failed", "timeout", "killed")  # crond.run.attempt.Outcome
SKIP_REASONS = ("overlap", "paused", "max_running", "lock")
DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
DURATION_LE = (*(go_float(b) for b in DURATION_BUCKETS), "+Inf")
LAG_LE = (*(go_float(b) for b in LAG_BUCKETS), "+Inf")

WORK_S, REST_S = 0.002, 0.001  # a slice's work, the loop's rest after it
_CHECK = 32  # pieces written between two looks at the clock

# (family name, type, help), in the order of the page.
FAMILIES = {
    "runs": ("crond_job_runs", "counter", "Runs of a job that ended, by outcome."),
    "duration": ("crond_job_duration_seconds", "histogram", "How long a job's runs took."),
    "last_run": (
        "crond_job_last_run_timestamp_seconds",
        "gauge",
        "When a job's last run ended (Unix time; 0: never).",
    ),
    "last_success": (
        "crond_job_last_success_timestamp_seconds",
        "gauge",
        "When a job's last successful run ended (Unix time; 0: never).",
    ),
    "next_fire": (
        "crond_job_next_fire_timestamp_seconds",
        "gauge",
        "When a job fires next (Unix time; 0: not scheduled).",
    ),
    "running": ("crond_job_running", "gauge", "Runs of a job going on now."),
    "missed": ("crond_job_missed", "counter", "Fires of a job missed (not run)."),
    "skipped": ("crond_job_skipped", "counter", "Fires of a job skipped, by reason."),
    "paused": ("crond_job_paused", "gauge", "1 when a job is paused."),
    "lag": (
        "crond_start_lag_seconds",
        "histogram",
        "How late runs started after their scheduled time.",
    ),
    "reload_ok": (
        "crond_config_last_reload_successful",
        "gauge",
        "1 when the last load of the schedules file succeeded.",
    ),
    "reload_at": (
        "crond_config_last_reload_timestamp_seconds",
        "gauge",
        "When the schedules file was last loaded (Unix time; 0: never).",
    ),
    "notifications": (
        "crond_notifications",
        "counter",
        "Notifications delivered (sent) or given up (failed), by notifier.",
    ),
    "lock_capacity": ("crond_lock_capacity", "gauge", "How many runs may hold a lock at once."),
    "lock_held": ("crond_lock_held", "gauge", "Runs holding a lock now."),
    "lock_waiting": ("crond_lock_waiting", "gauge", "Due runs waiting for a lock now."),
    "jobs": ("crond_jobs", "gauge", "Jobs in the schedules file."),
    "build": ("crond_build_info", "gauge", "crond's version (the value is always 1)."),
}


class JobNumbers:
    """One job's numbers. `label` is its `job_name="..."` pair, escaped once."""

    __slots__ = (
        "buckets",
        "duration_sum",
        "label",
        "last_run",
        "last_success",
        "missed",
        "name",
        "paused",
        "runs",
        "skipped",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.label = f'job_name="{label_value(name)}"'
        self.runs = dict.fromkeys(OUTCOMES, 0)
        self.buckets = [0] * (len(DURATION_BUCKETS) + 1)  # per bucket, not cumulative
        self.duration_sum = 0.0
        self.last_run = 0.0
        self.last_success = 0.0
        self.missed = 0
        self.skipped = dict.fromkeys(SKIP_REASONS, 0)
        self.paused = False


@dataclass(frozen=True)
class Reading:
    """What a scrape reads at its start (copies: later updates do not change it)."""

    jobs: list[JobNumbers]
    running: dict[str, int]
    next_fire: dict[str, float]
    lag_buckets: list[int]
    lag_sum: float
    reload_ok: bool
    reload_at: float
    notifications: dict[str, dict[str, int]]
    version: str
    locks: list[tuple[str, int, int, int]] = dataclass_field(default_factory=list)  # (name,
    # capacity, held, waiting) of each lock of the file (docs/workflows.md)


def render(reading: Reading) -> bytes:
    """The whole page at once."""
    return "".join(pieces(reading)).encode()


async def sliced(reading: Reading) -> list[bytes]:
    """The page as byte strings to write one after the other, made in slices of at most
    WORK_S with a rest of REST_S for the loop after each."""
    parts: list[bytes] = []
    pending: list[str] = []
    began = time.perf_counter()
    for count, piece in enumerate(pieces(reading), 1):
        pending.append(piece)
        if count % _CHECK == 0 and time.perf_counter() - began >= WORK_S:
            parts.append("".join(pending).encode())
            pending.clear()
            await asyncio.sleep(REST_S)
            began = time.perf_counter()
    parts.append("".join(pending).encode())
    return parts


def pieces(reading: Reading) -> Iterator[str]:
    """The page's text: per job family, one piece per job."""
    jobs = reading.jobs
    yield _head("runs")
    for job in jobs:
        prefix = f"crond_job_runs_total{{{job.label},outcome="
        yield "".join(
            f'{prefix}"{escaped(outcome)}"}} {whole(count)}\n'
            for outcome, count in job.runs.items()
        )
    yield _head("duration")
    for job in jobs:
        out: list[str] = []
        histogram(out, "crond_job_duration_seconds", job.label, job.buckets, job.duration_sum,
                  les=DURATION_LE)  # fmt: skip
        yield "".join(out)
    yield from _gauges("last_run", ((job.label, job.last_run) for job in jobs))
    yield from _gauges("last_success", ((job.label, job.last_success) for job in jobs))
    next_fire, running = reading.next_fire, reading.running
    yield from _gauges("next_fire", ((job.label, next_fire.get(job.name, 0)) for job in jobs))
    yield from _gauges("running", ((job.label, running.get(job.name, 0)) for job in jobs))
    yield _head("missed")
    for job in jobs:
        yield f"crond_job_missed_total{{{job.label}}} {whole(job.missed)}\n"
    yield _head("skipped")
    for job in jobs:
        prefix = f"crond_job_skipped_total{{{job.label},reason="
        yield "".join(
            f'{prefix}"{escaped(reason)}"}} {whole(count)}\n'
            for reason, count in job.skipped.items()
        )
    yield from _gauges("paused", ((job.label, float(job.paused)) for job in jobs))
    yield from _tail(reading)


def _tail(reading: Reading) -> Iterator[str]:
    """The families that are not per job."""
    out = [_head("lag")]
    histogram(out, "crond_start_lag_seconds", "", reading.lag_buckets, reading.lag_sum,
              les=LAG_LE)  # fmt: skip
    yield "".join(out)
    yield from _gauges("reload_ok", [("", float(reading.reload_ok))])
    yield from _gauges("reload_at", [("", reading.reload_at)])
    yield _head("notifications")
    for notifier, counts in reading.notifications.items():
        prefix = f'crond_notifications_total{{notifier="{label_value(notifier)}",result='
        for result, count in counts.items():
            yield f'{prefix}"{escaped(result)}"}} {whole(count)}\n'
    for key, i in (("lock_capacity", 1), ("lock_held", 2), ("lock_waiting", 3)):
        yield from _gauges(key, ((lock_label(lock[0]), float(lock[i])) for lock in reading.locks))
    yield from _gauges("jobs", [("", len(reading.jobs))])
    yield from _gauges("build", [(f'version="{label_value(reading.version)}"', 1)])


def lock_label(name: str) -> str:
    return f'lock="{label_value(name)}"'


def _head(key: str) -> str:
    name, kind, text = FAMILIES[key]
    if kind == "counter":
        name += "_total"
    return f"# HELP {name} {text}\n# TYPE {name} {kind}\n"


def _gauges(key: str, values: Iterable[tuple[str, float]]) -> Iterator[str]:
    """A gauge family: one sample per (label pairs, value); "" is no labels."""
    yield _head(key)
    name = FAMILIES[key][0]
    for labels, value in values:
        pairs = f"{{{labels}}}" if labels else ""
        yield f"{name}{pairs} {number(value)}\n"
