"""`crond backfill` on the control socket (docs/control.md): the request checked (the job
is the file's, the instants are ones), the backfill begun (crond/daemon/backfilling.py),
and with `wait` each slot's end sent on as it comes, then the backfill's end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crond.control.protocol import ControlError, ok, parse_instant
from crond.daemon.backfilling import summary

if TYPE_CHECKING:
    from crond.control.callers import Caller
    from crond.control.server import Send
    from crond.daemon.backfilling import Backfilling


async def backfill_command(
    filling: Backfilling,
    known: Callable[[list[str]], None],
    args: dict[str, Any],
    caller: Caller,
    send: Send,
) -> dict[str, Any]:
    """Begin a backfill (`known`: the did-you-mean of an unknown job, as every command's)."""
    loop = filling.loop
    name = str(args["job"])
    known([name])
    start, end = parse_instant(args["from"]), parse_instant(args["to"])
    if start is None or end is None:  # (the protocol checked both are there)
        raise ControlError("bad_request", 'backfill: give "from" and "to"')
    if loop.going.tasks is None or loop.stopping:
        raise ControlError("refused", "the daemon is stopping")
    async with loop.lock:  # not in the middle of a wake
        job = loop.core.schedule.entries[name].job
        began = await filling.begin(job, start, end, caller.by())
    if isinstance(began, str):
        raise ControlError("refused", began)
    if not args.get("wait"):
        return ok(summary(began))
    heard: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    unfollow = filling.followers.follow(began, heard.put_nowait)
    try:
        while "end" not in (what := await heard.get()):
            await send({"stream": "stdout", "line": _slot_line(what)})
    finally:
        unfollow()
    state = what.pop("end")
    return ok({**what, "state": state})


def _slot_line(what: dict[str, Any]) -> str:
    """`2026-03-08T07:00:00Z  success  RUN_ID` (another replica's: `elsewhere`)."""
    outcome = what["outcome"] or "ran on another replica"
    return f"{what['slot']}  {outcome}  {what['run_id'] or '-'}"
