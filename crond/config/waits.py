"""The names jobs wait on (docs/workflows.md): each job's `locks` (and `defaults.locks`)
must name a lock of the file's top-level `locks:`; a name that does not is reported at
itself, with the name meant where one is close.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crond.config import places
from crond.config.problems import Problem
from crond.config.wording import MAX_PROBLEMS, close_matches, quote

_LISTED = 10


def check_locks(
    defined: object, jobs: object, defaults: object, source: places.Source, filename: str
) -> list[Problem]:
    """Each name in a `locks` list (in `defaults` and in each job, as written) that names
    no lock of the file, located at the name."""
    names = [str(name) for name in defined] if isinstance(defined, dict) else []
    known = set(names)
    found: list[Problem] = []
    for at, listed in _lock_lists(jobs, defaults):
        for i, name in enumerate(listed):
            if not isinstance(name, str) or name in known:
                continue  # (not a string: the model says so)
            path = (*at, "locks", i)
            found.append(Problem.at(filename, source.locate(path), path, unknown(name, names)))
            if len(found) > MAX_PROBLEMS:
                return found
    return found


def unknown(name: str, names: list[str], what: str = "lock", where: str = "locks") -> str:
    """`name` names no `what` of the file: the sentence, with the closest name."""
    said = f"{quote(name)} names no {what}"
    if not names:
        return f"{said} (the file has none: define it under the top-level {where}:)"
    close = close_matches(name, names, cutoff=0.6)
    if close:
        return f'{said} (did you mean "{close[0]}"?)'
    more = ", ..." if len(names) > _LISTED else ""
    return f"{said} (the file's {where}: {', '.join(names[:_LISTED])}{more})"


def _lock_lists(jobs: object, defaults: object) -> Iterator[tuple[places.Path, list[Any]]]:
    if isinstance(defaults, dict) and isinstance(defaults.get("locks"), list):
        yield ("defaults",), defaults["locks"]
    if isinstance(jobs, dict):
        for name, job in jobs.items():
            if isinstance(job, dict) and isinstance(job.get("locks"), list):
                yield ("jobs", name), job["locks"]
