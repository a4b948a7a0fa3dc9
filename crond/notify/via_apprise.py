"""An Apprise notifier: one of the services the optional `apprise` library reaches
(mail, Slack, Telegram, ... : `apprise:` URLs, docs/alerting.md).

Each send runs in a child process of its own (apprise_child.py), never in the daemon:
Apprise's plugins read an endpoint's whole answer into memory, and an answer without
end would grow the daemon until the kernel kills it. The child's address space is
limited (`apprise_child.MEMORY_LIMIT`), it is killed with its process group at the
try's deadline, its URL, title and body go on its stdin (never in argv, which `ps`
shows), and its verdict is read to `ANSWER_LIMIT` bytes (docs/operations.md,
"Security"). Its pids are the notifier commands' (command.py: the PID-1 reaper leaves
them to asyncio).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Final

import crond
from crond.notify import command
from crond.notify.errors import SendError

ANSWER_LIMIT: Final = 4096  # bytes of the child's verdict read


async def send(url: str, title: str, body: str, timeout: float) -> None:
    """Tell `url` through Apprise in a child process, killed at `timeout` seconds;
    raises SendError unless Apprise reports success."""
    job = json.dumps({"url": url, "title": title, "body": body}).encode()
    try:
        code, out = await command.run_child(
            _argv(), job, _env(), timeout, out_cap=ANSWER_LIMIT, cwd="/"
        )
    except TimeoutError:
        raise SendError(f"apprise: timed out after {timeout:g}s") from None
    except SendError as exc:  # it could not start
        raise SendError(f"apprise: {exc.error}") from None
    if len(out) > ANSWER_LIMIT:
        raise SendError(f"apprise: its process answered more than {ANSWER_LIMIT} bytes")
    try:
        verdict = json.loads(out)
    except ValueError:  # killed (its memory limit reached in C code?), or crashed
        ended = command.exit_text(code)
        raise SendError(f"apprise: its process ended ({ended}) without a verdict") from None
    if isinstance(verdict, dict) and verdict.get("ok") is True:
        return
    if isinstance(verdict, dict) and isinstance(verdict.get("error"), str):
        raise SendError(verdict["error"], retry=verdict.get("retry") is not False)
    raise SendError(f"apprise: its process answered no verdict ({command.exit_text(code)})")


def _argv() -> list[str]:
    # -P: the working directory (`/`) is not searched for modules.
    return [sys.executable, "-P", "-m", "crond.notify.apprise_child"]


def _env() -> dict[str, str]:
    """The daemon's environment (less its database settings), the crond it runs from
    first on the module path, and few malloc arenas: each reserves 64 MiB of address
    space, which counts against the child's limit."""
    env = command.notifier_environ()
    where = str(Path(crond.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = ":".join(p for p in (where, env.get("PYTHONPATH")) if p)
    env["MALLOC_ARENA_MAX"] = "2"
    return env
