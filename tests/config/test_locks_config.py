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
