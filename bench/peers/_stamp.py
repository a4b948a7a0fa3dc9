"""Ready, for a peer that cannot say so: a `@reboot` job that writes its stamp."""

from __future__ import annotations

import time
from pathlib import Path

from common import Launched, NotReadyError, stamps


def wait_ready(launched: Launched, stamp_file: Path, timeout: float) -> Launched:
    """Set `ready_s` from the first stamp in `stamp_file`; stop and raise on timeout."""
    deadline = time.monotonic() + timeout
    while not (got := stamps(stamp_file)):
        if launched.proc.poll() is not None or time.monotonic() > deadline:
            status = launched.proc.poll()
            launched.stop(timeout=10)
            why = f"exited ({status})" if status is not None else f"not ready within {timeout:g} s"
            raise NotReadyError(why)
        time.sleep(0.005)
    launched.ready_s = got[0] - launched.started
    return launched
