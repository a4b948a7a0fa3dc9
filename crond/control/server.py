"""The daemon's end of the control socket: a Unix socket on the daemon's own asyncio
loop, through which `crond ps`, `trigger`, `kill`, `pause` and `resume` steer it. What
each command does is the daemon's (a `Handler`); this module is the door: who may come
in, and that nobody can hold it open, flood it or crash it. The protocol is in
crond/control/protocol.py.

crond runs as root, so who may come in is checked twice (docs/operations.md, "Security"):
the socket's file is made 0660 in a directory only root can change, without following
anything planted on the way (crond/control/socketfile.py); and each connection's
credentials (crond/control/callers.py) are checked again: root, the daemon's own user and
members of the socket's group (the caller's groups read from /proc/PID/status as well as
its primary group) are served; anyone else is answered `forbidden` and logged as
`control.refused`.

Everything a client can make it do is bounded: a request line of at most 64 KiB, sent
within `read_timeout` of the connection (else closed without a word); at most
`max_connections` at once: a newcomer then drops the oldest connection that has not
sent its request line (idle clients cannot lock the commands out), or, when every one
has, is answered `busy` and closed; a client that does not take its
replies within `write_timeout` is cut off, and the handler's next `send` raises
`ClientGone` rather than wait. A handler that raises anything but ControlError is
answered `internal` and logged as `control.failed`; nothing a client sends raises into
the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from crond.control import callers, protocol, socketfile, where
from crond.control.callers import Caller
from crond.control.protocol import ControlError

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from crond.config.loaded import LoadedConfig

__all__ = [
    "ClientGone",
    "ControlError",
    "ControlServer",
    "Handler",
    "Send",
    "serve",
    "socket_path",
]

READ_TIMEOUT = 5.0
WRITE_TIMEOUT = 10.0
MAX_CONNECTIONS = 16


class ClientGone(Exception):  # noqa: N818  (a fact about the caller, not a failure)
    """`send` to a caller that is gone or did not take its replies within the write
    timeout: stop sending; the run goes on."""


Send = Callable[[dict[str, Any]], Awaitable[None]]


class Handler(Protocol):
    async def handle(
        self, cmd: str, args: dict[str, Any], caller: Caller, send: Send
    ) -> dict[str, Any]:
        """The final reply (`protocol.ok(result)`; a dict without "ok" is taken as the
        result). May raise ControlError; `send` (stream lines) may raise ClientGone."""
        ...


def socket_path(cfg: LoadedConfig, state_dir_flag: str | None) -> Path | None:
    """Where the daemon listens and the commands connect; None: off (crond/control/where.py)."""
    daemon = cfg.daemon
    return where.resolve(getattr(daemon, "control_socket", None), state_dir_flag, daemon.state_dir)


async def serve(
    path: Path,
    handler: Handler,
    *,
    log: FilteringBoundLogger,
    max_connections: int = MAX_CONNECTIONS,
    read_timeout: float = READ_TIMEOUT,
    write_timeout: float = WRITE_TIMEOUT,
) -> ControlServer:
    """Make the socket at `path` and serve `handler` on it until `aclose`. Raises
    socketfile.SocketRefused (the message names the path)."""
    directory, name = socketfile.open_parent(path)
    try:
        sock, made = socketfile.bind(path, directory, name)
    except BaseException:
        os.close(directory)
        raise
    doors = _Doors(handler, log, max_connections, read_timeout, write_timeout, made, directory)
    doors.name = name
    try:
        server = await asyncio.start_unix_server(
            doors.connected, sock=sock, limit=protocol.MAX_LINE
        )
    except BaseException:
        sock.close()
        socketfile.unlink_if(directory, name, made)
        os.close(directory)
        raise
    return ControlServer(server, doors, path)


class ControlServer:
    """The listening socket. `aclose` stops it: open connections are cut (a `trigger
    --wait` sees the end of the stream), and the socket file it made is removed."""

    def __init__(self, server: asyncio.Server, doors: _Doors, path: Path) -> None:
        self._server = server
        self._doors = doors
        self.path = path
        self._closed = False

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._server.close()
        tasks = list(self._doors.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()
        socketfile.unlink_if(self._doors.directory, self._doors.name, self._doors.made)
        os.close(self._doors.directory)


# --- serving -------------------------------------------------------------------------------


class _Doors:
    def __init__(  # noqa: PLR0917  (one caller, in this module)
        self,
        handler: Handler,
        log: FilteringBoundLogger,
        max_connections: int,
        read_timeout: float,
        write_timeout: float,
        made: os.stat_result,
        directory: int,
    ) -> None:
        self.handler = handler
        self.log = log
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.made = made
        self.directory = directory
        self.name = ""
        self.tasks: set[asyncio.Task[None]] = set()
        # Those that have not sent their request line yet, oldest first.
        self.reading: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    async def connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection, from accept to close. Never raises (but CancelledError)."""
        if len(self.tasks) >= self.max_connections and not self._drop_oldest_reading():
            busy = f"crond is busy: all {self.max_connections} control connections are in use"
            writer.write(protocol.encode(protocol.error("busy", busy + "; try again")))
            writer.close()  # the line is sent, then the connection closed
            return
        task = asyncio.current_task()
        assert task is not None  # a connection is served in a task of its own
        self.tasks.add(task)
        self.reading[task] = writer
        reply = _Reply(writer, self.write_timeout)
        try:
            await self._serve(reader, reply, task)
        except (ClientGone, asyncio.CancelledError):
            # Cancelled: dropped for a newcomer, or the server is closing. Ending normally
            # rather than cancelled keeps asyncio's own callback on this task (streams.py)
            # from raising.
            pass
        except Exception as exc:  # noqa: BLE001  # a connection's trouble stays with it
            self.log.warning("control.connection_failed", error=type(exc).__name__)
        finally:
            self.tasks.discard(task)
            self.reading.pop(task, None)
            reply.abort()

    def _drop_oldest_reading(self) -> bool:
        """Make room: the oldest connection that has not sent its request line is cut off
        (it would be at its deadline anyway). False when every one has sent it."""
        if not self.reading:
            return False
        task, writer = next(iter(self.reading.items()))
        del self.reading[task]
        self.tasks.discard(task)
        writer.transport.abort()
        task.cancel()
        return True

    async def _serve(
        self, reader: asyncio.StreamReader, reply: _Reply, task: asyncio.Task[None]
    ) -> None:
        try:
            async with asyncio.timeout(self.read_timeout):
                line = await _read_line(reader)
            self.reading.pop(task, None)  # its line is in: no longer the one to drop
        except TimeoutError:
            return  # a silent client: closed without a word
        except ControlError as exc:
            await reply.final(protocol.error(exc.code, exc.message))
            return
        if line is None:
            return
        caller = await callers.caller_of(reply.writer)
        try:
            request = protocol.parse_request(line)
        except ControlError as exc:
            await reply.final(protocol.error(exc.code, exc.message))
            return
        if not self._allowed(caller):
            self.log.warning("control.refused", cmd=request.cmd, by=caller.by())
            who = f"uid {caller.uid}" + (f" ({caller.user})" if caller.user else "")
            await reply.final(protocol.error("forbidden", f"{who} may not steer this crond"))
            return
        self.log.debug("control.request", cmd=request.cmd, by=caller.by())
        # A caller that hangs up while its answer is worked out (Ctrl-C on `trigger --wait`
        # of a run that prints nothing) gives its connection back at once, not when the
        # run ends: its end of file cancels the answer (the run itself goes on).
        answering = asyncio.ensure_future(self._answer(request, caller, reply))
        hung_up = asyncio.ensure_future(_until_eof(reader))
        try:
            await asyncio.wait({answering, hung_up}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hung_up.cancel()
        if not answering.done():
            answering.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await answering
            raise ClientGone
        await reply.final(answering.result())

    async def _answer(
        self, request: protocol.Request, caller: Caller, reply: _Reply
    ) -> dict[str, Any]:
        try:
            if request.on_behalf is not None:
                caller = dataclasses.replace(caller, on_behalf=request.on_behalf)
            answer = await self.handler.handle(request.cmd, request.args, caller, reply.send)
            return answer if "ok" in answer else protocol.ok(answer)
        except ControlError as exc:
            return protocol.error(exc.code, exc.message)
        except ClientGone:
            raise
        except Exception as exc:  # noqa: BLE001  # a handler's bug answers `internal`
            self.log.error(
                "control.failed", cmd=request.cmd, by=caller.by(), error=type(exc).__name__
            )
            return protocol.error("internal", "crond failed to answer (its log has control.failed)")

    def _allowed(self, caller: Caller) -> bool:
        if caller.uid in (0, os.geteuid()):
            return True
        try:
            group = os.stat(self.name, dir_fd=self.directory, follow_symlinks=False).st_gid
        except OSError:
            group = self.made.st_gid
        return caller.gid == group or group in callers.groups(caller.pid)


class _Reply:
    """The writing half of a connection, bounded by the write timeout."""

    def __init__(self, writer: asyncio.StreamWriter, write_timeout: float) -> None:
        self.writer = writer
        self.write_timeout = write_timeout
        self.gone = False

    async def send(self, message: dict[str, Any]) -> None:
        """One line to the caller; ClientGone when it is gone or does not read."""
        if self.gone:
            raise ClientGone
        data = protocol.encode(message)
        try:
            self.writer.write(data)
            async with asyncio.timeout(self.write_timeout):
                await self.writer.drain()
        except (TimeoutError, OSError):
            self.abort()
            raise ClientGone from None

    async def final(self, message: dict[str, Any]) -> None:
        try:
            data = protocol.encode(message)
        except (TypeError, ValueError):  # a result JSON cannot say: the handler's bug
            data = protocol.encode(protocol.error("internal", "crond could not write its answer"))
        with contextlib.suppress(ClientGone):
            if self.gone:
                return
            try:
                self.writer.write(data)
                async with asyncio.timeout(self.write_timeout):
                    await self.writer.drain()
                    self.writer.close()
                    await self.writer.wait_closed()
            except (TimeoutError, OSError):
                self.abort()

    def abort(self) -> None:
        self.gone = True
        self.writer.transport.abort()


async def _read_line(reader: asyncio.StreamReader) -> bytes | None:
    """The request line; None when the client closed without one. Raises ControlError
    (over MAX_LINE)."""
    too_long = ControlError("bad_request", f"the request is longer than {protocol.MAX_LINE} bytes")
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        line = exc.partial  # a last line without its newline is a line
    except asyncio.LimitOverrunError:
        raise too_long from None
    if len(line) > protocol.MAX_LINE:
        raise too_long
    return line if line.strip() else None


async def _until_eof(reader: asyncio.StreamReader) -> None:
    """Returns when the caller closes its side (or its connection breaks). A caller sends
    nothing after its request: what it might send is read and dropped (bounded)."""
    with contextlib.suppress(OSError):
        while await reader.read(4096):
            pass
