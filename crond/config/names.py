"""The names in a file: job and notifier names that break the rule of names, and `notify`
keys (in `defaults` and in each job) that name no notifier of the file, with the name
meant where one is close.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from crond.config import places
from crond.config.model import JOB_NAME
from crond.config.problems import Problem, close_matches
from crond.config.waits import written
from crond.config.wording import MAX_PROBLEMS, quote


def check_names(
    named: object, source: places.Source, filename: str, where: str = "jobs"
) -> list[Problem]:
    """The names of the mapping `named` (at the top-level key `where`) that are not valid
    job names: the rule of job names holds for notifier names too."""
    if not isinstance(named, dict):
        return []
    what = {"jobs": "job", "calendars": "calendar", "locks": "lock"}.get(where, "notifier")
    bad = (name for name in named if not JOB_NAME.fullmatch(str(name)))
    return [
        Problem.at(
            filename,
            source.locate((where, name), key=True),
            (where, name),
            f'{quote(str(name))} is not a valid {what} name (letters, digits, "_", "." and '
            '"-", starting with a letter or digit, at most 64 characters)',
        )
        for name in itertools.islice(bad, MAX_PROBLEMS + 1)
    ]


# Working out "did you mean" compares a name with each notifier's: a file of thousands
# of misspelt subscriptions gets it for this many distinct names (the rest, the list).
_HINTED_NAMES = 50
_LISTED_NOTIFIERS = 10


def check_subscriptions(
    defined: object, jobs: object, defaults: object, source: places.Source, filename: str
) -> list[Problem]:
    """Each `notify` key (in `defaults` and in each job, as written) that names no
    notifier of the file, at the key, with the name it is closest to."""
    names = [str(name) for name in defined] if isinstance(defined, dict) else []
    known = set(names)
    hints: dict[str, str] = {}
    found: list[Problem] = []
    for at, notify in _notify_maps(jobs, defaults):
        for key in notify:
            if key in known:
                continue
            if key not in hints:
                hints[key] = _no_notifier(str(key), names, len(hints) < _HINTED_NAMES)
            path = (*at, "notify", key)
            found.append(Problem.at(filename, source.locate(path, key=True), path, hints[key]))
            if len(found) > MAX_PROBLEMS:
                return found
    return found


def _notify_maps(jobs: object, defaults: object) -> Iterator[tuple[places.Path, dict[Any, Any]]]:
    return written(jobs, defaults, "notify", dict)


def _no_notifier(key: str, names: list[str], hint: bool) -> str:
    said = f"{quote(key)} names no notifier"
    if not names:
        return f"{said} (the file has none: define it under the top-level notifiers:)"
    close = close_matches(key, names, cutoff=0.6) if hint else []
    if close:
        return f'{said} (did you mean "{close[0]}"?)'
    listed = ", ".join(names[:_LISTED_NOTIFIERS])
    more = ", ..." if len(names) > _LISTED_NOTIFIERS else ""
    return f"{said} (the file's notifiers: {listed}{more})"
