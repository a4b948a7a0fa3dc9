"""crond.notify.metrics: the page a scrape gets, read back with prometheus-client's own
parser, and compared byte for byte with what prometheus-client renders of the same
numbers (Metrics is also a Collector)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from crond.config import loader
from crond.config.loaded import LoadedConfig, LoadedJob
from crond.notify.metrics import (
    DURATION_BUCKETS,
    LAG_BUCKETS,
    OUTCOMES,
    SKIP_REASONS,
    Metrics,
)
from crond.run.attempt import Outcome

Labels = tuple[tuple[str, str], ...]
Samples = dict[tuple[str, Labels], float]

PER_JOB = {
    "crond_job_runs_total": "counter",
    "crond_job_duration_seconds": "histogram",
    "crond_job_last_run_timestamp_seconds": "gauge",
    "crond_job_last_success_timestamp_seconds": "gauge",
    "crond_job_next_fire_timestamp_seconds": "gauge",
    "crond_job_running": "gauge",
    "crond_job_missed_total": "counter",
    "crond_job_skipped_total": "counter",
    "crond_job_paused": "gauge",
}


def config(*names: str, notifiers: Iterable[str] = ()) -> LoadedConfig:
    jobs = "".join(f"  {name}:\n    every: 1h\n    command: 'true'\n" for name in names)
    told = "".join(
        f"  {quoted(name)}:\n    webhook: https://example.com/hook\n" for name in notifiers
    )
    return loader.loads(f"notifiers:\n{told}jobs:\n{jobs}" if told else f"jobs:\n{jobs}")


def quoted(name: str) -> str:
    """`name` as a YAML double-quoted scalar."""
    inner = name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{inner}"'


class Live:
    """What the daemon's loop would say at a scrape; the test sets it."""

    def __init__(self) -> None:
        self.now: list[tuple[str, int, float | None]] = []

    def __call__(self) -> list[tuple[str, int, float | None]]:
        return self.now


def make(*names: str, live: Live | None = None) -> Metrics:
    metrics = Metrics("1.2.3", live or Live())
    metrics.set_jobs(config(*names).jobs)
    return metrics


def samples(metrics: Metrics) -> Samples:
    """Every sample of a render, parsed by prometheus-client: (name, labels) -> value.
    Also checks the page is what prometheus-client itself renders of the same numbers."""
    page = metrics.render()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    assert page == generate_latest(registry)
    found: Samples = {}
    for family in text_string_to_metric_families(page.decode()):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in found, key
            found[key] = sample.value
    return found


def types(metrics: Metrics) -> dict[str, str]:
    return {
        f.name + ("_total" if f.type == "counter" else ""): f.type
        for f in text_string_to_metric_families(metrics.render().decode())
    }


def job(name: str, **labels: str) -> Labels:
    return tuple(sorted({"job_name": name, **labels}.items()))


def bucket(found: Samples, le: float, labels: Labels = (), metric: str = "duration") -> float:
    """The cumulative count of a histogram's bucket `le`."""
    family = f"crond_job_{metric}_seconds" if metric == "duration" else f"crond_{metric}_seconds"
    text = "+Inf" if le == math.inf else repr(float(le))
    return found[(f"{family}_bucket", tuple(sorted((*labels, ("le", text)))))]


def test_every_series_is_there_at_zero_from_the_first_render() -> None:
    metrics = make("alpha", "beta")
    metrics.set_notifiers(["pager"])
    found = samples(metrics)
    for name in ("alpha", "beta"):
        for outcome in OUTCOMES:
            assert found[("crond_job_runs_total", job(name, outcome=outcome))] == 0
        for reason in SKIP_REASONS:
            assert found[("crond_job_skipped_total", job(name, reason=reason))] == 0
        for gauge in (
            "crond_job_last_run_timestamp_seconds",
            "crond_job_last_success_timestamp_seconds",
            "crond_job_next_fire_timestamp_seconds",
            "crond_job_running",
            "crond_job_missed_total",
            "crond_job_paused",
        ):
            assert found[(gauge, job(name))] == 0
        for le in (*DURATION_BUCKETS, math.inf):
            assert bucket(found, le, job(name)) == 0
        assert found[("crond_job_duration_seconds_count", job(name))] == 0
        assert found[("crond_job_duration_seconds_sum", job(name))] == 0
    for le in (*LAG_BUCKETS, math.inf):
        assert bucket(found, le, metric="start_lag") == 0
    for notifier in ("pager", "ping"):
        for result in ("sent", "failed"):
            labels = (("notifier", notifier), ("result", result))
            assert found[("crond_notifications_total", labels)] == 0
    assert found[("crond_config_last_reload_successful", ())] == 0
    assert found[("crond_config_last_reload_timestamp_seconds", ())] == 0
    assert found[("crond_jobs", ())] == 2
    assert found[("crond_build_info", (("version", "1.2.3"),))] == 1
    # 2 jobs x (4 outcomes + duration + 6 single + 4 reasons) + lag + 2 reload + 2
    # notifiers x 2 results + jobs + build info (a histogram: its bounds, +Inf, _count,
    # _sum): nothing else.
    duration, lag = len(DURATION_BUCKETS) + 3, len(LAG_BUCKETS) + 3
    assert (duration, lag) == (17, 18)
    assert len(found) == 2 * (4 + duration + 6 + 4) + lag + 2 + 4 + 2


def test_family_types_and_the_job_label() -> None:
    found = types(make("alpha"))
    for name, kind in PER_JOB.items():
        assert found[name] == kind
    assert found["crond_start_lag_seconds"] == "histogram"
    assert found["crond_notifications_total"] == "counter"
    page = make("alpha").render().decode()
    assert 'job="' not in page  # `job` is Prometheus's own label


def test_runs_are_counted_by_outcome_with_their_durations_and_times() -> None:
    metrics = make("alpha", "beta")
    metrics.run_finished("alpha", Outcome.SUCCESS, 0.05, 1000.0)
    metrics.run_finished("alpha", "failed", 4.0, 2000.0)
    metrics.run_finished("alpha", Outcome.TIMEOUT, 4000.0, 3000.5)
    metrics.run_finished("alpha", "success", 1.0, 4000.25)
    metrics.run_finished("alpha", "killed", 99999.0, 5000.0)
    metrics.run_finished("beta", "failed", 0.1, 6000.0)
    found = samples(metrics)
    runs = {o: found[("crond_job_runs_total", job("alpha", outcome=o))] for o in OUTCOMES}
    assert runs == {"success": 2, "failed": 1, "timeout": 1, "killed": 1}
    assert found[("crond_job_last_run_timestamp_seconds", job("alpha"))] == 5000.0
    assert found[("crond_job_last_success_timestamp_seconds", job("alpha"))] == 4000.25
    assert found[("crond_job_last_success_timestamp_seconds", job("beta"))] == 0
    assert found[("crond_job_runs_total", job("beta", outcome="failed"))] == 1
    # Cumulative buckets: 0.05 in le=0.1; 1.0 in le=1 (an upper bound is inclusive);
    # 4 in le=5; 4000 in le=7200; 99999 only in +Inf.
    alpha = job("alpha")
    expected = {0.1: 1, 0.5: 1, 1: 2, 2.5: 2, 5: 3, 3600: 3, 7200: 4, 21600: 4, math.inf: 5}
    for le, count in expected.items():
        assert bucket(found, le, alpha) == count, le
    assert found[("crond_job_duration_seconds_count", alpha)] == 5
    assert found[("crond_job_duration_seconds_sum", alpha)] == pytest.approx(104004.05)
    assert bucket(found, 0.1, job("beta")) == 1  # exactly on a bound


def test_start_lag_missed_skipped_and_paused() -> None:
    metrics = make("alpha")
    for lag in (0.0004, 0.001, 0.003, 0.2, 45.0, 120.0):
        metrics.run_started("alpha", lag)
    metrics.missed("alpha", 3)
    metrics.missed("alpha", 2)
    metrics.skipped("alpha", "overlap")
    metrics.skipped("alpha", "overlap")
    metrics.skipped("alpha", "max_running")
    metrics.set_paused("alpha", True)
    found = samples(metrics)
    expected = {0.001: 2, 0.0025: 2, 0.005: 3, 0.1: 3, 0.25: 4, 30: 4, 60: 5, math.inf: 6}
    for le, count in expected.items():
        assert bucket(found, le, metric="start_lag") == count, le
    assert found[("crond_start_lag_seconds_count", ())] == 6
    assert found[("crond_start_lag_seconds_sum", ())] == pytest.approx(165.2044)
    assert found[("crond_job_missed_total", job("alpha"))] == 5
    skips = {r: found[("crond_job_skipped_total", job("alpha", reason=r))] for r in SKIP_REASONS}
    assert skips == {"overlap": 2, "paused": 0, "max_running": 1, "lock": 0}
    assert found[("crond_job_paused", job("alpha"))] == 1
    metrics.set_paused("alpha", False)
    assert samples(metrics)[("crond_job_paused", job("alpha"))] == 0


def test_a_reload_drops_removed_jobs_adds_new_ones_at_zero_and_keeps_the_rest() -> None:
    metrics = make("kept", "gone")
    for name in ("kept", "gone"):
        metrics.run_finished(name, "success", 2.0, 100.0)
        metrics.missed(name, 1)
        metrics.set_paused(name, True)
    metrics.set_jobs(config("new", "kept").jobs)
    found = samples(metrics)
    assert not [key for key in found if ("job_name", "gone") in key[1]]
    assert found[("crond_job_runs_total", job("kept", outcome="success"))] == 1
    assert found[("crond_job_missed_total", job("kept"))] == 1
    assert found[("crond_job_paused", job("kept"))] == 1
    assert found[("crond_job_last_run_timestamp_seconds", job("kept"))] == 100.0
    assert found[("crond_job_runs_total", job("new", outcome="success"))] == 0
    assert found[("crond_job_duration_seconds_count", job("new"))] == 0
    assert found[("crond_jobs", ())] == 2
    # The page follows the file's order.
    page = metrics.render().decode()
    assert page.index('job_name="new"') < page.index('job_name="kept"')


def test_updates_for_jobs_not_configured_are_ignored() -> None:
    metrics = make("alpha")
    before = metrics.render()
    metrics.set_jobs(config("alpha").jobs)  # the same file again: nothing changes
    assert metrics.render() == before
    metrics.run_started("removed", 0.5)
    metrics.run_finished("removed", "success", 1.0, 10.0)
    metrics.missed("removed", 4)
    metrics.skipped("removed", "overlap")
    metrics.set_paused("removed", True)
    metrics.notification("not-a-notifier", "sent")
    assert metrics.render() == before


def test_next_fire_and_running_are_read_from_live_at_each_scrape() -> None:
    live = Live()
    metrics = make("alpha", "beta", "gamma", live=live)
    live.now = [("alpha", 2, 1_780_000_000.5), ("beta", 0, None), ("removed", 5, 1.0)]
    found = samples(metrics)
    assert found[("crond_job_running", job("alpha"))] == 2
    assert found[("crond_job_next_fire_timestamp_seconds", job("alpha"))] == 1_780_000_000.5
    assert found[("crond_job_next_fire_timestamp_seconds", job("beta"))] == 0
    assert found[("crond_job_running", job("gamma"))] == 0  # not in live: 0
    assert not [key for key in found if ("job_name", "removed") in key[1]]
    live.now = [("alpha", 0, 1_780_003_600.0)]
    found = samples(metrics)
    assert found[("crond_job_running", job("alpha"))] == 0
    assert found[("crond_job_next_fire_timestamp_seconds", job("alpha"))] == 1_780_003_600.0


def test_notifications_per_notifier_and_ping() -> None:
    metrics = make("alpha")
    metrics.set_notifiers(config("alpha", notifiers=["slack", "pager"]).config.notifiers)
    metrics.notification("slack", "sent")
    metrics.notification("slack", "sent")
    metrics.notification("slack", "failed")
    metrics.notification("ping", "failed")
    found = samples(metrics)

    def told(notifier: str, result: str) -> float:
        return found[("crond_notifications_total", (("notifier", notifier), ("result", result)))]

    assert (told("slack", "sent"), told("slack", "failed")) == (2, 1)
    assert (told("pager", "sent"), told("pager", "failed")) == (0, 0)
    assert (told("ping", "sent"), told("ping", "failed")) == (0, 1)
    metrics.set_notifiers(["slack"])  # pager removed at a reload: gone; slack kept
    found = samples(metrics)
    assert told("slack", "sent") == 2
    assert told("ping", "failed") == 1
    assert not [key for key in found if ("notifier", "pager") in key[1]]


def test_reload_gauges() -> None:
    metrics = make("alpha")
    metrics.reloaded(True, 1_780_000_000.0)
    found = samples(metrics)
    assert found[("crond_config_last_reload_successful", ())] == 1
    assert found[("crond_config_last_reload_timestamp_seconds", ())] == 1_780_000_000.0
    metrics.reloaded(False, 1_780_000_100.0)
    found = samples(metrics)
    assert found[("crond_config_last_reload_successful", ())] == 0
    assert found[("crond_config_last_reload_timestamp_seconds", ())] == 1_780_000_100.0


def test_label_values_are_escaped() -> None:
    # The loader restricts job and notifier names; the page stays valid for any name it
    # is given (quotes, backslashes, newlines, other scripts), and so does the version.
    odd = ['say "hi"', "back\\slash", "two\nlines", "trailing\\", "ünïcødé ✓", "a}b{c=d,"]
    loaded = config("alpha")
    metrics = Metrics('1.0 "dev"\n\\', Live())
    metrics.set_jobs(loaded.jobs)
    metrics.set_notifiers(odd)
    for name in odd:
        metrics.notification(name, "sent")
    found = samples(metrics)
    for name in odd:
        assert found[("crond_notifications_total", (("notifier", name), ("result", "sent")))] == 1
    assert found[("crond_build_info", (("version", '1.0 "dev"\n\\'),))] == 1
    page = metrics.render().decode()
    assert 'notifier="say \\"hi\\""' in page
    assert 'notifier="two\\nlines"' in page
    assert 'notifier="trailing\\\\"' in page


def test_any_job_name_renders_safely() -> None:
    # Only the mapping's names are read: a name the loader would refuse still renders.
    some_job: LoadedJob = config("alpha").jobs["alpha"]
    metrics = Metrics("1", Live())
    metrics.set_jobs({'a"b': some_job, "c\\d\ne": some_job})
    metrics.run_finished("c\\d\ne", "success", 1.0, 5.0)
    found = samples(metrics)
    assert found[("crond_job_runs_total", job("c\\d\ne", outcome="success"))] == 1
    assert found[("crond_job_runs_total", job('a"b', outcome="success"))] == 0


def test_large_values_and_odd_inputs_keep_the_page_valid() -> None:
    metrics = make("alpha", "beta")
    metrics.missed("beta", 999_999)  # the last count written without an exponent
    assert samples(metrics)[("crond_job_missed_total", job("beta"))] == 999_999
    metrics.missed("beta", 1)
    assert samples(metrics)[("crond_job_missed_total", job("beta"))] == 1_000_000
    for _ in range(3):
        metrics.run_finished("alpha", "success", -1.0, 1_780_000_000.123)  # a clock step
    metrics.run_finished("alpha", "success", math.nan, 1.0)
    metrics.run_started("alpha", -0.5)
    metrics.missed("alpha", 12_345_678)
    found = samples(metrics)
    assert found[("crond_job_missed_total", job("alpha"))] == 12_345_678
    assert bucket(found, 0.1, job("alpha")) == 4  # negative and NaN count as 0 s
    assert found[("crond_job_duration_seconds_sum", job("alpha"))] == 0
    assert found[("crond_start_lag_seconds_sum", ())] == 0
