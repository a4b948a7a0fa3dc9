"""The lock series of the metrics page (docs/workflows.md): each lock of the file with
its capacity, its holders and the runs waiting for it, written as prometheus-client
writes them."""

from __future__ import annotations

from crond.notify.metrics import Metrics
from tests.notify.test_metrics import Live, config, samples


def test_each_lock_has_its_capacity_holders_and_waiting_runs() -> None:
    locks = [("db-heavy", 1, 1, 2), ("gpu", 2, 0, 0)]
    metrics = Metrics("1.2.3", Live(), locks=lambda: locks)
    metrics.set_jobs(config("alpha").jobs)
    found = samples(metrics)  # (and the same page as prometheus-client's)
    got = {
        (name, dict(labels)["lock"]): value
        for (name, labels), value in found.items()
        if name.startswith("crond_lock_")
    }
    assert got == {
        ("crond_lock_capacity", "db-heavy"): 1,
        ("crond_lock_held", "db-heavy"): 1,
        ("crond_lock_waiting", "db-heavy"): 2,
        ("crond_lock_capacity", "gpu"): 2,
        ("crond_lock_held", "gpu"): 0,
        ("crond_lock_waiting", "gpu"): 0,
    }
    assert found[("crond_job_skipped_total", (("job_name", "alpha"), ("reason", "lock")))] == 0
