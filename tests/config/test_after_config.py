"""A job's `after` (docs/workflows.md): what a good file gives, and every mistake located,
all at once: unknown jobs (did you mean), cycles named, `after` in defaults, `after` on a
job of `replicas: all`."""

from __future__ import annotations

from datetime import UTC, datetime

from crond.config import loader
from crond.config.fieldtypes import ChainOn
from tests.config.test_locks_config import problems


def test_after_a_job_or_a_map_of_ends() -> None:
    loaded = loader.loads(
        "jobs:\n"
        "  extract: {cron: '0 1 * * *', command: x}\n"
        "  load: {after: extract, command: x}\n"
        "  report: {after: {load: success, extract: failure}, cron: '0 9 * * *', command: x}\n"
        "  audit: {after: {extract: finished}, command: x}\n"
    )
    load, report = loaded.jobs["load"], loaded.jobs["report"]
    assert load.settings.after == {"extract": ChainOn.SUCCESS}
    assert report.settings.after == {"load": ChainOn.SUCCESS, "extract": ChainOn.FAILURE}
    assert load.schedule_text == "after extract succeeds"
    assert loaded.jobs["audit"].after_text == "after extract ends"
    assert load.make_timing().next_after(datetime.now(UTC)) is None  # chained only
    assert report.schedule_text.startswith("0 9 * * *")  # a schedule and after


def test_every_after_mistake_at_once_located() -> None:
    text = (
        "jobs:\n"
        "  extract: {cron: '0 1 * * *', command: x}\n"
        "  load: {after: extrct, command: x}\n"
        "  report: {after: {load: sometimes, nothing-like-it: success}, command: x}\n"
        "  a: {after: b, command: x}\n"
        "  b: {after: {c: finished}, command: x}\n"
        "  c: {after: a, command: x}\n"
        "  self: {after: self, every: 1m, command: x}\n"
        "  each: {after: extract, command: x, replicas: all}\n"
        "  none: {command: x}\n"
    )
    assert problems(text) == [
        's.yaml:3:17: jobs.load.after: "extrct" names no job (did you mean "extract"?)',
        's.yaml:4:26: jobs.report.after.load: "sometimes" is not one of success, failure, finished',
        's.yaml:4:37: jobs.report.after.nothing-like-it: "nothing-like-it" names no job '
        "(the file's jobs: extract, load, report, a, b, c, self, each, none)",
        "s.yaml:5:7: jobs.a.after: a cycle of after: a → c → b → a (a job would start itself)",
        "s.yaml:8:10: jobs.self.after: a cycle of after: self → self (a job would start itself)",
        "s.yaml:9:10: jobs.each.after: a chained run is one run for each end of its parent's "
        "run, claimed once by one replica: it cannot run on every replica (remove replicas: "
        "all)",
        "s.yaml:10:3: jobs.none: a schedule is missing: give cron, every or at "
        "(or after, to chain it)",
    ]


def test_after_is_no_default() -> None:
    assert problems("defaults: {after: x}\njobs:\n  x: {every: 1m, command: x}\n") == [
        "s.yaml:1:12: defaults.after: after cannot be a default: each job names its own parents"
    ]
