"""The pages (GET): jobs, a job, a run, now, the timeline, the cluster, a followed
trigger. Each reads in a thread (crond/web/state.py) and renders a template; whatever the
store or a job says reaches the page through Jinja2's escaping only."""

from __future__ import annotations

import asyncio
import functools
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from crond.clock import iso_utc
from crond.status_text import output_note
from crond.store.base import AttemptRow, StateError
from crond.web import charts
from crond.web.remote import connector, follow_remote
from crond.web.runevents import run_events
from crond.web.steer import SteerError, call
from crond.when.zones import get_zone

if TYPE_CHECKING:
    from crond.web.context import Web

PAGE = 200  # jobs a page
STATES = ("failing", "running", "paused")
_TIMELINE_S = 60.0
_ZONES_LISTED = 50  # the timeline's zone choices: the zones most jobs use, and UTC
# The last timeline drawn: the file's load it was drawn for (the object itself: an id
# may be reused by the next load), when (monotonic), the drawing.
_timeline_cache: list[tuple[object, float, charts.Timeline]] = []


async def jobs(web: Web, request: Request) -> Response:
    now = web.clock.now()
    rows = await asyncio.to_thread(web.source.rows, now)
    query = request.query_params.get("q", "")[:200]
    state = request.query_params.get("state", "")
    if state not in STATES:
        state = ""
    found = [
        r
        for r in rows.jobs
        if query.lower() in r.name.lower() and (not state or r.state() == state)
    ]
    page = _int(request.query_params.get("page"), 1)
    pages = max(1, -(-len(found) // PAGE))
    page = min(page, pages)
    counts = {s: sum(r.state() == s for r in rows.jobs) for s in STATES}
    shown = found[(page - 1) * PAGE : page * PAGE]
    cfg, said = web.source.cfg, web.source.said
    return web.render(
        request,
        "jobs.html",
        version=rows.version,
        rows=rows,
        shown=shown,
        words={r.name: said.words(cfg, r.name) for r in shown if r.name in cfg.jobs},
        found=len(found),
        query=query,
        state=state,
        states=STATES,
        counts=counts,
        page=page,
        pages=pages,
    )


async def job(web: Web, request: Request) -> Response:
    name = request.path_params["name"]
    found = None
    if name in web.source.cfg.jobs:
        found = await asyncio.to_thread(web.source.job, name, web.clock.now())
    if found is None:
        return web.render(request, "missing.html", 404, what=f"A job named {name!r}")
    return web.render(
        request,
        "job.html",
        version=found.version,
        page=found,
        words=web.source.said.words(web.source.cfg, name),
        bars=charts.run_bars(found.runs),
        chart=(charts.WIDTH, charts.HEIGHT),
    )


async def run(web: Web, request: Request) -> Response:
    run_id = request.path_params["run_id"][:100]
    try:
        attempts = await asyncio.to_thread(web.source.run, run_id)
        problem = None
    except StateError as exc:
        attempts, problem = [], str(exc)
    if not attempts and problem is None:
        return web.render(
            request, "missing.html", 404, what=f"A run {run_id!r} in the history kept"
        )
    from crond.run.output import TAIL_LINES  # noqa: PLC0415  (the runner's: only here)

    notes = [output_note(a, TAIL_LINES) for a in attempts]
    job = web.source.cfg.jobs.get(attempts[0].job) if attempts else None
    events = run_events(attempts, None if job is None else job.settings.retry)
    return web.render(
        request,
        "run.html",
        run_id=run_id,
        attempts=attempts,
        notes=notes,
        events=events,
        problem=problem,
    )


async def now(web: Web, request: Request) -> Response:
    runs: list[dict[str, Any]] = []
    problem = None
    try:
        answer = await asyncio.to_thread(call, web.socket, "ps", {})
        runs = [r for r in answer.get("runs") or [] if isinstance(r, dict)]
    except SteerError as exc:
        problem = str(exc)
        if web.source.cfg.daemon.database is not None:  # no daemon here: the cluster's runs
            try:
                opened = await asyncio.to_thread(web.source.open_runs) or []
                runs, problem = [_going(a, web.clock.now()) for a in opened], None
            except StateError as why:
                problem = f"{problem}; {why}"
    return web.render(request, "now.html", runs=runs, problem=problem)


def _going(a: AttemptRow, now: datetime) -> dict[str, Any]:
    """An open attempt of the cluster's database as `crond ps` shows a run."""
    elapsed = round(max(0.0, (now - a.started).total_seconds()), 3)
    return {
        "job": a.job, "run_id": a.run_id, "attempt": a.attempt, "pid": "",
        "slot": iso_utc(a.slot), "started": iso_utc(a.started), "elapsed": elapsed,
        "replica": a.replica,
    }  # fmt: skip


async def timeline(web: Web, request: Request) -> Response:
    now = web.clock.now()
    cfg = web.source.cfg
    cached = _timeline_cache[0] if _timeline_cache else None
    if cached is None or cached[0] is not cfg or time.monotonic() - cached[1] > _TIMELINE_S:
        names = list(cfg.jobs)
        drawn = await asyncio.to_thread(charts.timeline, names, web.source.timing, now)
        _timeline_cache[:] = [cached := (cfg, time.monotonic(), drawn)]
    line = cached[2]
    busiest = sorted(line.slots, key=lambda s: -s.count)[:10]
    used = web.source.said.zones(cfg)
    choices = [*used[:_ZONES_LISTED], *(["UTC"] if "UTC" not in used[:_ZONES_LISTED] else [])]
    zone = request.query_params.get("zone", "")
    if zone not in choices:
        zone = used[0]
    return web.render(
        request,
        "timeline.html",
        line=line,
        zone=get_zone(zone),
        zone_name=zone,
        zones=choices,
        busiest=[s for s in busiest if s.count],
        chart=(charts.WIDTH, charts.HEIGHT),
    )


async def cluster(web: Web, request: Request) -> Response:
    try:
        found = await asyncio.to_thread(web.source.cluster)
        problem = None
    except StateError as exc:
        found, problem = None, str(exc)
    return web.render(request, "cluster.html", cluster=found, problem=problem)


async def watch(web: Web, request: Request) -> Response:
    """A run going now, its output as it comes (the daemon's `follow`)."""
    run_id = request.path_params["run_id"][:100]
    job = request.query_params.get("job", "")
    if job not in web.source.cfg.jobs:
        return web.render(request, "missing.html", 404, what=f"A job named {job!r}")
    user = request.scope["user"]
    connect = connector(web.source.cfg)
    remote = None if connect is None else functools.partial(follow_remote, connect=connect)
    try:
        found = web.follows.start(web.socket, job, f"web:{user.name}", run_id, remote)
    except SteerError as exc:
        return web.render(request, "now.html", 503, runs=[], problem=str(exc))
    return web.render(request, "follow.html", follow=found)


async def follow(web: Web, request: Request) -> Response:
    found = web.follows.get(request.path_params["key"])
    if found is None:
        return web.render(request, "missing.html", 404, what="That triggered run")
    return web.render(request, "follow.html", follow=found)


def _int(text: str | None, default: int) -> int:
    if text is None or not text.isdigit() or len(text) > 6:
        return default
    return max(1, int(text))
