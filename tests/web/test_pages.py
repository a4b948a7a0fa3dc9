"""Pages whose browser does not matter, in this process (tests/web/inproc.py): the
schedule in words on the jobs page and a job's page, the failure streak on both, a run's
events beside its attempts."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from crond.clifile import load
from crond.store.base import AttemptRow
from crond.web.actions import Refused, _until
from crond.web.runevents import run_events
from crond.web.words import schedule_words
from tests.web.inproc import NOW, Pages, pages

JOBS = """\
  nightly:
    cron: "0 2 * * 1-5"
    command: "exit 3"
    retry: {attempts: 2, delay: 30s}
  quarter:
    cron: ["*/15 * * * *", "H 3 * * sat"]
    command: "true"
  hourly:
    every: 1h
    command: "true"
  load:
    after: nightly
    command: "true"
"""


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Pages]:
    yield from pages(tmp_path, JOBS)


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_the_schedule_in_words_on_the_jobs_page_and_the_job_page(site: Pages) -> None:
    jobs = " ".join(_text(site.get("/").text).split())
    assert "at 02:00, Monday to Friday" in jobs
    assert "every 15 minutes; and at " in jobs  # a cron list: each expression
    assert "every hour" in jobs
    assert "after nightly succeeds" in jobs
    job = " ".join(_text(site.get("/jobs/nightly").text).split())
    assert "0 2 * * 1-5 (UTC) (at 02:00, Monday to Friday)" in job


def test_the_failure_streak_on_the_jobs_page_as_on_the_job_page(site: Pages) -> None:
    at = NOW - timedelta(days=3)
    site.attempt("nightly", "r-ok", 1, at, "succeeded", exit_code=0)
    for i, outcome in enumerate(["failed", "timeout", "killed"]):
        site.attempt("nightly", f"r-{i}", 1, at + timedelta(hours=i + 1), outcome, exit_code=3)
    site.attempt("quarter", "q-1", 1, at, "failed", exit_code=1)
    site.attempt("quarter", "q-2", 1, at + timedelta(hours=1), "succeeded", exit_code=0)
    jobs = _text(site.get("/").text)
    assert re.search(r"nightly\s+failing\s+failed 3 in a row", jobs), jobs
    assert "failed 1 in a row" not in jobs  # quarter recovered
    assert "failed 3 times in a row" in _text(site.get("/jobs/nightly").text)
    # A fourth failure: read again, since the newest attempt changed.
    site.attempt("nightly", "r-4", 1, at + timedelta(hours=5), "failed", exit_code=3)
    assert re.search(r"nightly\s+failing\s+failed 4 in a row", _text(site.get("/").text))
    # A run going after them: the streak still said, as the job's page says it.
    site.attempt("nightly", "r-5", 1, at + timedelta(hours=6), None)
    assert re.search(r"nightly\s+\w+\s+failed 4 in a row", _text(site.get("/").text))
    assert "failed 4 times in a row" in _text(site.get("/jobs/nightly").text)


def test_a_runs_events_retries_and_the_retry_due(site: Pages) -> None:
    slot = NOW.replace(hour=2, minute=0)
    site.attempt("nightly", "run-a", 1, slot + timedelta(seconds=0.4), "timeout", seconds=60)
    site.attempt("nightly", "run-a", 2, slot + timedelta(seconds=90.4), "failed",
                 seconds=2, exit_code=3)  # fmt: skip
    page = " ".join(_text(site.get("/runs/run-a").text).split())
    said = page[page.index("Events") :]
    expected = [
        "02:00:00 UTC attempt 1 started, 0.4s after its slot",
        "02:01:00 UTC attempt 1 timed out (stopped by its timeout), after 1m",
        "02:01:30 UTC retry: attempt 2 started, 30.0s after attempt 1 ended",
        "02:01:32 UTC attempt 2 failed, exit code 3, after 2.0s",
        "02:02:32 UTC retry: attempt 3 of 3 due (the job's retry)",  # 30s doubled
    ]
    positions = [said.find(line) for line in expected]
    assert -1 not in positions, (positions, said)
    assert positions == sorted(positions)


def test_a_lost_attempt_and_its_late_end(site: Pages) -> None:
    """A replica cut off: its attempt closed lost, then its real end kept beside it."""
    started = NOW - timedelta(minutes=10)
    token = site.attempt("nightly", "run-l", 1, started, None)
    site.store.close_lost(NOW - timedelta(minutes=5))
    page = " ".join(_text(site.get("/runs/run-l").text).split())
    assert "attempt 1 closed lost: its daemon or replica stopped" in page
    assert "retry:" not in page  # a lost run is not retried
    del token


def test_the_words_of_whole_schedules(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "calendars:\n  shutdown: {dates: [2026-12-24]}\n"
        "  business: {weekdays: mon-fri, except: [shutdown]}\n"
        "jobs:\n"
        "  a: {cron: '0 9 * * *', command: x, days: business, nth_day: -1, roll: next}\n"
        "  b: {every: 90m, command: x, skip: shutdown, jitter: 10m}\n"
        "  c: {at: '2030-01-02T03:04:00+00:00', command: x}\n"
        "  d: {cron: '@reboot', command: x}\n"
        "  e: {cron: '0 * * * *', command: x, start: '2030-01-01T00:00:00+00:00', max_runs: 3}\n"
    )
    jobs = load(path, check_owner=False).jobs
    said = {name: schedule_words(job) for name, job in jobs.items()}
    assert said["a"] == (
        "at 09:00, every day; only on days of business; the last of those days each month; "
        "a fire on another day moves to the next day of business"
    )
    assert said["b"].startswith("every 1 hour 30 minutes; never on days of shutdown; each fire ")
    assert said["b"].endswith(" late (jitter up to 10m)")
    assert said["c"] == "once at 2030-01-02T03:04:00+00:00"
    assert said["d"] == "once when the daemon starts (each boot)"
    assert said["e"] == (
        "at minute 0 of every hour; from 2030-01-01T00:00:00+00:00; at most 3 runs"
    )


def test_a_late_end_is_told_beside_lost() -> None:
    """(PostgreSQL keeps late ends: a row as it reads one.)"""
    slot = NOW.replace(hour=2, minute=0)
    lost = AttemptRow(
        1, "run-x", "nightly", slot, 1, slot, slot + timedelta(minutes=1), "lost", None, None,
        [], replica="r2", late_finished=slot + timedelta(minutes=3), late_outcome="succeeded",
        late_exit_code=0,
    )  # fmt: skip
    said = [(e.kind, e.text) for e in run_events([lost], None)]
    assert said == [
        ("started", "attempt 1 started on r2, 0.0s after its slot"),
        ("lost", "attempt 1 closed lost: its daemon or replica stopped while it ran, no end "
                 "was recorded"),
        ("late", "attempt 1 ended late, after it was closed lost: succeeded, exit code 0 "
                 "(kept beside lost)"),
    ]  # fmt: skip


TIMELINE_JOBS = """\
  backup:
    cron: "0 2 * * *"
    timezone: Europe/Berlin
    command: "true"
  vacuum:
    cron: "0 2 * * *"
    timezone: Europe/Berlin
    command: "true"
  rotate:
    cron: "5 2 * * *"
    timezone: Europe/Berlin
    command: "true"
  report:
    cron: "0 6 * * *"
    command: "true"
"""


def _rows(page: str) -> list[str]:
    body = page[page.index("<tbody>", page.index("Busiest")) :]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    return [" ".join(_text(r).split()).replace(" ,", ",") for r in rows]


def test_the_timeline_in_the_zone_most_jobs_use_with_utc_beside(tmp_path: Path) -> None:
    for site in pages(tmp_path, TIMELINE_JOBS):
        page = site.get("/timeline").text
        assert '<option value="Europe/Berlin" selected>' in page  # 3 jobs of 4
        assert _rows(page)[:2] == [
            "2026-12-04 02:00 CET 01:00 3 backup, vacuum, rotate",
            "2026-12-04 07:00 CET 06:00 1 report",
        ]
        assert "<title>02:00 CET (01:00 UTC): 3 fires</title>" in page
        utc = site.get("/timeline?zone=UTC").text
        assert _rows(utc)[:2] == [
            "2026-12-04 01:00 UTC 3 backup, vacuum, rotate",
            "2026-12-04 06:00 UTC 1 report",
        ]
        # A zone the file does not use is not a choice: the default instead.
        other = site.get("/timeline?zone=Asia/Tokyo").text
        assert '<option value="Europe/Berlin" selected>' in other
        assert "Asia/Tokyo" not in other


def test_the_timeline_marks_a_change_of_the_clocks(tmp_path: Path) -> None:
    for site in pages(tmp_path, TIMELINE_JOBS):
        site.clock.set(datetime(2026, 10, 24, 12, 0, tzinfo=UTC))  # Berlin: back an hour
        page = site.get("/timeline").text
        said = " ".join(_text(page).split())
        assert "The clocks of Europe/Berlin change at 2026-10-25 02:00 CET (UTC+0100)" in said
        # 02:00 comes twice that night; the jobs fire at the first (summer time).
        assert _rows(page)[:2] == [
            "2026-10-25 02:00 CEST 00:00 3 backup, vacuum, rotate",
            "2026-10-25 07:00 CET 06:00 1 report",
        ]


def test_a_pause_until_an_instant_past_or_too_far_says_which_and_what_to_give() -> None:
    """The dashboard's pause form refuses as `crond pause` does: the instant named, and
    now, and what to give instead."""
    now = datetime(2026, 12, 4, 15, 20, 3, 500000, tzinfo=UTC)
    with pytest.raises(Refused) as past:
        _until("", "2026-12-04T10:00", now)
    assert str(past.value) == (
        "2026-12-04T10:00:00Z has passed (now 2026-12-04T15:20:03Z): "
        "give a later instant, or a duration"
    )
    with pytest.raises(Refused, match="2300-01-01T00:00:00Z is too far"):
        _until("", "2300-01-01T00:00", now)
    assert _until("", "2026-12-04T16:00Z", now) == datetime(2026, 12, 4, 16, tzinfo=UTC)
