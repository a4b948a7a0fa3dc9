"""What each job tells, worked out once a load for the Teller (teller.py): for each
event, the notifiers its `notify` subscribes; the notifiers whose failing streak it
keeps; whether it pings; and when one of its runs is long. A job that tells nothing has
no plan, so the daemon's calls for its runs cost one dict lookup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from crond.config.loaded import LoadedJob, NotifierSpec
from crond.config.model import NotifyEvent


@dataclass(frozen=True)
class Plan:
    """What one job tells: its subscribers per event, the notifiers whose streak it
    keeps, whether it pings, and when a run is long."""

    events: dict[NotifyEvent, tuple[str, ...]]
    streaked: tuple[str, ...]  # subscribed to failed or recovered
    ping: bool
    warn_after: timedelta | None  # only when someone is told `long_running`


def plans(jobs: Mapping[str, LoadedJob], notifiers: Mapping[str, NotifierSpec]) -> dict[str, Plan]:
    """The plan of each job of the file that tells anything, by name."""
    found = {}
    for name, job in jobs.items():
        plan = plan_of(job, notifiers)
        if plan is not None:
            found[name] = plan
    return found


def plan_of(job: LoadedJob, notifiers: Mapping[str, NotifierSpec]) -> Plan | None:
    events: dict[NotifyEvent, list[str]] = {}
    for notifier, wanted in job.settings.notify.items():
        if notifier not in notifiers:
            continue  # the loader refuses this; a stale one must not fail here
        for event in dict.fromkeys(wanted):
            events.setdefault(NotifyEvent(event), []).append(notifier)
    if not events and not job.ping:
        return None
    failed = events.get(NotifyEvent.FAILED, [])
    recovered = events.get(NotifyEvent.RECOVERED, [])
    warn_after = job.settings.warn_after if NotifyEvent.LONG_RUNNING in events else None
    return Plan(
        events={event: tuple(names) for event, names in events.items()},
        streaked=tuple(dict.fromkeys([*failed, *recovered])),
        ping=bool(job.ping),
        warn_after=warn_after or None,
    )
