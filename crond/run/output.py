"""The output pump: a child's stdout/stderr pipes → one `job.output` event per line.

Memory stays bounded whatever a job prints: reads are at most `_CHUNK` bytes, a pending
line never grows past `LINE_LIMIT`, and after `RUN_LIMIT` bytes from one run (all its
attempts together) the rest is read and dropped, so the child never blocks on a full
pipe. The choices, for the docs:

- A line longer than `LINE_LIMIT` bytes is cut: its first 8 KiB are logged (ending on a
  whole UTF-8 character) and the rest of that line, up to its newline, is dropped.
- A line ends at `\\n`; the `\\n` and a `\\r` just before it are removed. A last line
  without a newline is logged when the stream ends.
- Bytes are decoded as UTF-8; invalid bytes become U+FFFD.
- Every byte read counts toward `RUN_LIMIT`, dropped ones too. The line pending when the
  limit is reached is logged as it stands, then one `job.output_truncated`.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Final

from structlog.typing import FilteringBoundLogger

from crond.run.watch import Watch

LINE_LIMIT: Final = 8 * 1024
RUN_LIMIT: Final = 1024 * 1024
TAIL_LINES: Final = 20
_CHUNK: Final = 64 * 1024
# The final drain after an attempt reads at most this many chunks, so that a process
# that escaped the job's group and keeps writing cannot hold the runner.
_FINAL_READS: Final = 64


class Budget:
    """The output allowance of one run, shared by the pumps of all its attempts. `log` is
    bound to the run's `job` and `run_id`."""

    def __init__(self, log: FilteringBoundLogger) -> None:
        self.log = log
        self.left = RUN_LIMIT
        self.pumps: list[Pump] = []
        # The current attempt's last lines, for the state store's history (bounded).
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        # Told each line as it is logged (stream, line): `crond trigger --wait` follows a
        # run's output this way. Each must be quick and never raise.
        self.listeners: list[Callable[[str, str], None]] = []

    def spend(self, size: int) -> None:
        """Count `size` bytes read; the first time the limit is exceeded, log the lines
        pending in every pump, then one `job.output_truncated`."""
        before = self.left
        self.left -= size
        if before >= 0 > self.left:
            for pump in self.pumps:
                pump.flush()
            self.log.warning("job.output_truncated")


class Pump:
    """Reads one non-blocking pipe whenever it is readable and logs its lines."""

    def __init__(self, fd: int, stream: str, budget: Budget) -> None:
        self.fd = fd
        self.stream = stream
        self.budget = budget
        self.pending = bytearray()
        self.cut = False  # the current line was cut: drop bytes until its newline
        os.set_blocking(fd, False)
        budget.pumps.append(self)
        Watch.add(fd, self._read)

    def _read(self) -> bool:
        """Read one chunk; return False when nothing more is available now or ever."""
        try:
            data = os.read(self.fd, _CHUNK)
        except BlockingIOError:
            return False
        except OSError:  # EIO and the like: treat as end of stream
            data = b""
        if not data:
            self.close()
            return False
        allowed = min(len(data), self.budget.left)
        if allowed > 0:
            self._feed(data if allowed == len(data) else data[:allowed])
        self.budget.spend(len(data))
        return True

    def _feed(self, data: bytes) -> None:
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                break
            self._take_line(data[start:newline], ended=True)
            start = newline + 1
        self._take_line(data[start:], ended=False)

    def _take_line(self, part: bytes, *, ended: bool) -> None:
        if self.cut:
            self.cut = not ended
            return
        if ended and not self.pending and len(part) <= LINE_LIMIT:  # the common case
            self._emit(part[:-1] if part.endswith(b"\r") else part)
            return
        self.pending += part
        if len(self.pending) > LINE_LIMIT:
            self._emit(_cut(self.pending))
            self.pending.clear()
            self.cut = not ended
        elif ended:
            if self.pending.endswith(b"\r"):
                del self.pending[-1]
            self._emit(bytes(self.pending))
            self.pending.clear()

    def _emit(self, line: bytes) -> None:
        text = line.decode("utf-8", errors="replace")
        self.budget.tail.append(text)
        self.budget.log.info("job.output", stream=self.stream, line=text)
        for listener in self.budget.listeners:
            listener(self.stream, text)

    def flush(self) -> None:
        """Log the pending partial line, if any."""
        if self.pending:
            self._emit(bytes(self.pending))
            self.pending.clear()

    def drain(self) -> None:
        """Read what is in the pipe now (bounded), log the last partial line, close."""
        for _ in range(_FINAL_READS):
            if self.fd < 0 or not self._read():
                break
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            Watch.remove(self.fd)
            os.close(self.fd)
            self.fd = -1
            self.flush()
            self.budget.pumps.remove(self)


def _cut(line: bytearray) -> bytes:
    """The first LINE_LIMIT bytes of `line`, not splitting a UTF-8 character."""
    end = LINE_LIMIT
    # Back up over continuation bytes (10xxxxxx) so the cut is on a character start.
    for _ in range(4):
        if line[end] & 0xC0 != 0x80:
            break
        end -= 1
    else:
        end = LINE_LIMIT
    return bytes(line[:end])
