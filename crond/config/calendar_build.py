"""From a valid file's `calendars:` and the jobs' `days`/`skip`/`nth_day`/`roll` to the
DayRules of each job (crond.when.dayfilter), every mistake located: a name that names
no calendar (with "did you mean"), a cycle of `include`/`except`, an `ics` file that
cannot be used. `no_fire_problems` is validate's check that each job still fires within
the next 10 years.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from crond.config import places
from crond.config.calendar_ics import IcsError, read_ics
from crond.config.calendars import CalendarDef, parse_dates, parse_weekdays
from crond.config.loaded import LoadedConfig, LoadedJob
from crond.config.model import Config, Job
from crond.config.problems import Problem
from crond.config.wording import close_matches, quote
from crond.when.calendars import Calendar, Dates, Holidays, Source, Weekdays, Window
from crond.when.dayfilter import HORIZON_YEARS, DayRules

__all__ = ["Built", "build", "no_fire"]


@dataclass
class Built:
    """Each job's DayRules (jobs without calendar fields have none) and a fingerprint of
    what they were made of (a reload re-times a job whose calendars changed)."""

    rules: dict[str, DayRules] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _skips(job: Job) -> list[str]:
    skip = job.skip
    return [] if skip is None else [skip] if isinstance(skip, str) else list(skip)


def build(
    config: Config, source: places.Source, filename: str, *, enforce: bool, today: date
) -> Built:
    built = Built()
    defs = config.calendars
    _references(config, source, filename, built)
    _cycles(defs, source, filename, built)
    if built.problems:
        return built
    maker = _Maker(defs, source, filename, built, enforce=enforce, today=today)
    for name in defs:
        maker.make(name)
    if built.problems:
        return built
    shared: dict[tuple[object, ...], tuple[DayRules, str]] = {}
    for job_name, job in config.jobs.items():
        skips = _skips(job)
        if job.days is None and not skips and job.nth_day is None:
            continue
        roll = None if job.roll is None else job.roll.value
        key = (job.days, tuple(skips), job.nth_day, roll)
        known = shared.get(key)
        if known is None:
            days = maker.made[job.days] if job.days is not None else None
            skip = tuple(maker.made[s] for s in skips)
            used = sorted({*skips, *([job.days] if job.days else [])})
            digest = [_closure_digest(u, defs, maker.digests) for u in used]
            text = json.dumps([key, digest]).encode()
            known = shared[key] = (
                DayRules(days, skip, job.nth_day, roll),
                hashlib.sha256(text).hexdigest(),
            )
        built.rules[job_name], built.keys[job_name] = known
    return built


def _references(config: Config, source: places.Source, filename: str, built: Built) -> None:
    """Each name in `include`, `except`, `days` and `skip` that names no calendar."""
    defs = config.calendars
    names = list(defs)

    def unknown(name: str, path: places.Path) -> None:
        close = close_matches(name, names, cutoff=0.6)
        if close:
            hint = f'did you mean "{close[0]}"?'
        elif names:
            hint = "the file's calendars: " + ", ".join(names[:10])
        else:
            hint = "the file has none: define it under the top-level calendars:"
        message = f"{quote(name)} names no calendar ({hint})"
        built.problems.append(Problem.at(filename, source.locate(path), path, message))

    for name, cal in defs.items():
        for key, refs in (("include", cal.include), ("except", cal.except_)):
            for i, ref in enumerate(refs or []):
                if ref not in defs:
                    unknown(ref, ("calendars", name, key, i))
    told: set[places.Path] = set()

    def unknown_at(name: str, job_name: str, field: str, *at: int) -> None:
        # A name the job took from `defaults` is told once, at its line there.
        own = ("jobs", job_name, field)
        path = own if own in source.values else ("defaults", field)
        path = (*path, *at)
        if path not in told:
            told.add(path)
            unknown(name, path)

    for job_name, job in config.jobs.items():
        if job.days is not None and job.days not in defs:
            unknown_at(job.days, job_name, "days")
        for i, ref in enumerate(_skips(job)):
            if ref not in defs:
                unknown_at(ref, job_name, "skip", *((i,) if isinstance(job.skip, list) else ()))


def _closure_digest(name: str, defs: Mapping[str, CalendarDef], digests: dict[str, str]) -> str:
    done = digests.get("\0" + name)
    if done is not None:
        return done
    parts = [digests.get(name, "")]
    cal = defs[name]
    for ref in [*(cal.include or []), *(cal.except_ or [])]:
        parts.append(_closure_digest(ref, defs, digests))
    done = digests["\0" + name] = hashlib.sha256("".join(parts).encode()).hexdigest()
    return done


def _cycles(
    defs: Mapping[str, CalendarDef], source: places.Source, filename: str, built: Built
) -> None:
    """A calendar that includes or excepts itself, through others: refused at its first
    reference on the way round."""
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        cal = defs[name]
        for key, refs in (("include", cal.include), ("except", cal.except_)):
            for i, ref in enumerate(refs or []):
                if state.get(ref) == 1:
                    loop = " → ".join([*path[path.index(ref) :], name, ref])
                    where = ("calendars", name, key, i)
                    message = (
                        f"{quote(ref)} makes a cycle ({loop}): a calendar cannot contain itself"
                    )
                    built.problems.append(
                        Problem.at(filename, source.locate(where), where, message)
                    )
                elif state.get(ref) is None:
                    visit(ref, [*path, name])
        state[name] = 2

    for name in defs:
        if name not in state:
            visit(name, [])


class _Maker:
    """Each calendar built once, its includes and excepts first."""

    def __init__(
        self,
        defs: Mapping[str, CalendarDef],
        source: places.Source,
        filename: str,
        built: Built,
        *,
        enforce: bool,
        today: date,
    ) -> None:
        self.defs, self.source, self.filename, self.built = defs, source, filename, built
        self.enforce, self.today = enforce, today
        self.made: dict[str, Calendar] = {}
        self.digests: dict[str, str] = {}

    def make(self, name: str) -> Calendar:
        found = self.made.get(name)
        if found is not None:
            return found
        cal = self.defs[name]
        sources: list[Source] = []
        windows = [Window(w.from_, w.until) for w in cal.windows or []]
        text = cal.model_dump_json(by_alias=True)
        if cal.dates is not None:
            spans, yearly = parse_dates(list(cal.dates))
            sources.append(Dates(tuple(spans), tuple(yearly)))
        if cal.weekdays is not None:
            sources.append(Weekdays(parse_weekdays(cal.weekdays)))
        if cal.holidays is not None:
            sources.append(Holidays(cal.holidays, cal.subdiv))
        if cal.ics is not None:
            try:
                listed, timed, digest = read_ics(
                    Path(cal.ics), enforce=self.enforce, today=self.today
                )
            except IcsError as exc:
                where = ("calendars", name, "ics")
                mark = self.source.locate(where)
                self.built.problems.append(Problem.at(self.filename, mark, where, str(exc)))
            else:
                sources.append(listed)
                windows += timed
                text += digest
        include = [self.make(r) for r in cal.include or []]
        exclude = [self.make(r) for r in cal.except_ or []]
        self.digests[name] = hashlib.sha256(text.encode()).hexdigest()
        made = self.made[name] = Calendar(name, sources, include, exclude, windows)
        return made


def _same_days(job: LoadedJob) -> tuple[object, ...] | None:
    """What decides whether a cron job without jitter or timed windows fires within the
    horizon: its rules, its zone and the days its expression matches (and for a
    wildcard job, its hours: a DST gap can hold all of a day's). Jobs alike in these
    are asked once (10,000 jobs at varied times of a few calendars: a few questions)."""
    expr, rules = job.cron_expr, job.day_rules
    if expr is None or rules is None or job.settings.jitter or rules.windows_of_skip():
        return None
    fields = (expr.resolved or expr.source).split()
    if len(fields) != 5:  # a macro
        return (id(rules), job.zone, *fields)
    return (id(rules), job.zone, *fields[2:], expr.wildcard and fields[1])


def no_fire(
    loaded: LoadedConfig, now: datetime, source: places.Source, filename: str
) -> list[Problem]:
    """The enabled jobs whose calendars leave them no fire in the next HORIZON_YEARS
    years, each at the calendar field that removes its fires."""
    found = []
    answers: dict[tuple[object, ...], bool] = {}
    for name, job in loaded.jobs.items():
        if job.day_rules is None or not job.settings.enabled or job.reboot:
            continue
        key = _same_days(job)
        fires = answers.get(key) if key is not None else None
        if fires is None:
            fires = job.make_timing().next_after(now) is not None
            if key is not None:
                answers[key] = fires
        if fires:
            continue
        settings = job.settings
        field = "days" if settings.days else "nth_day" if settings.nth_day else "skip"
        path = ("jobs", name, field)
        message = (
            f"no fire in the next {HORIZON_YEARS} years: the calendars of days, skip and "
            f"nth_day leave none of {job.schedule_text}'s fires (from {now:%Y-%m-%d})"
        )
        found.append(Problem.at(filename, source.locate(path), path, message))
    return found
