"""The names jobs wait on (docs/workflows.md): each job's `locks` (and `defaults.locks`)
must name a lock of the file's top-level `locks:`, each job's `after` a job of the file;
a name that does not is reported at itself, with the name meant where one is close. A
cycle of `after` (a job that would start itself, through others) is refused, named.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from crond.config import places
from crond.config.problems import Problem
from crond.config.wording import MAX_PROBLEMS, close_matches, quote

_LISTED = 10


def check(
    data: Mapping[Any, Any], jobs: object, source: places.Source, filename: str
) -> list[Problem]:
    """`check_locks` and `check_after` (`data`: the file, `jobs` as written): the names the
    jobs of a file wait on."""
    defaults = data.get("defaults")
    found = check_locks(data.get("locks"), jobs, defaults, source, filename)
    return found + check_after(jobs, defaults, source, filename)


def check_locks(
    defined: object, jobs: object, defaults: object, source: places.Source, filename: str
) -> list[Problem]:
    """Each name in a `locks` list (in `defaults` and in each job, as written) that names
    no lock of the file, located at the name."""
    if defined is not None and not isinstance(defined, dict):
        return []  # (`locks: [db]`: the model tells what to write there first)
    names = [str(name) for name in defined] if defined else []
    known = set(names)
    found: list[Problem] = []
    for at, listed in written(jobs, defaults, "locks", list):
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


def check_after(
    jobs: object, defaults: object, source: places.Source, filename: str
) -> list[Problem]:
    """Each `after` that names no job of the file (at the name), `after` in `defaults`,
    and each cycle of `after` (at the `after` of its first job, in file order)."""
    if isinstance(defaults, dict) and "after" in defaults:
        path: places.Path = ("defaults", "after")
        said = "after cannot be a default: each job names its own parents"
        return [Problem.at(filename, source.locate(path, key=True), path, said)]
    if not isinstance(jobs, dict):
        return []
    names = [str(name) for name in jobs]
    parents: dict[str, list[str]] = {}
    found: list[Problem] = []
    for name, job in jobs.items():
        after = job.get("after") if isinstance(job, dict) else None
        listed = (
            [after] if isinstance(after, str) else list(after) if isinstance(after, dict) else []
        )
        for parent in listed:
            if not isinstance(parent, str):
                continue
            if parent in jobs:
                parents.setdefault(str(name), []).append(parent)
                continue
            at: places.Path = (
                ("jobs", name, "after")
                if isinstance(after, str)
                else ("jobs", name, "after", parent)
            )
            mark = source.locate(at, key=not isinstance(after, str))
            found.append(Problem.at(filename, mark, at, unknown(parent, names, "job", "jobs")))
    for cycle in _cycles(parents, names):
        at = ("jobs", cycle[0], "after")
        message = (
            "a cycle of after: " + " → ".join([*cycle, cycle[0]]) + " (a job would start itself)"
        )
        found.append(Problem.at(filename, source.locate(at, key=True), at, message))
    return found[: MAX_PROBLEMS + 1]


def _cycles(parents: dict[str, list[str]], names: list[str]) -> list[list[str]]:
    """Each cycle of the graph child -> parents once, as the jobs from its first in file
    order, each started by the one before it. Iterative: a chain of thousands of jobs
    is walked without Python's recursion limit."""
    order = {name: i for i, name in enumerate(names)}
    done: set[str] = set()
    cycles: list[list[str]] = []
    for root in names:
        if root in done:
            continue
        path: list[str] = [root]
        on_path = {root: 0}
        todo = [iter(parents.get(root, ()))]
        while todo:
            parent = next(todo[-1], None)
            if parent is None:
                todo.pop()
                done.add(path.pop())
                del on_path[next(iter(reversed(on_path)))]
            elif parent in on_path:
                loop = path[on_path[parent] :]
                first = min(range(len(loop)), key=lambda i: order[loop[i]])
                loop = loop[first:] + loop[:first]
                cycles.append([loop[0], *reversed(loop[1:])])  # parent -> child, as told
            elif parent not in done:
                on_path[parent] = len(path)
                path.append(parent)
                todo.append(iter(parents.get(parent, ())))
    return cycles


_T = TypeVar("_T")


def written(
    jobs: object, defaults: object, key: str, kind: type[_T]
) -> Iterator[tuple[places.Path, _T]]:
    """Each `key` of `defaults` and of each job, as written, that is a `kind` (what is
    not, the model reports): where it stands, and it."""
    if isinstance(defaults, dict) and isinstance(defaults.get(key), kind):
        yield ("defaults",), defaults[key]
    if isinstance(jobs, dict):
        for name, job in jobs.items():
            if isinstance(job, dict) and isinstance(job.get(key), kind):
                yield ("jobs", name), job[key]
