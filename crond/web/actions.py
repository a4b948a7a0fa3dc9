"""The actions (POST /jobs/NAME/ACTION): trigger, kill, pause, resume, sent to the
daemon as the commands send them. Each needs an operator (`web.operators`) and the CSRF
token of the page it came from; each is logged (`web.action`, `by: web:USER`), and so is
each refusal (`web.refused`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from crond.clock import iso_utc
from crond.config.durations import DurationError, parse_duration
from crond.control.protocol import MAX_NOTE
from crond.web.auth import User
from crond.web.steer import SteerError, call

if TYPE_CHECKING:
    from crond.web.context import Web

ACTIONS = ("trigger", "kill", "pause", "resume")
_LATEST = datetime(2200, 1, 1, tzinfo=UTC)


class Refused(Exception):  # noqa: N818  (what the person is told)
    pass


async def act(web: Web, request: Request) -> Response:
    user: User = request.scope["user"]
    name, action = request.path_params["name"], request.path_params["action"]
    refused = await _refusal(web, request, user, name, action)
    if refused is not None:
        return refused
    by = f"web:{user.name}"
    back = f"/jobs/{quote(name, safe='')}"
    try:
        if action == "trigger":
            follow = web.follows.start(web.socket, name, by)
            web.log.info("web.action", action=action, job=name, by=by, follow=follow.id)
            return RedirectResponse(f"/follow/{follow.id}", status_code=303)
        form = await request.form()  # read already by _refusal: starlette keeps it
        args = _args(action, name, form, web.clock.now())
        result = await asyncio.to_thread(call, web.socket, action, args, by)
    except (SteerError, Refused) as exc:
        web.log.warning("web.action_failed", action=action, job=name, by=by, error=str(exc))
        key = web.flash(False, f"{action} {name}: {exc}")
        return RedirectResponse(f"{back}?said={key}", status_code=303)
    web.source.forget()
    web.log.info("web.action", action=action, job=name, by=by, **_logged(args))
    key = web.flash(True, _said(action, name, result))
    return RedirectResponse(f"{back}?said={key}", status_code=303)


async def _refusal(
    web: Web, request: Request, user: User, name: str, action: str
) -> Response | None:
    """Why this POST is not carried out (a response), or None: it is."""
    by = f"web:{user.name}"
    if action not in ACTIONS:
        return PlainTextResponse("no such action\n", status_code=404)
    form = await request.form(max_files=0, max_fields=8, max_part_size=4096)
    if not web.gate.csrf_ok(user, form.get("csrf")):
        web.log.warning("web.refused", reason="csrf", by=by, action=action, job=name)
        return PlainTextResponse(
            "this form is stale or not ours: reload the page\n", status_code=403
        )
    if not user.operator:
        web.log.warning("web.refused", reason="viewer", by=by, action=action, job=name)
        return PlainTextResponse(
            f"{user.name} may look but not {action}: ask for web.operators\n", status_code=403
        )
    if name not in web.source.cfg.jobs:
        return PlainTextResponse("no such job\n", status_code=404)
    return None


def _args(action: str, name: str, form: Any, now: datetime) -> dict[str, Any]:
    if action == "kill":
        return {"target": name}
    if action == "resume":
        return {"jobs": [name]}
    note = str(form.get("note") or "").strip() or None
    if note is not None and len(note) > MAX_NOTE:
        raise Refused(f"a note is at most {MAX_NOTE} characters")
    until = _until(str(form.get("for") or "").strip(), str(form.get("until") or "").strip(), now)
    return {
        "jobs": [name],
        "until": None if until is None else until.isoformat().replace("+00:00", "Z"),
        "note": note,
    }


def _until(for_: str, until: str, now: datetime) -> datetime | None:
    if for_ and until:
        raise Refused("give for or until, not both")
    if for_:
        try:
            return now + parse_duration(for_)
        except DurationError as exc:
            raise Refused(str(exc)) from None
    if not until:
        return None
    try:
        when = datetime.fromisoformat(until.replace("Z", "+00:00"))
    except ValueError:
        raise Refused(f"{until!r} is not a date and time (2026-12-24T18:00, UTC)") from None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    if when <= now:
        raise Refused(
            f"{iso_utc(when)} has passed (now {iso_utc(now.replace(microsecond=0))}): "
            "give a later instant, or a duration"
        )
    if when >= _LATEST:
        raise Refused(f"{iso_utc(when)} is too far: give an instant before 2200")
    return when


def _logged(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k in ("until", "note")}


def _said(action: str, name: str, result: dict[str, Any]) -> str:
    if action == "kill":
        stopped = len(result.get("stopped") or []) + len(result.get("asked") or [])
        return f"{name}: {stopped} run(s) asked to stop" if stopped else f"{name}: nothing running"
    if action == "pause":
        until = result.get("until")
        kept = "" if result.get("stored", True) else " (no state store: until the daemon stops)"
        return f"{name} paused {'until ' + str(until) if until else 'until resumed'}{kept}"
    return f"{name} resumed"
