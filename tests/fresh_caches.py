"""A pytest plugin for `make mutate` (tests/mutate.py): each test starts on cold caches.

mutmut runs a mutant's tests in a process forked from one that has already run the
suite on the unmutated code; an answer cached there would stand in for the mutant's own
(warm caches hid five mutants once). So before every test, every lru_cache of crond's
modules and every cache crond.when keeps in a module-level container is emptied
(tests/when/test_caches.py checks that this list is complete). A test then also learns, in the
run that maps tests to the functions they reach, every function it needs, not only
those no earlier test had already cached.

Hypothesis is pinned too (derandomized, no example database), so that a mutant's verdict
does not depend on what the runs before it found; and the oracle's tests run last.
"""

from __future__ import annotations

import functools
import sys

import pytest
from hypothesis import settings

from crond.when import timeline, timing

# Module-level caches that are not lru_caches: (module, name); emptied in place.
CONTAINERS = (
    (timeline, "_chunks"),
    (timeline, "_last_stretch"),
    (timing, "_first_fires"),
)

settings.register_profile("mutate", derandomize=True, database=None)
settings.load_profile("mutate")


def clear() -> None:
    """Empty every cache of crond (the loaded modules') that outlives a call."""
    for name, module in list(sys.modules.items()):
        if name == "crond" or name.startswith("crond."):
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()
    for module, name in CONTAINERS:
        getattr(module, name).clear()
    timeline._last_seconds[0] = (None, 0)


@pytest.fixture(autouse=True)
def _cold_caches() -> None:
    clear()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The oracle's tests last: a mutant's run stops at its first failing test, and most
    mutants fail a quick one."""
    items.sort(key=lambda item: item.nodeid.startswith("tests/when/test_timing_oracle.py"))
