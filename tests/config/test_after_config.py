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


def test_after_written_as_a_list_is_told_the_map() -> None:
    """docs/configuration.md: `after` is not a list. A list of one parent is told to name
    it alone, of several the map of their ends, in the file's own names; a list the
    message cannot write back (here: a mapping in it) gets the docs' names."""
    head = "jobs:\n  extract: {cron: '0 1 * * *', command: x}\n  clean: {every: 1h, command: x}\n"
    text = head + (
        "  load: {after: [extract], command: x}\n"
        "  both:\n"
        "    after:\n"
        "      - extract\n"
        "      - clean\n"
        "    command: x\n"
        "  odd: {after: [{extract: success}], command: x}\n"
        "  num: {after: 3, command: x}\n"
    )
    assert problems(text) == [
        "s.yaml:4:17: jobs.load.after: a list is not a job's name or a map of jobs to ends: "
        "write one parent as after: extract, several as a map, after: {extract: success, "
        "clean: success} (each parent's end starts a run of its own)",
        "s.yaml:7:7: jobs.both.after: a list is not a job's name or a map of jobs to ends: "
        "write several parents as a map, after: {extract: success, clean: success} (each "
        "parent's end starts a run of its own, not one after all of them)",
        "s.yaml:10:16: jobs.odd.after: a list is not a job's name or a map of jobs to ends: "
        "write one parent as after: extract, several as a map, after: {extract: success, "
        "clean: success} (each parent's end starts a run of its own)",
        "s.yaml:11:16: jobs.num.after: 3 is not a job's name or a map of jobs to ends: "
        "write one parent as after: extract, several as a map, after: {extract: success, "
        "clean: success} (each parent's end starts a run of its own)",
    ]


def test_an_end_misspelt_or_left_out() -> None:
    """A misspelt end gets the one meant; `after: {extract, clean}` (YAML: ends of null)
    and `{extract: true}` are told what an end is, each at its value."""
    head = "jobs:\n  extract: {cron: '0 1 * * *', command: x}\n  clean: {every: 1h, command: x}\n"
    text = head + (
        "  load: {after: {extract: succes}, command: x}\n"
        "  set: {after: {extract, clean}, command: x}\n"
        "  yes: {after: {extract: true}, command: x}\n"
    )
    told = (
        "write success, failure (failed, timeout or killed) or finished (any end) after the "
        "parent's name, e.g. after: {extract: success}"
    )
    assert problems(text) == [
        's.yaml:4:27: jobs.load.after.extract: "succes" is not one of success, failure, '
        'finished (did you mean "success"?)',
        f"s.yaml:5:17: jobs.set.after.extract: no end is given: {told}",
        f"s.yaml:5:26: jobs.set.after.clean: no end is given: {told}",
        f"s.yaml:6:26: jobs.yes.after.extract: true is not an end: {told}",
    ]
