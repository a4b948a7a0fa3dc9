"""The daemon's Prometheus metrics: kept as plain numbers, rendered at each scrape.

The daemon's loop calls the update methods synchronously for every run of every job
(thousands a second in a big file), so each is a dict lookup and a few number updates;
nothing is formatted until a scrape asks. Updates for a job that is not (or no longer)
configured are ignored: a run of a job removed at a reload may end after it.

A scrape is rendered by crond (page.py), in the Prometheus text format, rather than by
prometheus-client's `generate_latest`: that formats every sample through several calls
and took ~150 ms for 1,000 jobs (30,000 samples), and a scrape is served from the
daemon's own loop. `route` writes the page in slices that let the loop run between
them, so a scrape never holds back a run that is due (page.py). `Metrics` is also a
prometheus-client Collector (`collect`), so it can be registered in a private
CollectorRegistry; the tests check that `render()` is byte for byte what
`generate_latest` makes of that registry.

Every job's series exist from the first scrape, at 0, for each outcome and skip reason;
a timestamp never set is 0. Call `reloaded(True, at)` after the first load too: until
then `crond_config_last_reload_successful` is 0.

Histogram buckets (upper bounds, seconds; +Inf is added):

- `crond_job_duration_seconds`: 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600, 1800, 3600,
  7200, 21600: a cron job runs from a fraction of a second to hours; the bounds are
  about a factor of 2 to 5 apart, so a job's typical duration and its slow tail fall in
  different buckets at every scale, with 15 bucket series a job.
- `crond_start_lag_seconds`: 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
  2.5, 5, 10, 30, 60: a healthy start is a millisecond or two late (docs/performance.md);
  a loaded machine tens of ms; a stalled loop seconds to a minute.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from crond.clock import Clock, SystemClock
from crond.notify import page
from crond.notify.page import (
    DURATION_BUCKETS,
    DURATION_LE,
    FAMILIES,
    LAG_BUCKETS,
    LAG_LE,
    OUTCOMES,
    SKIP_REASONS,
    JobNumbers,
)

if TYPE_CHECKING:
    from crond.config.loaded import LoadedJob
    from crond.notify.http import Answer

__all__ = [
    "DURATION_BUCKETS",
    "LAG_BUCKETS",
    "OUTCOMES",
    "PING",
    "RESULTS",
    "SKIP_REASONS",
    "Live",
    "Metrics",
]

# (job_name, runs running now, next fire as epoch seconds or None), read at each scrape.
Live = Callable[[], Iterable[tuple[str, int, float | None]]]
# (lock, capacity, runs holding it, runs waiting for it) of each lock, read at each scrape.
LocksLive = Callable[[], Iterable[tuple[str, int, int, int]]]

REUSE_S = 1.0  # route() answers the same page for this long (Prometheus scrapes every 15 s+)
RESULTS = ("sent", "failed")
PING = "ping"  # the notifier name under which a job's `ping` deliveries are counted


class Metrics:
    """The daemon's metrics. Updated and rendered from the daemon's loop thread only (no
    locks). `live` is read at each scrape for what the loop knows now: the runs going on
    and each job's next fire."""

    def __init__(
        self,
        version: str,
        live: Live,
        *,
        reuse_s: float = REUSE_S,
        clock: Clock | None = None,
        locks: LocksLive | None = None,
    ) -> None:
        self._version = version
        self._locks = locks
        self._clock: Clock = clock or SystemClock()  # its monotonic seconds: route()'s reuse
        self._live = live
        self._reuse_s = reuse_s
        self._page: tuple[float, list[bytes]] | None = None  # (made, monotonic; page)
        self._rendering: asyncio.Future[list[bytes]] | None = None  # route()'s render under way
        self._jobs: dict[str, JobNumbers] = {}
        self._notifications: dict[str, dict[str, int]] = {PING: dict.fromkeys(RESULTS, 0)}
        self._lag_buckets = [0] * (len(LAG_BUCKETS) + 1)
        self._lag_sum = 0.0
        self._reload_ok = False
        self._reload_at = 0.0

    # --- updates: O(1), no formatting ---------------------------------------------------

    def set_jobs(self, jobs: Mapping[str, LoadedJob]) -> None:
        """The jobs of a (re)load, in file order: new ones at 0, removed ones dropped,
        kept ones (by name) keep their numbers."""
        old = self._jobs
        self._jobs = {name: old.get(name) or JobNumbers(name) for name in jobs}

    def set_notifiers(self, names: Iterable[str]) -> None:
        """The notifiers of a (re)load; "ping" is always there."""
        old = self._notifications
        self._notifications = {
            name: old.get(name) or dict.fromkeys(RESULTS, 0) for name in [*names, PING]
        }

    def run_started(self, job_name: str, lag_s: float) -> None:
        if job_name in self._jobs:
            lag = max(0.0, lag_s)  # max also turns NaN into 0
            self._lag_buckets[bisect_left(LAG_BUCKETS, lag)] += 1
            self._lag_sum += lag

    def run_finished(self, job_name: str, outcome: str, duration_s: float, ended_at: float) -> None:
        job = self._jobs.get(job_name)
        if job is None:
            return
        job.runs[outcome] = job.runs.get(outcome, 0) + 1
        duration = max(0.0, duration_s)
        job.buckets[bisect_left(DURATION_BUCKETS, duration)] += 1
        job.duration_sum += duration
        job.last_run = ended_at
        if outcome == "success":
            job.last_success = ended_at

    def missed(self, job_name: str, count: int) -> None:
        job = self._jobs.get(job_name)
        if job is not None:
            job.missed += count

    def skipped(self, job_name: str, reason: str, count: int = 1) -> None:
        job = self._jobs.get(job_name)
        if job is not None:
            job.skipped[reason] = job.skipped.get(reason, 0) + count

    def set_paused(self, job_name: str, paused: bool) -> None:
        job = self._jobs.get(job_name)
        if job is not None:
            job.paused = paused

    def notification(self, notifier: str, result: str) -> None:
        """A delivery to `notifier` ("ping" for a job's ping) ended: "sent" or "failed"."""
        counts = self._notifications.get(notifier)
        if counts is not None:
            counts[result] = counts.get(result, 0) + 1

    def reloaded(self, ok: bool, at: float) -> None:
        """A load of the file (the first one too) succeeded or failed at `at` (Unix time)."""
        self._reload_ok = ok
        self._reload_at = at

    # --- a scrape --------------------------------------------------------------------------

    def route(self) -> Answer | Awaitable[Answer]:
        """GET /metrics, for crond.notify.http: the page made less than `reuse_s` ago,
        or one written anew in slices that let the loop run between them (page.sliced).
        Scrapes that come together (Prometheus replicas, or a client hammering the port)
        share one render: each connection would otherwise hold a page of its own (22 MB
        for 10,000 jobs) while it is sent. Counted from the render's end, so a client
        hammering the port has the daemon render at most half the time."""
        now = self._clock.monotonic()
        if self._page is not None and 0 <= now - self._page[0] < self._reuse_s:
            return 200, CONTENT_TYPE_LATEST, self._page[1]
        if self._rendering is None:
            self._rendering = asyncio.ensure_future(self._render())
        return self._rendered(self._rendering)

    async def _rendered(self, rendering: asyncio.Future[list[bytes]]) -> Answer:
        # Shielded: a scrape that hangs up does not stop the render the others wait on.
        return 200, CONTENT_TYPE_LATEST, await asyncio.shield(rendering)

    async def _render(self) -> list[bytes]:
        try:
            parts = await page.sliced(self._reading())
        finally:
            self._rendering = None
        self._page = (self._clock.monotonic(), parts)
        return parts

    def render(self) -> bytes:
        """The whole page in the Prometheus text format, at once."""
        return page.render(self._reading())

    def _reading(self) -> page.Reading:
        running, next_fire = self._read_live()
        return page.Reading(
            jobs=list(self._jobs.values()),
            running=running,
            next_fire=next_fire,
            lag_buckets=list(self._lag_buckets),
            lag_sum=self._lag_sum,
            reload_ok=self._reload_ok,
            reload_at=self._reload_at,
            notifications={name: dict(counts) for name, counts in self._notifications.items()},
            version=self._version,
            locks=self._read_locks(),
        )

    def _read_locks(self) -> list[tuple[str, int, int, int]]:
        return [] if self._locks is None else list(self._locks())

    def _read_live(self) -> tuple[dict[str, int], dict[str, float]]:
        running: dict[str, int] = {}
        next_fire: dict[str, float] = {}
        for name, count, fire in self._live():
            running[name] = count
            if fire is not None:
                next_fire[name] = fire
        return running, next_fire

    # --- the same numbers as prometheus-client families ---------------------------------

    def collect(self) -> Iterator[Metric]:
        """The metrics as prometheus-client families (the Collector protocol), for a
        CollectorRegistry; `render()` writes the same page faster."""
        running, next_fire = self._read_live()
        jobs = self._jobs.values()
        runs = _family("runs", ["job_name", "outcome"])
        for job in jobs:
            for outcome, count in job.runs.items():
                runs.add_metric([job.name, outcome], count)
        duration = HistogramMetricFamily(*_named("duration"), labels=["job_name"])
        for job in jobs:
            buckets = _cumulative(job.buckets, DURATION_LE)
            duration.add_metric([job.name], buckets, job.duration_sum)
        yield from (runs, duration)
        yield _per_job("last_run", {job.name: job.last_run for job in jobs})
        yield _per_job("last_success", {job.name: job.last_success for job in jobs})
        yield _per_job("next_fire", {job.name: next_fire.get(job.name, 0) for job in jobs})
        yield _per_job("running", {job.name: running.get(job.name, 0) for job in jobs})
        missed = _family("missed", ["job_name"])
        skipped = _family("skipped", ["job_name", "reason"])
        for job in jobs:
            missed.add_metric([job.name], job.missed)
            for reason, count in job.skipped.items():
                skipped.add_metric([job.name, reason], count)
        yield from (missed, skipped)
        yield _per_job("paused", {job.name: float(job.paused) for job in jobs})
        lag = HistogramMetricFamily(*_named("lag"), labels=[])
        lag.add_metric([], _cumulative(self._lag_buckets, LAG_LE), self._lag_sum)
        yield lag
        yield GaugeMetricFamily(*_named("reload_ok"), value=float(self._reload_ok))
        yield GaugeMetricFamily(*_named("reload_at"), value=self._reload_at)
        notifications = _family("notifications", ["notifier", "result"])
        for notifier, counts in self._notifications.items():
            for result, count in counts.items():
                notifications.add_metric([notifier, result], count)
        yield notifications
        locks = self._read_locks()
        for key, i in (("lock_capacity", 1), ("lock_held", 2), ("lock_waiting", 3)):
            family = GaugeMetricFamily(*_named(key), labels=["lock"])
            for lock in locks:
                family.add_metric([lock[0]], float(lock[i]))
            yield family
        yield GaugeMetricFamily(*_named("jobs"), value=len(self._jobs))
        build = GaugeMetricFamily(*_named("build"), labels=["version"])
        build.add_metric([self._version], 1)
        yield build


def _cumulative(buckets: list[int], les: tuple[str, ...]) -> list[tuple[str, float]]:
    seen = 0
    pairs = []
    for le, count in zip(les, buckets, strict=True):
        seen += count
        pairs.append((le, float(seen)))
    return pairs


def _named(key: str) -> tuple[str, str]:
    name, _, text = FAMILIES[key]
    return name, text


def _family(key: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(*_named(key), labels=labels)


def _per_job(key: str, values: dict[str, float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(*_named(key), labels=["job_name"])
    for name, value in values.items():
        family.add_metric([name], value)
    return family
