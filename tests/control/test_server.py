"""crond.control.server and client: a real server on a Unix socket in tmp_path, in the
test's own asyncio loop, with a small test handler; real clients (raw sockets, the
module's own sync client in a thread, and child processes running as another user).
Each test checks at its end that nothing was raised into the loop and that every
connection's task is gone."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import pwd
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import CapturingLogger

from crond.control import client, protocol, server
from crond.control.callers import Caller
from crond.control.protocol import ControlError
from crond.control.server import ClientGone, Send
from crond.control.socketfile import SocketRefused

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to be another user)")


@dataclass
class Handler:
    """Answers by command: ps echoes who asked; trigger streams `args.job` lines (the
    job's name is a count) then its result; kill raises ControlError; pause raises a
    bug; resume waits for `release` (counting those waiting)."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    sent: int = 0

    async def handle(
        self, cmd: str, args: dict[str, Any], caller: Caller, send: Send
    ) -> dict[str, Any]:
        self.calls.append((cmd, args))
        if cmd == "ps":
            return protocol.ok({"runs": [], "by": caller.by()})
        if cmd == "trigger":
            return await self._trigger(args, send)
        if cmd == "kill":
            raise ControlError("not_found", f"no job named {args['target']}")
        if cmd == "pause":
            raise RuntimeError("a bug")
        self.waiting += 1
        await self.release.wait()
        return {"resumed": []}  # no "ok": taken as the result

    async def _trigger(self, args: dict[str, Any], send: Send) -> dict[str, Any]:
        count = int(args["job"]) if args["job"].isdigit() else 2
        try:
            for i in range(count):
                await send(protocol.stream("stdout" if i % 2 == 0 else "stderr", f"line {i}"))
                self.sent += 1
        except ClientGone:
            self.gone.set()
            raise
        return protocol.ok({"run_id": "r1", "outcome": "success", "exit_code": 0})


@dataclass
class Served:
    path: Path
    handler: Handler
    log: CapturingLogger
    control: server.ControlServer

    def events(self, name: str) -> list[dict[str, Any]]:
        return [c.kwargs for c in self.log.calls if c.kwargs.get("event") == name]


def capturing() -> tuple[Any, CapturingLogger]:
    cap = CapturingLogger()
    log = structlog.wrap_logger(
        cap,
        processors=[],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
    )
    return log, cap


@asynccontextmanager
async def serving(path: Path, **options: Any) -> AsyncIterator[Served]:
    loop = asyncio.get_running_loop()
    raised: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: raised.append(context))
    handler = Handler()
    log, cap = capturing()
    baseline = len(asyncio.all_tasks())
    control = await server.serve(path, handler, log=log, **options)
    try:
        yield Served(path, handler, cap, control)
    finally:
        handler.release.set()
        await control.aclose()
        deadline = time.monotonic() + 5
        while len(asyncio.all_tasks()) > baseline and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert len(asyncio.all_tasks()) == baseline
        assert raised == []


async def exchange(path: Path, data: bytes) -> list[dict[str, Any]]:
    """Send `data` raw and the end of the stream, read every line until the server closes."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(data)
    await writer.drain()
    writer.write_eof()
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return [json.loads(line) for line in raw.splitlines()]


async def ask(path: Path, cmd: str, args: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return await asyncio.to_thread(lambda: list(client.request(path, cmd, args or {})))


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "run" / "crond.sock"


# --- replies ---------------------------------------------------------------------------


async def test_each_reply_shape(sock: Path) -> None:
    async with serving(sock) as s:
        (ps,) = await ask(sock, "ps")
        me = {"uid": os.getuid(), "user": pwd.getpwuid(os.getuid()).pw_name, "pid": os.getpid()}
        assert ps == {"ok": True, "result": {"runs": [], "by": me}}
        (killed,) = await ask(sock, "kill", {"target": "nightly"})
        assert killed == {"ok": False, "error": "no job named nightly", "code": "not_found"}
        s.handler.release.set()
        (resumed,) = await ask(sock, "resume", {"all": True})
        assert resumed == {"ok": True, "result": {"resumed": []}}
        assert [c[0] for c in s.handler.calls] == ["ps", "kill", "resume"]
        assert [e["cmd"] for e in s.events("control.request")] == ["ps", "kill", "resume"]
        assert s.events("control.request")[0]["by"]["pid"] == os.getpid()


async def test_streaming_lines_then_final(sock: Path) -> None:
    async with serving(sock):
        replies = await ask(sock, "trigger", {"job": "3", "wait": True})
        assert replies == [
            {"stream": "stdout", "line": "line 0"},
            {"stream": "stderr", "line": "line 1"},
            {"stream": "stdout", "line": "line 2"},
            {"ok": True, "result": {"run_id": "r1", "outcome": "success", "exit_code": 0}},
        ]


async def test_unknown_command_and_version(sock: Path) -> None:
    async with serving(sock) as s:
        (unknown,) = await exchange(sock, b'{"v": 1, "cmd": "reboot", "args": {}}\n')
        assert unknown["code"] == "unknown_command"
        assert "reboot" in unknown["error"]
        assert "trigger" in unknown["error"]
        (version,) = await exchange(sock, b'{"v": 2, "cmd": "ps", "args": {}}\n')
        assert version["ok"] is False
        assert version["code"] == "version"
        assert version["versions"] == [1]
        assert s.handler.calls == []


@pytest.mark.parametrize(
    "line",
    [
        b"not json\n",
        b"[1, 2]\n",
        b'{"cmd": "ps"}\n',
        b'{"v": 1, "cmd": "ps", "args": []}\n',
        b'{"v": 1, "cmd": "trigger", "args": {}}\n',
        b'{"v": 1, "cmd": "trigger", "args": {"job": "a", "wait": "yes"}}\n',
        b'{"v": 1, "cmd": "pause", "args": {"jobs": [], "until": null}}\n',
        b'{"v": 1, "cmd": "pause", "args": {"all": true, "jobs": ["a"]}}\n',
        b'{"v": 1, "cmd": "pause", "args": {"all": true, "until": "tomorrow"}}\n',
        b'{"v": 1, "cmd": "pause", "args": {"all": true, "until": "2026-01-01T00:00:00"}}\n',
        b'{"v": 1, "cmd": "resume", "args": {"jobs": ["a", 3]}}\n',
        b'{"v": 1, "cmd": "kill", "args": {"target": ""}}\n',
        b"[" * 100_000 + b"\n",  # deeper than JSON's decoder goes, and too long
    ],
)
async def test_bad_requests(sock: Path, line: bytes) -> None:
    async with serving(sock) as s:
        (reply,) = await exchange(sock, line)
        assert reply["ok"] is False
        assert reply["code"] == "bad_request"
        assert s.handler.calls == []
        (ps,) = await ask(sock, "ps")  # and it goes on serving
        assert ps["ok"] is True


async def test_args_are_checked_and_given_whole(sock: Path) -> None:
    async with serving(sock) as s:
        line = protocol.request_line(
            "pause", {"jobs": ["a", "b", "a"], "until": "2026-03-08T00:00:00Z", "note": "x"}
        )
        (reply,) = await exchange(sock, line)
        assert reply["code"] == "internal"  # the test handler's pause is a bug
        assert s.handler.calls == [
            ("pause", {"jobs": ["a", "b"], "until": "2026-03-08T00:00:00Z", "note": "x"})
        ]


async def test_oversized_line(sock: Path) -> None:
    async with serving(sock) as s:
        line = protocol.request_line("kill", {"target": "x" * protocol.MAX_LINE})
        (reply,) = await exchange(sock, line)
        assert reply == {
            "ok": False,
            "error": f"the request is longer than {protocol.MAX_LINE} bytes",
            "code": "bad_request",
        }
        assert s.handler.calls == []
        fits = protocol.request_line("kill", {"target": "x" * 1000})
        (reply,) = await exchange(sock, fits)
        assert reply["code"] == "not_found"


async def test_a_last_line_without_newline_is_a_request(sock: Path) -> None:
    async with serving(sock):
        (reply,) = await exchange(sock, protocol.request_line("ps", {}).rstrip(b"\n"))
        assert reply["ok"] is True


@pytest.mark.parametrize("read_timeout", [0.2, 0.6])
async def test_silent_client_is_closed_after_the_deadline(sock: Path, read_timeout: float) -> None:
    async with serving(sock, read_timeout=read_timeout):
        reader, writer = await asyncio.open_unix_connection(str(sock))
        began = time.monotonic()
        writer.write(b'{"v": 1, "cmd"')  # half a request, then silence
        data = await asyncio.wait_for(reader.read(), 5)
        elapsed = time.monotonic() - began
        writer.close()
        assert data == b""  # closed without a word
        assert read_timeout * 0.9 <= elapsed < read_timeout + 1.0


def flood(path: Path) -> tuple[int, bytes]:
    """Send 64 KiB at a time, never a newline, until the server stops taking them (5 s
    at most): (bytes sent, what the server answered)."""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(str(path))
        conn.settimeout(5)
        sent = 0
        with contextlib.suppress(OSError):  # cut off (or timed out): that is the point
            while True:
                sent += conn.send(b"x" * 65536)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := conn.recv(65536):
                answer += chunk
        return sent, answer


async def test_a_line_without_end_is_refused_once_past_the_bound(sock: Path) -> None:
    async with serving(sock) as s:
        began = time.monotonic()
        sent, answer = await asyncio.to_thread(flood, sock)
        (reply,) = [json.loads(line) for line in answer.splitlines()]
        assert reply["code"] == "bad_request"
        assert reply["error"] == f"the request is longer than {protocol.MAX_LINE} bytes"
        assert sent < 4 << 20  # read to its bound, not to the client's end
        assert time.monotonic() - began < 4  # refused, not timed out
        assert s.handler.calls == []


async def test_a_request_dripped_a_byte_at_a_time_is_closed_at_the_deadline(sock: Path) -> None:
    async with serving(sock, read_timeout=0.4) as s:
        reader, writer = await asyncio.open_unix_connection(str(sock))
        began = time.monotonic()
        with contextlib.suppress(ConnectionError):
            for byte in itertools.cycle(b'{"v": 1, "cmd": "ps", "args": {}} '):  # no newline
                if reader.at_eof():
                    break
                assert time.monotonic() - began < 5, "still open after 5 s"
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.02)  # the drip's pace (the client's, not a wait)
        waited = time.monotonic() - began
        writer.close()
        assert 0.35 <= waited < 3, waited
        assert s.handler.calls == []


async def test_max_connections(sock: Path) -> None:
    async with serving(sock, max_connections=2) as s:
        held = [asyncio.create_task(ask(sock, "resume", {"all": True})) for _ in range(2)]
        deadline = time.monotonic() + 5
        while s.handler.waiting < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert s.handler.waiting == 2
        # The third: answered `busy` (both connections carry a request) and closed.
        assert await ask(sock, "ps") == [
            {
                "ok": False,
                "code": "busy",
                "error": "crond is busy: all 2 control connections are in use; try again",
            }
        ]
        s.handler.release.set()
        for replies in await asyncio.gather(*held):
            assert replies == [{"ok": True, "result": {"resumed": []}}]
        (ps,) = await ask(sock, "ps")  # room again
        assert ps["ok"] is True


async def test_a_newcomer_drops_the_oldest_connection_without_a_request(sock: Path) -> None:
    async with serving(sock, max_connections=4, read_timeout=30) as s:
        idle = [await asyncio.open_unix_connection(str(sock)) for _ in range(3)]
        idle[2][1].write(b'{"v": 1, "cmd"')  # half a line
        held = asyncio.create_task(ask(sock, "resume", {"all": True}))
        deadline = time.monotonic() + 5
        while s.handler.waiting < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        for i in range(3):  # all 4 taken: each ps drops the oldest idle one, without a word
            (ps,) = await ask(sock, "ps")
            assert ps["ok"] is True
            assert await asyncio.wait_for(idle[i][0].read(), 5) == b""
            idle.append(await asyncio.open_unix_connection(str(sock)))  # all taken again
        assert not held.done()  # the one with a request is never dropped
        s.handler.release.set()
        assert await held == [{"ok": True, "result": {"resumed": []}}]
        for _, writer in idle:
            writer.close()


async def test_handler_raising_answers_internal_and_serving_goes_on(sock: Path) -> None:
    async with serving(sock) as s:
        (reply,) = await ask(sock, "pause", {"all": True})
        assert reply == {
            "ok": False,
            "error": "crond failed to answer (its log has control.failed)",
            "code": "internal",
        }
        (failed,) = s.events("control.failed")
        assert failed["error"] == "RuntimeError"
        assert failed["cmd"] == "pause"
        (ps,) = await ask(sock, "ps")
        assert ps["ok"] is True


async def test_a_client_that_stops_reading_is_dropped(sock: Path) -> None:
    async with serving(sock, write_timeout=0.3) as s:
        reader, writer = await asyncio.open_unix_connection(str(sock))
        writer.write(protocol.request_line("trigger", {"job": "100000000", "wait": True}))
        await writer.drain()
        began = time.monotonic()
        await asyncio.wait_for(s.handler.gone.wait(), 5)  # send raised ClientGone
        assert time.monotonic() - began < 3
        assert 0 < s.handler.sent < 1_000_000  # bounded by the socket's buffers
        (ps,) = await ask(sock, "ps")  # the loop was never blocked
        assert ps["ok"] is True
        writer.close()
        del reader


async def test_a_client_gone_mid_stream(sock: Path) -> None:
    async with serving(sock) as s:
        reader, writer = await asyncio.open_unix_connection(str(sock))
        writer.write(protocol.request_line("trigger", {"job": "100000000", "wait": True}))
        await reader.readline()
        writer.transport.abort()
        await asyncio.wait_for(s.handler.gone.wait(), 5)
        assert s.events("control.connection_failed") == []


def fd_count() -> int:
    return sum(1 for _ in Path("/proc/self/fd").iterdir())


async def test_a_thousand_requests_and_no_fd_growth(sock: Path) -> None:
    async with serving(sock) as s:
        await ask(sock, "ps")  # warm: the executor's thread, the first connection's
        before = fd_count()

        def many() -> list[bool]:
            return [list(client.request(sock, "ps", {}))[-1]["ok"] for _ in range(1000)]

        assert await asyncio.to_thread(many) == [True] * 1000
        assert fd_count() == before
        assert len(s.events("control.request")) == 1001


# --- the socket file -------------------------------------------------------------------


async def test_socket_mode_and_owner(sock: Path) -> None:
    async with serving(sock):
        st = sock.lstat()
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o660
        assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid())
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700  # made, as the store's
    assert not sock.exists()  # removed at aclose


async def test_a_planted_symlink_is_refused(sock: Path, tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me")
    sock.parent.mkdir()
    sock.symlink_to(target)
    log, _ = capturing()
    with pytest.raises(SocketRefused, match="a symbolic link at that path, not a socket"):
        await server.serve(sock, Handler(), log=log)
    assert sock.is_symlink()
    assert target.read_text() == "keep me"


async def test_a_regular_file_is_refused(sock: Path) -> None:
    sock.parent.mkdir()
    sock.write_text("not a socket")
    log, _ = capturing()
    with pytest.raises(SocketRefused, match=f"{sock}: there is a regular file"):
        await server.serve(sock, Handler(), log=log)
    assert sock.read_text() == "not a socket"


async def test_a_stale_socket_is_replaced_and_a_live_one_refused(sock: Path) -> None:
    sock.parent.mkdir()
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(sock))  # a dead daemon's: bound, nobody listening
    dead.close()
    async with serving(sock):
        (ps,) = await ask(sock, "ps")
        assert ps["ok"] is True
        log, _ = capturing()
        with pytest.raises(SocketRefused, match="another crond is listening"):
            await server.serve(sock, Handler(), log=log)
        (ps,) = await ask(sock, "ps")  # the live one is untouched
        assert ps["ok"] is True


async def test_a_socket_not_its_own_is_left_at_close(sock: Path) -> None:
    async with serving(sock):
        sock.unlink()
        other = socket.socket(socket.AF_UNIX)
        other.bind(str(sock))
    assert sock.exists()  # not the one it made: not removed
    other.close()


def test_socket_path(tmp_path: Path) -> None:
    from crond.control import where  # noqa: PLC0415

    assert where.resolve(None, str(tmp_path), None) == tmp_path / "crond.sock"
    assert where.resolve(None, None, str(tmp_path / "s")) == tmp_path / "s" / "crond.sock"
    assert where.resolve("/run/c.sock", str(tmp_path), None) == Path("/run/c.sock")
    assert where.resolve("none", None, None) is None
    state = Path(os.environ["STATE_DIRECTORY"])
    assert where.resolve(None, None, None) == state / "crond.sock"
    assert where.resolve(None, "none", None) == state / "crond.sock"  # no store: default place
    assert where.hint(b"jobs: {}\n") == (None, None)
    assert where.hint(b"daemon:\n  control_socket: /x.sock\n  state_dir: /s\njobs: {}\n") == (
        "/x.sock",
        "/s",
    )
    assert where.hint(b"daemon:\n  control_socket: [1]\n") is None
    assert where.hint(b"daemon:\n  state_dir: *nope\n") is None


# --- another user ----------------------------------------------------------------------


@contextmanager
def open_dir() -> Iterator[Path]:
    """A directory another user can pass through (tmp_path is root's 0700), root's."""
    with tempfile.TemporaryDirectory(prefix="crond-control-") as name:
        Path(name).chmod(0o755)
        yield Path(name)


def nobody_python() -> tuple[list[str], dict[str, str]]:
    """A Python another user may run, with crond and its packages on its path: the test's
    own interpreter may be in root's home (0700), so the system's of the same version."""
    here = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = Path("/usr/bin") / here
    if not system.exists():
        pytest.skip(f"no /usr/bin/{here} for another user to run")
    root = Path(__file__).resolve().parents[2]
    paths = [str(root), *(p for p in sys.path if p.endswith("site-packages"))]
    env = {"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"}
    probe = subprocess.run(
        [str(system), "-c", "import crond.control.client, click"],
        env=env,
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        capture_output=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:  # a checkout in a private directory (CI's clone is 0700)
        pytest.skip("this checkout's crond cannot be run by uid 65534")
    return [str(system)], env


def as_nobody(code: str) -> subprocess.CompletedProcess[str]:
    python, env = nobody_python()
    return subprocess.run(
        [*python, "-c", textwrap.dedent(code)],
        env=env,
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


ASK_AS_NOBODY = """
    import json, sys
    from pathlib import Path
    from crond.control import client
    try:
        print(json.dumps(list(client.request(Path(sys.argv[1]), "ps", {}))))
    except client.ClientError as exc:
        print(type(exc).__name__, exc)
"""


@as_root
async def test_another_user_is_denied_by_the_mode() -> None:
    with open_dir() as directory:
        sock = directory / "crond.sock"
        async with serving(sock) as s:
            code = ASK_AS_NOBODY.replace("sys.argv[1]", repr(str(sock)))
            done = await asyncio.to_thread(as_nobody, code)
            assert done.stdout.strip() == (
                f"Denied permission denied connecting to {sock}: only root may steer this "
                "crond; to let a group in, see docs/control.md 'Letting operators use it'"
            ), done.stderr
            assert s.handler.calls == []


@as_root
async def test_another_user_is_forbidden_by_the_server_too() -> None:
    with open_dir() as directory:
        sock = directory / "crond.sock"
        async with serving(sock) as s:
            sock.chmod(0o666)  # a mode gone wrong: the credentials still keep nobody out
            code = ASK_AS_NOBODY.replace("sys.argv[1]", repr(str(sock)))
            done = await asyncio.to_thread(as_nobody, code)
            (reply,) = json.loads(done.stdout)
            assert reply == {
                "ok": False,
                "error": "uid 65534 (nobody) may not steer this crond",
                "code": "forbidden",
            }
            assert s.handler.calls == []
            (refused,) = s.events("control.refused")
            assert refused["by"]["uid"] == NOBODY
            assert refused["by"]["user"] == "nobody"
            assert refused["cmd"] == "ps"


@as_root
async def test_a_member_of_the_sockets_group_is_served() -> None:
    with open_dir() as directory:
        sock = directory / "crond.sock"
        async with serving(sock) as s:
            os.chown(sock, 0, NOBODY)  # the socket's group: nobody's (nogroup)
            code = ASK_AS_NOBODY.replace("sys.argv[1]", repr(str(sock)))
            done = await asyncio.to_thread(as_nobody, code)
            (reply,) = json.loads(done.stdout)
            assert reply["ok"] is True, done.stdout
            assert reply["result"]["by"]["uid"] == NOBODY
            assert s.events("control.refused") == []
