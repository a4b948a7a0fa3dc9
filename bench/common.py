"""Shared by the bench scripts: the systems under test, /proc readings, statistics, output.

Every benchmark runs the same job on every system, `sh -c 'date +%s.%N >> FILE'`, and
takes the instant the job wrote as the start of the run. A *system* is crond or a peer
(bench/peers/): it is given a list of `JobDef`s, writes them in its own format, starts,
and reports when it is ready. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the bench scripts share the e2e tests' harness
    sys.path.insert(0, str(ROOT))

# The checkout's venv has the dev tools, and some of them (mutmut's textual) bring rich,
# which structlog imports when it can: ~4 MB of RSS a user's install does not have.
# CROND_BENCH_CROND names another `crond` (`make bench-peers` installs one as a user
# would, without extras, in bench/.peers/crond): the figures of memory are quoted from it.
CROND = os.environ.get("CROND_BENCH_CROND") or (
    shutil.which("crond", path=str(Path(sys.executable).parent)) or "crond"
)

# crond as installed: a wheel's modules are compiled to bytecode when pip installs them,
# and every start loads that. The editable install of a checkout has none until Python
# writes it, which PYTHONDONTWRITEBYTECODE=1 (set on some machines, this one among them)
# forbids: then every start compiles crond's ~20 modules again, ~0.1 s of a daemon's
# start and tens of ms of every command. The benches measure the installed case: the
# bytecode is written once here, and the processes they start may use it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
compileall.compile_dir(ROOT / "crond", quiet=1)
COMMAND = "date +%s.%N >> {out}"
PEERS_DIR = Path(os.environ.get("CROND_BENCH_PEERS_DIR", ROOT / "bench" / ".peers"))


# --- jobs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobDef:
    """One job, as every system can express it: a 5-field cron expression (or `@reboot`),
    or, for crond only, an `every` interval."""

    name: str
    command: str
    cron: str | None = None
    every: str | None = None


def stamp_jobs(count: int, out: Path, *, cron: str | None = None, every: str | None = None,
               prefix: str = "j") -> list[JobDef]:  # fmt: skip
    command = COMMAND.format(out=out)
    return [JobDef(f"{prefix}{i}", command, cron=cron, every=every) for i in range(count)]


def far_jobs(count: int, out: Path) -> list[JobDef]:
    """`count` daily-style jobs at varied times, none due for months: a file whose load and
    idle cost is measured, not its runs (the month is half a year from now)."""
    month = (datetime.now(UTC).month + 5) % 12 + 1
    command = COMMAND.format(out=out)
    return [
        JobDef(f"far-{i:05d}", command, cron=f"{i % 60} {i // 60 % 24} {1 + i % 28} {month} *")
        for i in range(count)
    ]


def stamps(path: Path) -> list[float]:
    """The instants the jobs wrote (a half-written last line is skipped)."""
    if not path.exists():
        return []
    values = []
    for word in path.read_text().split():
        with contextlib.suppress(ValueError):
            values.append(float(word))
    return values


def by_slot(values: Iterable[float], period: float) -> dict[float, list[float]]:
    """Each start belongs to the latest slot (a multiple of `period`) at or before it."""
    slots: dict[float, list[float]] = {}
    for t in values:
        slots.setdefault(t - t % period, []).append(t)
    return slots


# --- systems -----------------------------------------------------------------------------


@dataclass
class Launched:
    """A running system: its main process and how long it took to be ready."""

    name: str
    proc: subprocess.Popen[bytes]
    started: float  # time.time() just before the spawn
    ready_s: float | None  # seconds from `started` to ready; None: not observable
    cleanup: list[Callable[[], None]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 60.0) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
        finally:
            for step in reversed(self.cleanup):
                step()
            self.cleanup.clear()


class NotReadyError(Exception):
    """The system did not get ready in time (or exited)."""


class System(Protocol):
    name: str

    def missing(self) -> str | None:
        """Why this system cannot run here (not installed, not root), or None."""
        ...

    def launch(self, jobs: Sequence[JobDef], work: Path, ready_timeout: float) -> Launched:
        """Write `jobs` in this system's format under `work`, start it, wait until ready.
        Raises NotReadyError (after stopping it) when not ready within `ready_timeout`."""
        ...


class NotifySocket:
    """A datagram socket standing in for systemd's NOTIFY_SOCKET. Like systemd, it keeps
    reading after READY=1 (a thread drains it): a receiver that stops reading fills the
    socket's queue (net.unix.max_dgram_qlen, 10 here), and the sender's next send blocks."""

    def __init__(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.received: list[bytes] = []
        self._drain: threading.Thread | None = None

    def wait_for(self, state: bytes, deadline: float, proc: subprocess.Popen[bytes]) -> float:
        """time.time() when a datagram holding `state` arrived; then drains in a thread."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None:
                raise NotReadyError(f"no {state.decode()} (exit status {proc.poll()})")
            self.sock.settimeout(min(left, 0.5))
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            self.received.append(data)
            if state in data.split(b"\n"):
                seen = time.time()
                self._drain = threading.Thread(target=self._read_on, daemon=True)
                self._drain.start()
                return seen

    def _read_on(self) -> None:
        self.sock.settimeout(None)
        with contextlib.suppress(OSError):  # closed by close()
            while data := self.sock.recv(4096):
                self.received.append(data)

    def close(self) -> None:
        if self._drain:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)  # ends the drain's recv
        self.sock.close()
        if self._drain:
            self._drain.join(5)
        self.path.unlink(missing_ok=True)


def crond_yaml(jobs: Sequence[JobDef]) -> str:
    lines = ["jobs:"]
    for job in jobs:
        when = f"cron: {json.dumps(job.cron)}" if job.cron else f"every: {job.every}"
        lines.append(f"  {job.name}:\n    {when}\n    command: {json.dumps(job.command)}")
    return "\n".join(lines) + "\n"


class CrondSystem:
    """crond itself: `crond run FILE`, ready at READY=1 on a NOTIFY_SOCKET bound here."""

    name = "crond"

    def __init__(self, head: str = "", args: Sequence[str] = ()) -> None:
        self.head = head  # YAML put before the jobs (notifiers:, defaults:, daemon:)
        self.args = list(args)  # more `crond run` flags

    def missing(self) -> str | None:
        return None

    def launch(self, jobs: Sequence[JobDef], work: Path, ready_timeout: float) -> Launched:
        config = work / "crond.yaml"
        config.write_text(self.head + crond_yaml(jobs))
        notify = NotifySocket(work / "notify.sock")
        sink = (work / "crond.log").open("ab")
        # The state store on, as by default, in the run's own directory.
        env = {**os.environ, "NOTIFY_SOCKET": str(notify.path), "STATE_DIRECTORY": str(work)}
        started = time.time()
        proc = subprocess.Popen(
            [CROND, "run", str(config), "--log-format", "json", *self.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env,
        )
        launched = Launched(self.name, proc, started, None, [notify.close, sink.close])
        try:
            ready = notify.wait_for(b"READY=1", time.monotonic() + ready_timeout, proc)
        except NotReadyError:
            launched.stop()
            raise
        launched.ready_s = ready - started
        return launched


def systems(with_peers: bool) -> list[System]:
    found: list[System] = [CrondSystem()]
    if with_peers:
        from peers import peer_systems  # noqa: PLC0415  # only with --peers

        found += peer_systems()
    return found


def want_peers(args: argparse.Namespace) -> bool:
    return bool(args.peers) or _env_flag("CROND_BENCH_PEERS")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    p.add_argument(
        "--quick",
        action="store_true",
        default=_env_flag("CROND_BENCH_QUICK"),
        help="fewer samples, for development (CROND_BENCH_QUICK=1 does the same)",
    )
    p.add_argument(
        "--peers",
        action="store_true",
        help="also measure the installed peers (cron, yacron, APScheduler 3); "
        "CROND_BENCH_PEERS=1 does the same",
    )
    return p


def wait_boundaries(
    out: Path, after: float, period: float, count: int, expected: int, settle: float
) -> list[float]:
    """Wait for `count` slots (multiples of `period`) after `after`, each with `expected`
    starts, or `settle` seconds past the last one; return those slots."""
    first = after - after % period + period
    slots = [first + i * period for i in range(count)]
    deadline = slots[-1] + settle
    while time.time() < deadline:
        got = by_slot(stamps(out), period)
        if len(got.get(slots[-1], [])) >= expected:
            break
        time.sleep(0.25)
    return slots


# The CPU time (ms, user + system) the jobs of each `bare_loop` call needed, in order.
# Divided by the machine's cores, it is about the least time in which they can all have
# written (each job writes after most of its CPU: the exec of sh, then of date): a floor
# under "200 jobs due together", whatever schedules them.
BARE_JOB_CPU: list[float] = []


def bare_loop(out: Path, count: int) -> float:
    """The baseline spawner: `count` times `subprocess.Popen(["/bin/sh", "-c", CMD],
    start_new_session=True)` in a loop, then wait for all. ms from the first spawn to the
    last start (the last instant a job wrote). Appends the jobs' CPU to BARE_JOB_CPU."""
    out.unlink(missing_ok=True)
    command = COMMAND.format(out=out)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.time()
    procs = [
        subprocess.Popen(["/bin/sh", "-c", command], start_new_session=True) for _ in range(count)
    ]
    for proc in procs:
        proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    BARE_JOB_CPU.append(cpu * 1000)
    return (max(stamps(out)) - began) * 1000


def cpu_floor_row(since: int, count: int) -> None:
    """The floor row for the `bare_loop` calls since index `since`: their jobs' CPU over
    the machine's cores."""
    cores = os.cpu_count() or 1
    floors = [cpu / cores for cpu in BARE_JOB_CPU[since:]]
    if floors:
        row(f"  CPU floor: the {count} jobs' own CPU / {cores} cores", "", summary(floors),
            "(the writes come after most of it)")  # fmt: skip


@dataclass(frozen=True)
class Round:
    """One slot of a run: the lags (ms) of the starts seen for it, in order, and the
    baseline (ms) measured right after them, if any."""

    slot: float
    lags: list[float]
    baseline: float | None


def slot_rounds(
    system: System,
    make: Callable[[Path], list[JobDef]],
    period: float,
    count: int,
    work: Path,
    baseline: Callable[[], float] | None = None,
    on_stop: Callable[[Path], None] | None = None,
) -> list[Round]:
    """Start `system` with the jobs `make(stamp file)`, then for `count` slots after it is
    ready: wait for every job's start (at most until 2/3 of the period), a second more
    for the runs to end, then run `baseline` once. Stops the system, then calls
    `on_stop(work)` (to read its log); raises NotReadyError."""
    out = work / "stamps.txt"
    out.unlink(missing_ok=True)
    jobs = make(out)
    launched = system.launch(jobs, work, ready_timeout=300)
    rounds = []
    try:
        ready_at = launched.started + (launched.ready_s or 0) + 0.5
        slot = ready_at - ready_at % period + period
        for _ in range(count):
            deadline = slot + period * 2 / 3
            while time.time() < deadline:
                if len(by_slot(stamps(out), period).get(slot, [])) >= len(jobs):
                    break
                time.sleep(min(0.2, period / 10))
            time.sleep(min(1.0, period / 10))
            starts = sorted(by_slot(stamps(out), period).get(slot, []))
            base = baseline() if baseline else None
            rounds.append(Round(slot, [(t - slot) * 1000 for t in starts], base))
            slot += period
            while time.time() > slot - min(1.0, period / 10):  # too late for that one
                slot += period
    finally:
        launched.stop()
        if on_stop:
            on_stop(work)
    return rounds


def spawn_to_write(out: Path) -> float:
    """The floor under any start lag: ms from one bare Popen of the job to its write."""
    out.unlink(missing_ok=True)
    began = time.time()
    subprocess.Popen(["/bin/sh", "-c", COMMAND.format(out=out)]).wait()
    return (max(stamps(out), default=began) - began) * 1000


def own_lags(log: Path) -> list[float]:
    """crond's own `lag_ms` (slot to spawn returned) from the job.started events of a log."""
    lags = []
    with contextlib.suppress(OSError):
        for line in log.read_bytes().splitlines():
            if b'"job.started"' in line:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    lags.append(float(json.loads(line)["lag_ms"]))
    return lags


def log_event(path: Path, name: str, offset: int, timeout: float) -> tuple[float, int]:
    """Wait for the JSON event `name` in the log file `path` after byte `offset`:
    (time.time() when seen, the offset after its line). Polls every 2 ms."""
    needle = f'"event":"{name}"'.encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
        at = data.find(needle)
        if at >= 0:
            seen = time.time()
            end = data.find(b"\n", at)
            return seen, offset + (end + 1 if end >= 0 else len(data))
        time.sleep(0.002)
    raise NotReadyError(f"no {name} event within {timeout:g} s")


# --- /proc ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcSample:
    cpu_s: float  # user + system, all threads
    timeslices: int  # times scheduled onto a CPU (schedstat's third field), all threads
    switches: int  # voluntary + involuntary context switches, all threads
    rss_kib: int
    hwm_kib: int  # peak resident set


def sample(pid: int) -> ProcSample:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    slices = switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that just ended
            slices += int((task / "schedstat").read_text().split()[2])
            st = status_fields(task / "status")
            switches += int(st["voluntary_ctxt_switches"]) + int(st["nonvoluntary_ctxt_switches"])
    values = status_fields(Path(f"/proc/{pid}/status"))
    return ProcSample(cpu, slices, switches, int(values["VmRSS"]), int(values["VmHWM"]))


def status_fields(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(":")
        values[key] = (rest.split() or ["0"])[0]
    return values


# --- statistics and output -----------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def summary(values: Sequence[float], unit: str = "ms", p99: bool = False) -> str:
    if not values:
        return "no samples"
    digits = 1 if unit == "ms" and statistics.median(values) >= 10 else 2
    if unit == "s":
        digits = 3
    f = f"{{:.{digits}f}}"
    text = (
        f"median {f.format(statistics.median(values))} {unit}  "
        f"(min {f.format(min(values))}, max {f.format(max(values))}"
    )
    if p99:
        text += f", p99 {f.format(pct(values, 0.99))}"
    return text + f", n={len(values)})"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def ratio(ours: float, theirs: float) -> str:
    if theirs <= 0:
        return "n/a"
    r = ours / theirs
    return f"{r:.3f}x" if r < 0.1 else f"{r:.2f}x"


def row(label: str, system: str, text: str, note: str = "") -> None:
    print(f"  {label:<34} {system:<11} {text}{'   ' + note if note else ''}", flush=True)


def skipped(system: System, why: str) -> None:
    skipped_name(system.name, why)


def skipped_name(name: str, why: str) -> None:
    print(f"  {name}: skipped: {why}", flush=True)


def header(title: str) -> None:
    print(f"== {title}", flush=True)
    print(f"   {machine()}", flush=True)


def machine() -> str:
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{datetime.now(UTC):%Y-%m-%d %H:%MZ}, {os.cpu_count()} cpus ({model}), "
        f"Linux {platform.release()}, Python {platform.python_version()}, load {load}"
    )


def until_next_minute(lead: float) -> float:
    """Seconds from now to `lead` seconds before the next minute boundary (>= 0)."""
    now = time.time()
    return max(0.0, 60 - now % 60 - lead)
