"""One epoll for the descriptors of the jobs' processes: their output pipes (output.py)
and the pidfds that report their exits (process.py)."""

from __future__ import annotations

import asyncio
import select
from collections.abc import Callable


class Watch:
    """The descriptors of an event loop's children (pipes, pidfds) in one epoll of their
    own, which is the event loop's single reader. `add_reader` costs tens of µs of
    Python per descriptor, three per run: the burst of 1,000 runs of bench/bench_spawn.py
    took about 15 % longer with it. Here each is one `epoll_ctl`. The epoll exists while
    it watches something.
    """

    _of: dict[asyncio.AbstractEventLoop, Watch] = {}  # noqa: RUF012 -- one per live event loop

    def __init__(self, event_loop: asyncio.AbstractEventLoop) -> None:
        self.event_loop = event_loop
        self.epoll = select.epoll()
        self.callbacks: dict[int, Callable[[], object]] = {}
        event_loop.add_reader(self.epoll.fileno(), self._dispatch)

    @classmethod
    def add(cls, fd: int, callback: Callable[[], object]) -> None:
        """Call `callback` (on the running event loop) whenever `fd` is readable."""
        event_loop = asyncio.get_running_loop()
        watch = cls._of.get(event_loop) or cls._of.setdefault(event_loop, cls(event_loop))
        watch.epoll.register(fd, select.EPOLLIN)
        watch.callbacks[fd] = callback

    @classmethod
    def remove(cls, fd: int) -> None:
        watch = cls._of[asyncio.get_running_loop()]
        watch.epoll.unregister(fd)
        del watch.callbacks[fd]
        if not watch.callbacks:
            del cls._of[watch.event_loop]
            watch.event_loop.remove_reader(watch.epoll.fileno())
            watch.epoll.close()

    def _dispatch(self) -> None:
        for fd, _ in self.epoll.poll(0):
            callback = self.callbacks.get(fd)  # gone if an earlier callback removed it
            if callback is not None:
                callback()
