"""The daemon's end of the control socket: a Unix socket on the daemon's own asyncio
loop, through which `crond ps`, `trigger`, `kill`, `pause` and `resume` steer it. What
each command does is the daemon's (a `Handler`); this module is the door: who may come
in, and that nobody can hold it open, flood it or crash it. The protocol is in
crond/control/protocol.py.

crond runs as root, so the socket is made with care (docs/operations.md, "Security"):

- its directory is reached as crond/ownership.py reaches the state store's (as root,
  every directory on the way is one only root can change), held open, and the socket is
  created, checked and removed relative to that descriptor: no link planted on the way
  or at the path is ever followed;
- at the path, a socket no daemon answers on (a dead one's) is replaced; a live one, or
  anything that is not a socket (a file, a link), is refused with a message that says so;
- it is bound under a umask that makes it no more open than 0660, then made 0660: the
  daemon's user and group may connect, nobody else can;
- each connection's credentials (SO_PEERCRED) are checked again: root, the daemon's own
  user and members of the socket's group (the caller's groups read from
  /proc/PID/status as well as its primary group) are served; anyone else is answered
  `forbidden` and logged as `control.refused`.

Everything a client can make it do is bounded: a request line of at most 64 KiB, sent
within `read_timeout` of the connection (else closed without a word); at most
`max_connections` at once (more are closed at once); a client that does not take its
replies within `write_timeout` is cut off, and the handler's next `send` raises
`ClientGone` rather than wait. A handler that raises anything but ControlError is
answered `internal` and logged as `control.failed`; nothing a client sends raises into
the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import pwd
import socket
import stat
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from crond import ownership
from crond.control import protocol, where
from crond.control.protocol import ControlError

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

    from crond.config.loaded import LoadedConfig

__all__ = [
    "Caller",
    "ClientGone",
    "ControlError",
    "ControlServer",
    "Handler",
    "Send",
    "SocketRefused",
    "serve",
    "socket_path",
]

MODE = 0o660
READ_TIMEOUT = 5.0
WRITE_TIMEOUT = 10.0
MAX_CONNECTIONS = 16
_UMASK = 0o117  # never more open than 0660, even for the instant after bind()
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_MAX_STATUS = 64 * 1024  # bytes of /proc/PID/status read: it is about 1.5 KB
_UNIX_PATH_MAX = 107  # sun_path, less its terminating NUL


class ClientGone(Exception):  # noqa: N818  (a fact about the caller, not a failure)
    """`send` to a caller that is gone or did not take its replies within the write
    timeout: stop sending; the run goes on."""


class SocketRefused(Exception):  # noqa: N818  (a verdict to show, like FileRefused)
    """The socket cannot be made at that path; the message says why and what to do."""


@dataclass(frozen=True)
class Caller:
    """Who is on the other end (SO_PEERCRED, taken at connect)."""

    uid: int
    gid: int
    pid: int
    user: str | None  # from pwd; None when the uid has no name

    def by(self) -> dict[str, object]:
        """For the events that say who did what."""
        return {"uid": self.uid, "user": self.user, "pid": self.pid}


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
    SocketRefused (the message names the path)."""
    directory, name = _open_parent(path)
    try:
        sock, made = _bind(path, directory, name)
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
        _unlink_if(directory, name, made)
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
        _unlink_if(self._doors.directory, self._doors.name, self._doors.made)
        os.close(self._doors.directory)


# --- making the socket ---------------------------------------------------------------------


def _open_parent(path: Path) -> tuple[int, str]:
    """An O_PATH descriptor of the socket's directory (made 0700 when missing; as root,
    a directory only root can change) and the socket's name in it."""
    parent, name = path.parent, path.name
    if not name or name in (".", ".."):
        raise SocketRefused(f"{path}: not a file name for a socket")
    with contextlib.suppress(FileExistsError, FileNotFoundError):
        parent.mkdir(mode=0o700)  # one level, as the state store's own directory
    try:
        directory = ownership.open_directory(parent)
    except OSError as exc:
        raise SocketRefused(f"control socket {path}: {exc.strerror or exc}") from None
    if len(_via(directory, name).encode()) > _UNIX_PATH_MAX:
        os.close(directory)
        raise SocketRefused(f"control socket {path}: the name {name!r} is too long for a socket")
    return directory, name


def _via(directory: int, name: str) -> str:
    """A path to `name` in the held directory that does not go through the directory's
    path again (which someone may have changed since it was checked)."""
    return f"/proc/self/fd/{directory}/{name}"


def _bind(path: Path, directory: int, name: str) -> tuple[socket.socket, os.stat_result]:
    """The listening socket, bound at `name`, 0660; and its stat, to know it later."""
    _clear(path, directory, name)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        old = os.umask(_UMASK)
        try:
            sock.bind(_via(directory, name))
        finally:
            os.umask(old)
        made = os.stat(name, dir_fd=directory, follow_symlinks=False)
        os.chmod(name, MODE, dir_fd=directory)
        sock.listen(64)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise SocketRefused(f"control socket {path}: {exc.strerror or exc}") from None
    except BaseException:
        sock.close()
        raise
    return sock, made


def _clear(path: Path, directory: int, name: str) -> None:
    """Nothing at `name`, or a dead daemon's socket (removed). Raises SocketRefused."""
    try:
        st = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketRefused(
            f"control socket {path}: there is {_kind(st.st_mode)} at that path, not a socket, "
            "and crond will not replace it (remove it, or set daemon.control_socket)"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        probe.settimeout(1.0)
        probe.connect(_via(directory, name))
    except ConnectionRefusedError:  # nobody listens: a dead daemon's
        os.unlink(name, dir_fd=directory)
        return
    except OSError as exc:
        raise SocketRefused(f"control socket {path}: {exc.strerror or exc}") from None
    finally:
        probe.close()
    raise SocketRefused(
        f"control socket {path}: another crond is listening on it (give each daemon its own "
        "daemon.control_socket or state_dir)"
    )


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "something"


def _unlink_if(directory: int, name: str, made: os.stat_result) -> None:
    """Remove the socket at `name` if it is still the one this server made."""
    with contextlib.suppress(OSError):
        st = os.stat(name, dir_fd=directory, follow_symlinks=False)
        if (st.st_dev, st.st_ino) == (made.st_dev, made.st_ino):
            os.unlink(name, dir_fd=directory)


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

    async def connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection, from accept to close. Never raises (but CancelledError)."""
        if len(self.tasks) >= self.max_connections:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None  # a connection is served in a task of its own
        self.tasks.add(task)
        reply = _Reply(writer, self.write_timeout)
        try:
            await self._serve(reader, reply)
        except (ClientGone, asyncio.CancelledError):
            # Cancelled: the server is closing. Ending normally rather than cancelled
            # keeps asyncio's own callback on this task (streams.py) from raising.
            pass
        except Exception as exc:  # noqa: BLE001  # a connection's trouble stays with it
            self.log.warning("control.connection_failed", error=type(exc).__name__)
        finally:
            self.tasks.discard(task)
            reply.abort()

    async def _serve(self, reader: asyncio.StreamReader, reply: _Reply) -> None:
        try:
            async with asyncio.timeout(self.read_timeout):
                line = await _read_line(reader)
        except TimeoutError:
            return  # a silent client: closed without a word
        except ControlError as exc:
            await reply.final(protocol.error(exc.code, exc.message))
            return
        if line is None:
            return
        caller = await _caller(reply.writer)
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
        return caller.gid == group or group in _groups(caller.pid)


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


async def _caller(writer: asyncio.StreamWriter) -> Caller:
    sock = writer.get_extra_info("socket")
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    pid, uid, gid = _PEERCRED.unpack(raw)
    return Caller(uid=uid, gid=gid, pid=pid, user=await _user_name_of(uid))


# NSS may ask a network service (LDAP, sssd) that hangs: user names are looked up in a
# thread of their own (never the default executor, which a reload's read of the file
# needs), for 2 s at most, and remembered a minute.
_NAMES: concurrent.futures.ThreadPoolExecutor | None = None
_NAMES_SEEN: dict[int, tuple[float, str | None]] = {}
_NAME_TTL_S = 60.0


async def _user_name_of(uid: int) -> str | None:
    global _NAMES  # noqa: PLW0603  (one lookup thread for the process, made when first needed)
    now = time.monotonic()
    seen = _NAMES_SEEN.get(uid)
    if seen is not None and now - seen[0] < _NAME_TTL_S:
        return seen[1]
    if _NAMES is None:
        _NAMES = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="crond-nss")
    try:
        looked_up = asyncio.get_running_loop().run_in_executor(_NAMES, _user_name, uid)
        user = await asyncio.wait_for(looked_up, 2.0)
    except TimeoutError:
        return None  # not remembered: the next caller tries again
    if len(_NAMES_SEEN) >= 256:
        _NAMES_SEEN.clear()
    _NAMES_SEEN[uid] = (now, user)
    return user


def _user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _groups(pid: int) -> frozenset[int]:
    """The supplementary groups of process `pid` (none when it cannot be read: gone)."""
    try:
        with Path(f"/proc/{pid}/status").open("rb") as f:
            text = f.read(_MAX_STATUS)
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(b"Groups:"):
            return frozenset(int(g) for g in line[7:].split() if g.isdigit())
    return frozenset()


async def _until_eof(reader: asyncio.StreamReader) -> None:
    """Returns when the caller closes its side (or its connection breaks). A caller sends
    nothing after its request: what it might send is read and dropped (bounded)."""
    with contextlib.suppress(OSError):
        while await reader.read(4096):
            pass
