"""crond.notify.metrics' GET /metrics: the page it answers is the render's, reused for a
moment, and a big one is written in slices that let the loop run (crond/notify/page.py)."""

from __future__ import annotations

import asyncio
import statistics
import time

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from crond.notify.metrics import OUTCOMES, Metrics
from tests.notify.test_metrics import Live, config, make


async def scrape(metrics: Metrics) -> bytes:
    """What crond.notify.http sends as the body of GET /metrics."""
    answer = metrics.route()
    status, content_type, body = answer if isinstance(answer, tuple) else await answer
    assert (status, content_type) == (200, CONTENT_TYPE_LATEST)
    return body if isinstance(body, bytes) else b"".join(body)


async def test_route() -> None:
    metrics = make("alpha")
    assert await scrape(metrics) == metrics.render()


async def test_route_reuses_a_page_begun_moments_ago() -> None:
    live = Live()
    reusing = Metrics("1", live, reuse_s=60)
    fresh = Metrics("1", live, reuse_s=0)
    for metrics in (reusing, fresh):
        metrics.set_jobs(config("alpha").jobs)
        await scrape(metrics)
        metrics.missed("alpha", 1)
    assert isinstance(reusing.route(), tuple)  # at once, without a render
    assert b'crond_job_missed_total{job_name="alpha"} 0.0' in await scrape(reusing)
    assert b'crond_job_missed_total{job_name="alpha"} 1.0' in await scrape(fresh)
    assert b'crond_job_missed_total{job_name="alpha"} 1.0' in reusing.render()


def many(count: int) -> Metrics:
    names = [f"nightly-job-{i:05d}" for i in range(count)]
    live = [(name, i % 2, 1_780_000_000.0 + 60 * i) for i, name in enumerate(names)]
    metrics = Metrics("1", lambda: live, reuse_s=0)
    one = config("j").jobs["j"]
    metrics.set_jobs(dict.fromkeys(names, one))
    for i, name in enumerate(names):
        metrics.run_finished(name, OUTCOMES[i % 4], 0.3 * (i % 9), 1_780_000_000.0 + i)
    return metrics


async def test_a_big_scrape_lets_the_loop_run_and_scrapes_together_share_it() -> None:
    """10,000 jobs: ~0.3 s of work, written in slices; a ticker that wants the loop
    every millisecond gets it between them (a machine this loaded may keep the whole
    process waiting now and then: the typical wait is what is checked)."""
    metrics = many(10_000)
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    first, second = metrics.route(), metrics.route()  # together: one render
    assert not isinstance(first, tuple)
    assert not isinstance(second, tuple)
    gaps.clear()
    answers = await asyncio.gather(first, second)
    done.set()
    await ticker
    assert len(gaps) >= 20, f"the loop had {len(gaps)} turns in the render"
    assert statistics.median(gaps) < 0.02, f"median wait {statistics.median(gaps) * 1000:.0f} ms"
    body = answers[0][2]
    assert body is answers[1][2]
    assert isinstance(body, list)
    assert len(body) > 10  # it was sliced
    assert b"".join(body) == metrics.render()
