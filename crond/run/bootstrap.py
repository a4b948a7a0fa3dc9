"""The source of the tiny program that runs a `python:` job in its child process.

The runner passes it to the job's interpreter with `-c`, followed by three arguments:
the `module:callable` reference, the JSON of `args` and the JSON of `kwargs`. It imports
nothing but the standard library, so it works in an application's own virtualenv that
has no crond installed, and it keeps to syntax every maintained Python 3 accepts.

What it does, which is the contract of a python job:

- `sys.path[0]` is the working directory (as with any `python -c`), so a module next to
  the job's `workdir` imports, like `python -m` would find it.
- stdout and stderr are line-buffered, so each printed line reaches the log when printed.
- The callable (a dotted path after the colon, e.g. `pkg.mod:Class.method`, works) is
  called with `args` and `kwargs`; an awaitable result (an `async def` callable) is run
  to completion with `asyncio.run`.
- Returning exits 0, whatever the value. `SystemExit` is honoured (`sys.exit(3)` exits 3).
  Any other exception, including a failing import, prints its traceback to stderr and
  exits 1.
"""

from __future__ import annotations

BOOTSTRAP = """\
import sys


def _crond_main():
    import asyncio
    import importlib
    import inspect
    import json
    import traceback

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):
            pass
    ref, args, kwargs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    module_name, _, attr_path = ref.partition(":")
    try:
        target = importlib.import_module(module_name)
        for attr in attr_path.split("."):
            target = getattr(target, attr)
        result = target(*args, **kwargs)
        if inspect.isawaitable(result):
            if not inspect.iscoroutine(result):
                result = _crond_await(result)
            asyncio.run(result)
    except Exception as exc:
        # Skip this bootstrap's own frame: the traceback starts in the job's code.
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        sys.stderr.flush()
        sys.exit(1)
    sys.exit(0)


async def _crond_await(awaitable):
    return await awaitable


_crond_main()
"""
