"""The schedules file from disk to a validated Config, read once and safely.

Every command that reads FILE comes through here: the bytes are read by
`ownership.read_schedules_file` (as root: only a file root alone can change, through
one descriptor), decoded, and validated; their sha256 names exactly what was loaded.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from crond import config, ownership
from crond.problems import ConfigError, Problem

STDIN = Path("-")  # `crond validate -`: the file comes on standard input


def load(path: Path, *, enforce: bool = True) -> tuple[config.Config, str]:
    """The file's Config and the sha256 of the bytes validated. `enforce`: as root, the
    ownership rule (for the commands that run jobs). `-`: standard input, named
    <stdin> in messages. Raises ConfigError."""
    name = "<stdin>" if path == STDIN else str(path)
    try:
        raw = _stdin() if path == STDIN else ownership.read_schedules_file(path, enforce=enforce)
        text = raw.decode("utf-8")
    except ownership.FileRefused as exc:
        raise ConfigError([Problem(name, 0, 0, "", exc.message)]) from None
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 text (byte {exc.start})"
        raise ConfigError([Problem(name, 0, 0, "", message)]) from None
    return config.loads(text, name), hashlib.sha256(raw).hexdigest()


def _stdin() -> bytes:
    raw = sys.stdin.buffer.read(ownership.MAX_BYTES + 1)
    if len(raw) > ownership.MAX_BYTES:
        size = ownership.MAX_BYTES // (1024 * 1024)
        raise ownership.FileRefused(STDIN, f"too large (more than {size} MiB)")
    return raw
