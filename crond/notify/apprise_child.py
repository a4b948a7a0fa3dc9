"""The process one Apprise send runs in: `python -m crond.notify.apprise_child`, started
by via_apprise.py (docs/operations.md, "Security").

Apprise's plugins read an endpoint's whole answer into memory: here that costs this
process only, whose address space is limited to `MEMORY_LIMIT` before Apprise is
imported. The URL, the title and the body come as one JSON object on stdin (never in
argv: a URL holds tokens, and argv is anyone's to read in `ps`); the verdict goes out as
one JSON object on the stdout it was given, `{"ok": true}` or `{"error": ..., "retry":
...}`, and nothing else can write there: fd 1 is /dev/null while Apprise runs. The
parent enforces the time limit (it kills this process group).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import warnings
from pathlib import Path
from typing import Any, Final

MEMORY_LIMIT: Final = 256 << 20  # RLIMIT_AS, bytes: Python + Apprise take about 60 MiB
INPUT_LIMIT: Final = 4 << 20  # bytes of stdin read (a body is far smaller: body.py)


def main() -> int:
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # print() from a plugin goes nowhere, not into the verdict
    verdict = _send(sys.stdin.buffer.read(INPUT_LIMIT))
    answer.write(json.dumps(verdict))
    answer.close()
    return 0


def _send(data: bytes) -> dict[str, Any]:
    try:
        job = json.loads(data)
        url, title, body = str(job["url"]), str(job["title"]), str(job["body"])
    except (ValueError, KeyError, TypeError):
        return {"error": "apprise: its process got no send to make", "retry": False}
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    try:
        apprise = _load()
    except ImportError:
        return {"error": "apprise is not installed (pip install 'crond[apprise]')", "retry": False}
    sender = apprise.Apprise()
    if not sender.add(url):
        return {"error": "apprise cannot use this URL", "retry": False}
    try:
        if sender.notify(body=body, title=title):
            return {"ok": True}
    except MemoryError:
        pass
    if _near_the_limit():  # Apprise turns a MemoryError into a plain failure: see why
        mib = MEMORY_LIMIT >> 20
        error = f"apprise: the send passed its {mib} MiB memory limit (the answer is too large)"
        return {"error": error, "retry": False}
    return {"error": "apprise reported a failure", "retry": True}


def _near_the_limit() -> bool:
    """Whether this process's address space grew past half its limit (a send takes
    about 60 MiB; an answer without end grows it until an allocation fails)."""
    with Path("/proc/self/status").open(encoding="ascii") as status:
        for line in status:
            if line.startswith("VmPeak:"):
                return int(line.split()[1]) * 1024 > MEMORY_LIMIT // 2
    return False


def _load() -> Any:
    """Apprise with its loggers silenced (they print URLs, with their tokens). Its
    plugins import modules Python deprecates (imghdr): their warnings are not crond's."""
    import logging  # noqa: PLC0415

    logging.disable(logging.CRITICAL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import apprise  # noqa: PLC0415  (optional: only in this process)
    return apprise


if __name__ == "__main__":
    sys.exit(main())
