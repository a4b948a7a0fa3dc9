"""A job name the daemon does not know, in words, with the closest names it has: how the
control commands refuse it, from the daemon (crond/daemon/control.py) and from
`crond backfill --dry-run` (crond/cli_backfill.py), which must say it the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

__all__ = ["no_job"]

_SUGGEST_FROM = 500  # names compared for a did-you-mean, at most (difflib is quadratic)


def no_job(name: str, jobs: Iterable[str]) -> str:
    """`no job 'stamps' in the file (did you mean 'stamp'?)` (no hint when none is close)."""
    from crond.config.wording import close_matches  # noqa: PLC0415  (only for a mistake)

    close = close_matches(name, _candidates(name, jobs), cutoff=0.6)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return f"no job {name!r} in the file{hint}"


def _candidates(name: str, jobs: Iterable[str]) -> list[str]:
    """The job names a did-you-mean compares `name` with: those of about its length, at
    most _SUGGEST_FROM, so a file of 10,000 jobs answers a typo in a millisecond or two on
    the loop's thread, not in seconds. A name longer than any job's may be has none."""
    if len(name) > 64:  # longer than a job name can be (docs/configuration.md)
        return []
    near = (job for job in jobs if abs(len(job) - len(name)) <= 2)
    return list(itertools.islice(near, _SUGGEST_FROM))
