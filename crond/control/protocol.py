"""The control socket's protocol: what `crond ps`, `trigger`, `kill`, `pause`,
`resume` and `reload` say to the running daemon, and what it answers. Shared by the server
(crond/control/server.py, in the daemon) and the client (crond/control/client.py, in
the commands), so both read and write it the same way.

Version 1. One connection carries one request. Everything is JSON, one object a line
(UTF-8, ending in `\\n`; JSON escapes every newline inside a string, so a line is one
object whatever a job prints).

The request, one line of at most `MAX_LINE` bytes:

    {"v": 1, "cmd": "ps" | "trigger" | "kill" | "pause" | "resume" | "reload", "args": {...}}

and optionally `"for": "web:USER"`: the dashboard's user a request is made for (the
events' `by` then names that user, and keeps the caller's own as `via`).

| cmd | args |
|---|---|
| `ps` | `{}` |
| `trigger` | `{"job": NAME, "wait": bool, "chain": bool}` (`chain`: its end chains) |
| `kill` | `{"target": NAME or RUN_ID}` |
| `pause` | `{"jobs": [NAME, ...]}` or `{"all": true}`; `"until"`: ISO or null; |
| | `"note"`: text or null |
| `resume` | `{"jobs": [NAME, ...]}` or `{"all": true}` |
| `reload` | `{}` |
| `follow` | `{"run_id": RUN_ID}`: a run going in this daemon (`crond web`'s Now page) |
| `backfill` | `{"job": NAME, "from": ISO, "to": ISO, "wait": bool}` |

The replies: zero or more stream lines, then one final line, then the server closes. A
caller keeps its side open until then: a caller that closes it (or hangs up) while its
answer is still being worked out — `trigger` with `wait` — is taken to have gone, and
its answer is dropped (the run goes on).

    {"stream": "stdout" | "stderr", "line": "..."}      (trigger with "wait", follow)
    {"ok": true, "result": {...}}
    {"ok": false, "error": "one sentence", "code": CODE}

`code` is one of `CODES`: `bad_request` (not a request of this version: bad JSON, a
missing or mistyped field, a line over `MAX_LINE`), `unknown_command`, `version` (the
reply also has `"versions": [1]`, those the daemon speaks), `forbidden` (the caller may
not steer this daemon), `refused` (the daemon will not: the reason), `not_found` (no
such job or run; the error has the did-you-mean), `internal` (the daemon failed to
answer; it logged why), `busy` (every connection the daemon takes at once is in use by a
request: sent instead of serving the request, which is not read).

The results (what the commands print; a field not listed is ignored, so the daemon may
add some):

- `ps`: `{"runs": [{"job", "run_id", "attempt", "pid", "slot", "started", "elapsed"}],
  "pid": the daemon's pid}`, the instants ISO-8601 UTC, `elapsed` in seconds, a run's
  `pid` null before the spawn;
- `trigger`: `{"run_id"}`; with `wait`, also `"outcome"` and `"exit_code"` (minus the
  signal, or null) once the run has ended;
- `follow`: the run's output lines from now on, then `{"run_id", "outcome", "exit_code"}`
  once it ended (`not_found`: no such run going in this daemon);
- `kill`: `{"stopped": [{"job", "run_id", "pid"}]}` (empty: nothing was running), and
  `"backfills": [BACKFILL]`, the backfills it cancelled (see `backfill`);
- `backfill`: BACKFILL, `{"id", "job", "from", "to", "total", "done", "succeeded",
  "failed", "next_slot"}`; with `wait`, one stream line (stdout) a slot as its run ends,
  then BACKFILL with `"state"`: `finished` or `cancelled`;
- `pause`: `{"jobs": [NAME, ...], "until": ISO or null (until resumed), "stored": bool}`;
  `stored` false: the daemon has no state store, the pause lasts until it stops;
- `resume`: `{"resumed": [{"job": NAME, "skipped": N}]}`, N the slots skipped while
  paused; `"was_paused": false` for a job that was not paused;
- `reload`: once the file was read again (as for SIGHUP): `{"reloaded": true, "jobs": N,
  "added": [NAME, ...], "removed": [...], "changed": [...]}`, or `{"reloaded": false,
  "errors": [ONE LINE, ...], "jobs": N}` when the file was refused (the daemon keeps its
  N jobs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

VERSION = 1
VERSIONS = (1,)
COMMANDS = ("ps", "trigger", "kill", "pause", "resume", "reload", "follow", "backfill")
CODES = (
    "bad_request",
    "unknown_command",
    "version",
    "forbidden",
    "refused",
    "not_found",
    "internal",
    "busy",
)
STREAMS = ("stdout", "stderr")
MAX_LINE = 64 * 1024  # bytes of a request line, its newline included
MAX_NOTE = 500  # characters of a pause's note (crond status shows it whole)
_MAX_NAME = 1024  # characters of a job's name or a run id as a kill's target
_ON_BEHALF = re.compile(r"web:[A-Za-z0-9_.@-]{1,64}")  # a user of `crond web` (docs/web.md)


class ControlError(Exception):
    """A request the daemon answers with `{"ok": false}`: `code` (one of `CODES`) and
    `message`, one sentence for the person at the command line."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Request:
    cmd: str
    args: dict[str, Any]
    # `"for": "web:USER"`: the person a program that steers for people (`crond web`)
    # acts for; logged as who did it, beside the program's own uid and pid.
    on_behalf: str | None = None


def encode(message: dict[str, Any]) -> bytes:
    """One line of the protocol. Raises TypeError/ValueError for what JSON cannot say."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def request_line(cmd: str, args: dict[str, Any], on_behalf: str | None = None) -> bytes:
    line = {"v": VERSION, "cmd": cmd, "args": args}
    return encode(line if on_behalf is None else {**line, "for": on_behalf})


def ok(result: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "result": result}


def error(code: str, message: str) -> dict[str, Any]:
    reply: dict[str, Any] = {"ok": False, "error": message, "code": code}
    if code == "version":
        reply["versions"] = list(VERSIONS)
    return reply


def stream(name: str, line: str) -> dict[str, Any]:
    return {"stream": name, "line": line}


def parse_request(line: bytes) -> Request:
    """The request in `line` (without or with its newline), its args checked for the
    command. Raises ControlError (bad_request, version, unknown_command)."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        raise ControlError("bad_request", "the request is not one line of JSON") from None
    if not isinstance(data, dict):
        raise ControlError("bad_request", "the request is not a JSON object")
    version = data.get("v")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ControlError("bad_request", 'the request has no version ("v": 1)')
    if version not in VERSIONS:
        speaks = ", ".join(map(str, VERSIONS))
        raise ControlError(
            "version", f"this crond speaks version {speaks} of the protocol, not {version}"
        )
    cmd, args = data.get("cmd"), data.get("args", {})
    if not isinstance(cmd, str):
        raise ControlError("bad_request", 'the request has no "cmd"')
    if cmd not in COMMANDS:
        shown = cmd[:40] + ("…" if len(cmd) > 40 else "")
        raise ControlError(
            "unknown_command", f'no command "{shown}" (commands: {", ".join(COMMANDS)})'
        )
    if not isinstance(args, dict):
        raise ControlError("bad_request", '"args" is not a JSON object')
    on_behalf = data.get("for")
    if on_behalf is not None and not (
        isinstance(on_behalf, str) and _ON_BEHALF.fullmatch(on_behalf)
    ):
        raise ControlError("bad_request", '"for" is not web:USER')
    return Request(cmd, _CHECKS[cmd](args), on_behalf)


def _ps(_args: dict[str, Any]) -> dict[str, Any]:
    return {}


def _trigger(args: dict[str, Any]) -> dict[str, Any]:
    flags = {"wait": args.get("wait", False), "chain": args.get("chain", True)}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise ControlError("bad_request", f'trigger: "{key}" is not true or false')
    no_chain = {} if flags["chain"] else {"chain": False}  # (the default goes unsaid)
    return {"job": _name(args, "job", "trigger"), "wait": flags["wait"], **no_chain}


def _kill(args: dict[str, Any]) -> dict[str, Any]:
    return {"target": _name(args, "target", "kill")}


def _follow(args: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": _name(args, "run_id", "follow")}


def _backfill(args: dict[str, Any]) -> dict[str, Any]:
    wait = args.get("wait", False)
    if not isinstance(wait, bool):
        raise ControlError("bad_request", 'backfill: "wait" is not true or false')
    for key in ("from", "to"):
        value = args.get(key)
        if not (isinstance(value, str) and _is_instant(value)):
            raise ControlError(
                "bad_request", f'backfill: "{key}" is not an ISO-8601 instant with offset'
            )
    return {
        "job": _name(args, "job", "backfill"),
        "from": args["from"],
        "to": args["to"],
        "wait": wait,
    }


def _pause(args: dict[str, Any]) -> dict[str, Any]:
    until, note = args.get("until"), args.get("note")
    if until is not None and not (isinstance(until, str) and _is_instant(until)):
        raise ControlError("bad_request", 'pause: "until" is not an ISO-8601 instant with offset')
    if note is not None and not (isinstance(note, str) and len(note) <= MAX_NOTE):
        raise ControlError("bad_request", f'pause: "note" is not a text of at most {MAX_NOTE}')
    if note is not None and not _encodable(note):
        raise ControlError("bad_request", 'pause: "note" holds a character UTF-8 cannot carry')
    return {**_selection(args, "pause"), "until": until, "note": note}


def _resume(args: dict[str, Any]) -> dict[str, Any]:
    return _selection(args, "resume")


def _name(args: dict[str, Any], key: str, cmd: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not _is_name(value):
        raise ControlError("bad_request", f'{cmd}: "{key}" is not a name')
    return value


def _is_name(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= _MAX_NAME


def _selection(args: dict[str, Any], cmd: str) -> dict[str, Any]:
    """Exactly one of `"jobs": [NAME, ...]` (not empty) and `"all": true`."""
    jobs, every = args.get("jobs"), args.get("all", False)
    if every is True and jobs is None:
        return {"all": True}
    if every is False and isinstance(jobs, list) and jobs and all(map(_is_name, jobs)):
        return {"jobs": list(dict.fromkeys(jobs))}
    raise ControlError("bad_request", f'{cmd}: give either "jobs" (a list of names) or "all": true')


def _is_instant(text: str) -> bool:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).tzinfo is not None
    except ValueError:
        return False


_CHECKS = {
    "ps": _ps,
    "trigger": _trigger,
    "kill": _kill,
    "pause": _pause,
    "resume": _resume,
    "reload": _ps,  # no args either
    "follow": _follow,
    "backfill": _backfill,
}


# An instant a request may give: one crond can store and show (a pause for longer than
# that is one `until resumed`).
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_LATEST = datetime(2200, 1, 1, tzinfo=UTC)


def parse_instant(value: object) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        raise ControlError("bad_request", f"{value!r} is not an ISO-8601 instant") from None
    if when.tzinfo is None:
        raise ControlError("bad_request", f"{value!r} has no UTC offset")
    try:
        utc = when.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not _EARLIEST <= utc <= _LATEST:
        raise ControlError("bad_request", f"{value!r} is not an instant between now and 2200")
    return utc


def _encodable(text: str) -> bool:
    """Whether `text` is valid Unicode (no lone surrogate, which JSON lets through)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
