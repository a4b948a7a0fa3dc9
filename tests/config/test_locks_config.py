"""`locks:` and a job's `locks`/`on_lock` (docs/workflows.md): what a good file gives,
and every mistake located, all at once."""

from __future__ import annotations

import pytest

from crond.config import loader
from crond.config.model import OnLock
from crond.config.problems import ConfigError


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        loader.loads(text, "s.yaml")
    return [str(p) for p in caught.value.problems]


def test_locks_and_their_jobs() -> None:
    loaded = loader.loads(
        "locks: {db-heavy: 1, gpu: 2}\n"
        "defaults: {on_lock: skip}\n"
        "jobs:\n"
        "  a: {every: 1m, command: x, locks: [db-heavy, gpu, gpu]}\n"
        "  b: {every: 1m, command: x, on_lock: wait}\n"
    )
    assert loaded.config.locks == {"db-heavy": 1, "gpu": 2}
    a, b = loaded.jobs["a"].settings, loaded.jobs["b"].settings
    assert a.locks == ["db-heavy", "gpu"]  # a lock written twice is one place
    assert (a.on_lock, b.on_lock, b.locks) == (OnLock.SKIP, OnLock.WAIT, None)


def test_every_lock_mistake_at_once_located() -> None:
    text = (
        "locks:\n"
        "  db-heavy: 0\n"
        "  gpu: two\n"
        "  'bad name': 1\n"
        "defaults: {locks: [gpux]}\n"
        "jobs:\n"
        "  a: {every: 1m, command: x, locks: [db-hevy]}\n"
        "  b: {every: 1m, command: x, locks: [nothing-like-it], on_lock: later}\n"
        "  c: {every: 1m, command: x, locks: [gpu], overlap: replace}\n"
    )
    assert problems(text) == [
        "s.yaml:2:13: locks.db-heavy: 0 is out of range (must be at least 1)",
        's.yaml:3:8: locks.gpu: "two" is not a whole number',
        's.yaml:4:3: locks.bad name: "bad name" is not a valid lock name (letters, digits, '
        '"_", "." and "-", starting with a letter or digit, at most 64 characters)',
        's.yaml:5:20: defaults.locks.0: "gpux" names no lock (did you mean "gpu"?)',
        's.yaml:7:38: jobs.a.locks.0: "db-hevy" names no lock (did you mean "db-heavy"?)',
        's.yaml:8:38: jobs.b.locks.0: "nothing-like-it" names no lock (the file\'s locks: '
        "db-heavy, gpu, bad name)",
        's.yaml:8:65: jobs.b.on_lock: "later" is not one of wait, skip',
        "s.yaml:9:30: jobs.c.locks: locks and overlap: replace do not go together (a "
        "replacement would take the place of a run that holds its locks): use overlap: "
        "skip or allow",
    ]


def test_a_lock_without_a_locks_section() -> None:
    assert problems("jobs:\n  a: {every: 1m, command: x, locks: [db]}\n") == [
        's.yaml:2:38: jobs.a.locks.0: "db" names no lock (the file has none: define it '
        "under the top-level locks:)"
    ]


def test_locks_with_a_database_are_held_in_it_and_so_accepted() -> None:
    """docs/workflows.md, "With replicas": the database holds the locks, so a file whose
    daemons share one may use them (through the file or CROND_DATABASE_URL)."""
    text = (
        "daemon: {database: 'postgresql://crond@db/crond'}\n"
        "locks: {db: 1}\n"
        "jobs:\n"
        "  a: {every: 1m, command: x, locks: [db]}\n"
        "  b: {every: 1m, command: x}\n"
    )
    cfg = loader.loads(text, "s.yaml")
    assert cfg.jobs["a"].settings.locks == ["db"]
    env = {"CROND_DATABASE_URL": "postgresql://crond@db/crond"}
    without = text.replace("daemon: {database: 'postgresql://crond@db/crond'}\n", "")
    assert loader.loads(without, "s.yaml", environ=env).jobs["a"].settings.locks == ["db"]
    with pytest.raises(ConfigError, match="names no lock"):
        loader.loads(text.replace("locks: [db]", "locks: [dbb]"), "s.yaml", environ=env)


def test_a_jobs_locks_written_as_capacities_or_a_name() -> None:
    """A job's `locks` is a list of names; the capacities are the top-level `locks:`'s.
    A mapping there (the capacities, in the wrong place) is told both, in its own names;
    a lone name is told the list."""
    text = (
        "locks: {db: 1, gpu: 2}\n"
        "defaults: {locks: {db: 1}}\n"
        "jobs:\n"
        "  a: {every: 1m, command: x, locks: {db: 1}}\n"
        "  b: {every: 1m, command: x, locks: {db: 3, gpu: two}}\n"
        "  c: {every: 1m, command: x, locks: db}\n"
        "  d: {every: 1m, command: x, locks: 3}\n"
        "  e: {every: 1m, command: x, locks: {'bad name': 1}}\n"
    )
    assert problems(text) == [
        "s.yaml:2:19: defaults.locks: a mapping is not a list of lock names: a job names the "
        "locks it takes, locks: [db]; their capacities go in the file's top-level locks:, "
        "locks: {db: 1}",
        "s.yaml:4:37: jobs.a.locks: a mapping is not a list of lock names: a job names the "
        "locks it takes, locks: [db]; their capacities go in the file's top-level locks:, "
        "locks: {db: 1}",
        "s.yaml:5:37: jobs.b.locks: a mapping is not a list of lock names: a job names the "
        "locks it takes, locks: [db, gpu]; their capacities go in the file's top-level "
        "locks:, locks: {db: 3, gpu: 1}",
        's.yaml:6:37: jobs.c.locks: "db" is not a list of lock names: write locks: [db] '
        "(names of the file's top-level locks:)",
        "s.yaml:7:37: jobs.d.locks: 3 is not a list of lock names, e.g. locks: [db] (names "
        "of the file's top-level locks:)",
        "s.yaml:8:37: jobs.e.locks: a mapping is not a list of lock names: a job names the "
        "locks it takes, locks: [db]; their capacities go in the file's top-level locks:, "
        "locks: {db: 1}",
    ]


def test_the_files_locks_written_as_a_list() -> None:
    """The top-level `locks:` is a map of capacities: a list is told the map, and the
    jobs' names are not also reported as naming no lock."""
    text = "locks: [db]\njobs:\n  a: {every: 1m, command: x, locks: [db]}\n"
    assert problems(text) == [
        "s.yaml:1:8: locks: a list is not a map of lock names to capacities: write locks: "
        "{db: 1} (how many runs may hold each at once); a job names the ones it takes in "
        "its own locks: [db]"
    ]
    assert problems("locks: 3\njobs:\n  a: {every: 1m, command: x}\n") == [
        "s.yaml:1:8: locks: 3 is not a map of lock names to capacities, e.g. locks: "
        "{db-heavy: 1, gpu: 1} (how many runs may hold each at once); a job names the ones "
        "it takes in its own locks: [db-heavy, gpu]"
    ]
