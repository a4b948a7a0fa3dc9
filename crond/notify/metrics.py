"""The daemon's Prometheus metrics: kept as plain numbers, rendered at each scrape.

The daemon's loop calls the update methods synchronously for every run of every job
(thousands a second in a big file), so each is a dict lookup and a few number updates;
nothing is formatted until a scrape asks. Updates for a job that is not (or no longer)
configured are ignored: a run of a job removed at a reload may end after it.

A scrape is rendered here, in the Prometheus text format, rather than by
prometheus-client's `generate_latest`: that formats every sample through several calls
and took ~150 ms for 1,000 jobs (30,000 samples), and a scrape is served from the
daemon's own loop, which it stalls meanwhile. `Metrics` is also a prometheus-client
Collector (`collect`), so it can be registered in a private CollectorRegistry; the tests
check that `render()` is byte for byte what `generate_latest` makes of that registry.
How the format writes numbers, label values and histograms is exposition.py's.

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

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from crond.clock import Clock, SystemClock
from crond.notify.exposition import escaped, go_float, histogram, label_value, number, whole

if TYPE_CHECKING:
    from crond.config.loaded import LoadedJob

# (job_name, runs running now, next fire as epoch seconds or None), read at each scrape.
Live = Callable[[], Iterable[tuple[str, int, float | None]]]

REUSE_S = 1.0  # route() answers the same page for this long (Prometheus scrapes every 15 s+)
OUTCOMES = ("success", "failed", "timeout", "killed")  # crond.run.attempt.Outcome
SKIP_REASONS = ("overlap", "paused", "max_running")
RESULTS = ("sent", "failed")
PING = "ping"  # the notifier name under which a job's `ping` deliveries are counted

DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

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
    "jobs": ("crond_jobs", "gauge", "Jobs in the schedules file."),
    "build": ("crond_build_info", "gauge", "crond's version (the value is always 1)."),
}


class _Job:
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


class Metrics:
    """The daemon's metrics. Updated and rendered from the daemon's loop thread only (no
    locks). `live` is read at each scrape for what the loop knows now: the runs going on
    and each job's next fire."""

    def __init__(
        self, version: str, live: Live, *, reuse_s: float = REUSE_S, clock: Clock | None = None
    ) -> None:
        self._version = version
        self._clock: Clock = clock or SystemClock()  # its monotonic seconds: route()'s reuse
        self._live = live
        self._reuse_s = reuse_s
        self._page: tuple[float, bytes] | None = None  # (monotonic time, page) of route()
        self._jobs: dict[str, _Job] = {}
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
        self._jobs = {name: old.get(name) or _Job(name) for name in jobs}

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

    def route(self) -> tuple[int, str, bytes]:
        """GET /metrics, for crond.notify.http: `render()`, or the page it rendered less
        than `reuse_s` ago. Scrapes that come together (Prometheus replicas, or a client
        hammering the port) cost one render between them: a render of 10,000 jobs holds
        the loop a quarter of a second, and each connection would otherwise hold a page
        of its own (20 MB) while it is sent."""
        now = self._clock.monotonic()
        if self._page is None or not 0 <= now - self._page[0] < self._reuse_s:
            self._page = (now, self.render())
        return 200, CONTENT_TYPE_LATEST, self._page[1]

    def render(self) -> bytes:
        """The whole page in the Prometheus text format."""
        jobs = self._jobs.values()
        running, next_fire = self._read_live()
        out: list[str] = []
        self._head(out, "runs")
        for job in jobs:
            prefix = f"crond_job_runs_total{{{job.label},outcome="
            for outcome, count in job.runs.items():
                out.append(f'{prefix}"{escaped(outcome)}"}} {whole(count)}\n')
        self._head(out, "duration")
        for job in jobs:
            histogram(out, "crond_job_duration_seconds", job.label, job.buckets,
                      job.duration_sum, les=_DURATION_LE)  # fmt: skip
        self._gauges(out, "last_run", ((job.label, job.last_run) for job in jobs))
        self._gauges(out, "last_success", ((job.label, job.last_success) for job in jobs))
        self._gauges(out, "next_fire", ((job.label, next_fire.get(job.name, 0)) for job in jobs))
        self._gauges(out, "running", ((job.label, running.get(job.name, 0)) for job in jobs))
        self._head(out, "missed")
        out.extend(f"crond_job_missed_total{{{job.label}}} {whole(job.missed)}\n" for job in jobs)
        self._head(out, "skipped")
        for job in jobs:
            prefix = f"crond_job_skipped_total{{{job.label},reason="
            for reason, count in job.skipped.items():
                out.append(f'{prefix}"{escaped(reason)}"}} {whole(count)}\n')
        self._gauges(out, "paused", ((job.label, float(job.paused)) for job in jobs))
        self._head(out, "lag")
        histogram(out, "crond_start_lag_seconds", "", self._lag_buckets, self._lag_sum, les=_LAG_LE)
        self._gauges(out, "reload_ok", [("", float(self._reload_ok))])
        self._gauges(out, "reload_at", [("", self._reload_at)])
        self._head(out, "notifications")
        for notifier, counts in self._notifications.items():
            prefix = f'crond_notifications_total{{notifier="{label_value(notifier)}",result='
            for result, count in counts.items():
                out.append(f'{prefix}"{escaped(result)}"}} {whole(count)}\n')
        self._gauges(out, "jobs", [("", len(self._jobs))])
        self._gauges(out, "build", [(f'version="{label_value(self._version)}"', 1)])
        return "".join(out).encode()

    def _read_live(self) -> tuple[dict[str, int], dict[str, float]]:
        running: dict[str, int] = {}
        next_fire: dict[str, float] = {}
        for name, count, fire in self._live():
            running[name] = count
            if fire is not None:
                next_fire[name] = fire
        return running, next_fire

    @staticmethod
    def _head(out: list[str], key: str) -> None:
        name, kind, text = FAMILIES[key]
        if kind == "counter":
            name += "_total"
        out.append(f"# HELP {name} {text}\n# TYPE {name} {kind}\n")

    @classmethod
    def _gauges(cls, out: list[str], key: str, values: Iterable[tuple[str, float]]) -> None:
        """A gauge family: one sample per (label pairs, value); "" is no labels."""
        cls._head(out, key)
        name = FAMILIES[key][0]
        for labels, value in values:
            pairs = f"{{{labels}}}" if labels else ""
            out.append(f"{name}{pairs} {number(value)}\n")

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
            buckets = _cumulative(job.buckets, _DURATION_LE)
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
        lag.add_metric([], _cumulative(self._lag_buckets, _LAG_LE), self._lag_sum)
        yield lag
        yield GaugeMetricFamily(*_named("reload_ok"), value=float(self._reload_ok))
        yield GaugeMetricFamily(*_named("reload_at"), value=self._reload_at)
        notifications = _family("notifications", ["notifier", "result"])
        for notifier, counts in self._notifications.items():
            for result, count in counts.items():
                notifications.add_metric([notifier, result], count)
        yield notifications
        yield GaugeMetricFamily(*_named("jobs"), value=len(self._jobs))
        build = GaugeMetricFamily(*_named("build"), labels=["version"])
        build.add_metric([self._version], 1)
        yield build


_DURATION_LE = (*(go_float(b) for b in DURATION_BUCKETS), "+Inf")
_LAG_LE = (*(go_float(b) for b in LAG_BUCKETS), "+Inf")


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
