"""The reliability soak: run the real `crond` hard for a while, then check what must hold.

Shared by tests/e2e/test_soak.py (a few hundred runs, asserted) and bench/soak.py
(20,000 runs, printed). The daemon runs a mix of `every: 1s` jobs that succeed, fail
(with retries), time out (one ignoring SIGTERM), leave grandchildren behind (one
ignoring SIGTERM) and flood their output; the file is swapped between two versions that
add, remove and change jobs and reloaded with SIGHUP every few seconds; now and then the
daemon is frozen with SIGSTOP and thawed with SIGCONT. Every job prints `pid $$`, and
the grandchild jobs `gc PID`, so every process of every run is known by the end.

Checks (each a `Check`): every (job, slot) started at most once as attempt 1; every
started attempt has exactly one `job.finished`; no process of any run is left (the
tracked pids, and a scan of /proc for the soak's own environment marker); no zombie
child of the daemon outlives two samples; open descriptors and RSS flat (first vs last
quarter of the per-second samples, taken when most runs of a second are over); the
liveness file never stale while the daemon ran (outside the SIGSTOP windows, which are
caused on purpose); a clean exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tests.e2e.harness import CROND

HEARTBEAT_S = 0.5
MAX_AGE_S = 3 * HEARTBEAT_S + 1  # `crond health`'s default: three heartbeats plus 1 s
_PIDS = re.compile(r"\b(pid|gc) (\d+)\b")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Plan:
    """How hard and how long. `jobs` is the size of one group of the mix (x 9 kinds)."""

    runs: int  # stop once this many runs (attempt 1) started
    max_seconds: float
    jobs: int = 2
    reload_every: float = 3.0
    pause_every: float = 20.0
    pause_for: float = 2.0
    progress: bool = False  # print a line every 30 s


def schedule(variant: int, group: int) -> str:
    """The schedules file: the mix `group` times, plus jobs only in one variant and one
    job whose command differs between them."""
    kinds = {
        "ok": "{command: 'echo pid $$'}",
        "fail": "{command: 'echo pid $$; exit 3', retry: {attempts: 2, delay: 100ms}}",
        "slow": "{command: 'echo pid $$; exec sleep 5', timeout: 400ms, kill_after: 300ms}",
        "deaf": "{command: \"echo pid $$; trap '' TERM; sleep 5\", timeout: 400ms,"
        " kill_after: 300ms}",
        "gc": "{command: 'sleep 30 & echo gc $!; echo pid $$'}",
        "gcdeaf": "{command: \"(trap '' TERM; exec sleep 30) & echo gc $!; echo pid $$\","
        " kill_after: 300ms}",
        "floodwide": "{command: 'echo pid $$; head -c 3000000 /dev/zero | tr \"\\\\0\" x'}",
        "floodlines": "{command: 'echo pid $$; seq 1 3000', every: 2s}",
        "py": "{command: [sh, -c, 'echo pid $$; exit 0']}",
    }
    lines = ["daemon:", "  shutdown_timeout: 5s", "defaults:", "  every: 1s", "jobs:"]
    for i in range(group):
        lines += [f"  {kind}-{i}: {spec}" for kind, spec in kinds.items()]
    for i in range(group):
        lines.append(f"  only{variant}-{i}: {{command: 'echo pid $$; echo v{variant}'}}")
    lines.append(f"  changing: {{command: 'echo pid $$; echo variant {variant}'}}")
    return "\n".join(lines) + "\n"


@dataclass
class Record:
    """What the soak keeps of the daemon's log (not the lines themselves: a flood is
    megabytes) and of its samples."""

    starts: list[tuple[str, str, int, str]] = field(default_factory=list)  # job slot attempt id
    finished: Counter[tuple[str, int]] = field(default_factory=Counter)  # (run_id, attempt)
    outcomes: Counter[str] = field(default_factory=Counter)
    pids: set[int] = field(default_factory=set)
    events: Counter[str] = field(default_factory=Counter)
    runs: int = 0
    bad_lines: int = 0
    other: list[str] = field(default_factory=list)  # the first few lines that are not JSON
    fds: list[tuple[float, int]] = field(default_factory=list)
    rss: list[tuple[float, int]] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    zombies: dict[tuple[int, str], float] = field(default_factory=dict)  # first seen
    lasting_zombies: set[int] = field(default_factory=set)
    pauses: list[tuple[float, float]] = field(default_factory=list)  # monotonic windows
    liveness_samples: int = 0


class Soak:
    def __init__(self, work: Path, plan: Plan) -> None:
        self.work = work
        self.plan = plan
        self.marker = uuid.uuid4().hex
        self.record = Record()
        self.config = work / "schedules.yaml"
        self.liveness = work / "liveness.json"
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._started = threading.Event()  # daemon.started was logged
        self._paused_since: float | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.exit_code: int | None = None

    # --- running -----------------------------------------------------------------------

    def run(self) -> list[Check]:
        self._write(0)
        env = {
            **os.environ,
            "CROND_SOAK_MARK": self.marker,
            "STATE_DIRECTORY": str(self.work / "state"),  # the store on, as by default
        }
        self.proc = subprocess.Popen(
            [CROND, "run", str(self.config), "--log-format", "json",
             "--liveness-file", str(self.liveness), "--heartbeat", f"{HEARTBEAT_S * 1000:.0f}ms"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )  # fmt: skip
        reader = threading.Thread(target=self._read, daemon=True)
        sampler = threading.Thread(target=self._sample, daemon=True)
        reader.start()
        sampler.start()
        try:
            self._drive()
        finally:
            self._done.set()
            if self._paused_since is not None:
                self.proc.send_signal(signal.SIGCONT)
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.exit_code = self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.exit_code = self.proc.wait(10)
            sampler.join(10)
            reader.join(30)
            if self.proc.stderr is not None:
                self.proc.stderr.close()
        return self.checks()

    def _write(self, variant: int) -> None:
        tmp = self.config.with_suffix(".tmp")
        tmp.write_text(schedule(variant, self.plan.jobs))
        tmp.replace(self.config)

    def _wait_started(self, timeout: float = 30.0) -> bool:
        """Whether the daemon logged daemon.started (False: it exited or took `timeout`).
        Its signal handlers are set by then: a SIGHUP before would end it (the default
        action), which a busy machine's slow start must not turn into a failed soak."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while not self._started.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return False
        return True

    def _drive(self) -> None:
        assert self.proc is not None
        if not self._wait_started():
            return  # the checks say what is missing
        began = time.monotonic()
        next_reload = began + self.plan.reload_every
        next_pause = began + self.plan.pause_every
        next_note = began + 30
        variant = 0
        while self.record.runs < self.plan.runs:
            now = time.monotonic()
            if now - began > self.plan.max_seconds or self.proc.poll() is not None:
                return
            if self._paused_since is not None and now >= self._paused_since + self.plan.pause_for:
                self.proc.send_signal(signal.SIGCONT)
                with self._lock:
                    self.record.pauses.append((self._paused_since, time.monotonic()))
                    self._paused_since = None
            elif self._paused_since is None and now >= next_pause:
                with self._lock:
                    self._paused_since = time.monotonic()
                self.proc.send_signal(signal.SIGSTOP)
                next_pause = now + self.plan.pause_every
            elif self._paused_since is None and now >= next_reload:
                variant = 1 - variant
                self._write(variant)
                self.proc.send_signal(signal.SIGHUP)
                next_reload = now + self.plan.reload_every
            if self.plan.progress and now >= next_note:
                print(f"  {now - began:5.0f} s: {self.record.runs} runs", flush=True)
                next_note = now + 30
            time.sleep(0.05)

    def _read(self) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                event = json.loads(line)
                name = event["event"]
            except (ValueError, KeyError, TypeError):
                self.record.bad_lines += 1
                if len(self.record.other) < 3:
                    self.record.other.append(line[:200].decode(errors="replace"))
                continue
            self._take(name, event)

    def _take(self, name: str, event: dict[str, object]) -> None:
        rec = self.record
        rec.events[name] += 1
        if name == "daemon.started":
            self._started.set()
        elif name == "job.output":
            for _, pid in _PIDS.findall(str(event.get("line", ""))[:64]):
                rec.pids.add(int(pid))
        elif name == "job.started":
            attempt = int(str(event["attempt"]))
            rec.starts.append(
                (str(event["job"]), str(event["slot"]), attempt, str(event["run_id"]))
            )
            if isinstance(event.get("pid"), int):
                rec.pids.add(int(str(event["pid"])))
            if attempt == 1:
                rec.runs += 1
        elif name == "job.finished":
            rec.finished[(str(event["run_id"]), int(str(event["attempt"])))] += 1
            rec.outcomes[str(event["outcome"])] += 1

    def _sample(self) -> None:
        """Liveness every 0.2 s; descriptors, RSS and zombies once a second, at 0.9 s past
        the second, when most of that second's runs are over (so the counts compare)."""
        assert self.proc is not None
        pid = self.proc.pid
        next_second = time.time() // 1 + 1.9
        while not self._done.is_set():
            now = time.monotonic()
            self._sample_liveness(now)
            if time.time() >= next_second:
                next_second = time.time() // 1 + 1.9
                if not self._in_pause(now, 1.0):
                    with contextlib.suppress(OSError, ValueError):
                        fds = sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())
                        # Each attempt in flight holds two pipes and a pidfd: count the
                        # daemon's own descriptors, which a leak would make grow. (The
                        # log is read a little behind: the difference is an offset.)
                        running = len(self.record.starts) - self.record.finished.total()
                        self.record.fds.append((now, fds - 3 * running))
                        self.record.rss.append((now, _rss_kib(pid)))
                self._sample_zombies(pid, now)
            self._done.wait(min(0.2, max(0.0, next_second - time.time())))

    def _in_pause(self, now: float, slack: float) -> bool:
        with self._lock:
            if self._paused_since is not None:
                return True
            return any(a <= now <= b + slack for a, b in self.record.pauses)

    def _sample_liveness(self, now: float) -> None:
        try:
            payload = json.loads(self.liveness.read_text())
            updated = datetime.fromisoformat(str(payload["updated_at"]).replace("Z", "+00:00"))
        except (OSError, ValueError, KeyError):
            return  # not written yet, or mid-rename on an odd filesystem: next sample
        age = time.time() - updated.timestamp()
        # A window that ended less than MAX_AGE_S ago may still show its stale stamp.
        if self._in_pause(now, MAX_AGE_S) or self._done.is_set():
            return
        self.record.liveness_samples += 1
        if age > MAX_AGE_S:
            self.record.stale.append(f"{age:.2f}s old")

    def _sample_zombies(self, pid: int, now: float) -> None:
        if self._in_pause(now, 1.0):
            return  # a stopped daemon cannot reap: zombies then are expected
        seen = set()
        for child, start in _zombie_children(pid):
            key = (child, start)
            seen.add(key)
            first = self.record.zombies.setdefault(key, now)
            if now - first >= 2.0:
                self.record.lasting_zombies.add(child)
        for key in list(self.record.zombies):
            if key not in seen:
                del self.record.zombies[key]

    # --- checking ----------------------------------------------------------------------

    def checks(self) -> list[Check]:
        rec = self.record
        return [
            self._unique_slots(),
            self._one_finish(),
            self._leftovers(),
            Check(
                "no zombie child of the daemon lasted 2 s",
                not rec.lasting_zombies,
                f"lasting: {sorted(rec.lasting_zombies)[:10]}",
            ),
            _flat(
                "open descriptors flat (less 3 per attempt in flight)",
                [v for _, v in rec.fds],
                1.0,
                12,
                "",
            ),
            _flat("RSS flat (median of each quarter)", [v for _, v in rec.rss], 1.10, 4096, " KiB"),
            Check(
                "liveness file never stale (outside SIGSTOP windows)",
                not rec.stale and rec.liveness_samples > 0,
                f"{rec.liveness_samples} samples (max age {MAX_AGE_S:g} s), "
                f"{len(rec.stale)} stale: {rec.stale[:5]}",
            ),
            Check(
                "clean exit, every log line JSON",
                self.exit_code == 0 and rec.bad_lines == 0,
                f"exit status {self.exit_code}, {rec.bad_lines} other lines {rec.other}",
            ),
        ]

    def _unique_slots(self) -> Check:
        firsts = Counter(
            (job, slot) for job, slot, attempt, _ in self.record.starts if attempt == 1
        )
        twice = [key for key, n in firsts.items() if n > 1]
        return Check(
            "every (job, slot) started at most once",
            not twice,
            f"{len(firsts)} (job, slot) pairs; twice: {twice[:5]}",
        )

    def _one_finish(self) -> Check:
        started = Counter((run_id, attempt) for _, _, attempt, run_id in self.record.starts)
        finished = self.record.finished
        missing = [k for k in started if finished[k] == 0]
        extra = [k for k, n in finished.items() if n > 1 or k not in started]
        return Check(
            "every started attempt has exactly one job.finished",
            not missing and not extra,
            f"{len(started)} attempts; without finish: {missing[:5]}; extra: {extra[:5]}",
        )

    def _leftovers(self) -> Check:
        mark = f"CROND_SOAK_MARK={self.marker}".encode()
        left = sorted(p for p in _marked(mark) if self.proc is None or p != self.proc.pid)
        tracked = len(self.record.pids)
        return Check(
            "no process of any run left",
            not left and tracked > 0,
            f"{tracked} pids tracked; alive with the soak's marker: {left[:10]}",
        )

    def summary(self) -> str:
        rec = self.record
        pauses = len(rec.pauses)
        return (
            f"{rec.runs} runs, {len(rec.starts)} attempts, outcomes {dict(rec.outcomes)}, "
            f"{rec.events['config.reloaded']} reloads, {pauses} SIGSTOP/SIGCONT, "
            f"{rec.events['job.output_truncated']} truncated floods, "
            f"{rec.events['job.skipped']} skipped, {rec.events['job.missed']} missed"
        )


def _flat(name: str, values: list[int], factor: float, slack: int, unit: str) -> Check:
    """The last quarter's median within factor x the first quarter's median + slack."""
    if len(values) < 6:
        return Check(name, False, f"only {len(values)} samples")
    quarter = len(values) // 4
    first = statistics.median(values[:quarter])
    last = statistics.median(values[-quarter:])
    ok = last <= first * factor + slack
    return Check(
        name,
        ok,
        f"median of the first quarter {first:g}{unit}, of the last {last:g}{unit} "
        f"(allowed {first * factor + slack:g}{unit}; max {max(values)}{unit})",
    )


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError("no VmRSS")


def _zombie_children(pid: int) -> list[tuple[int, str]]:
    """(pid, start time) of the zombie children of `pid`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z" and int(fields[1]) == pid:
            found.append((int(entry.name), fields[19]))
    return found


def _marked(mark: bytes) -> list[int]:
    """Live (not zombie) processes whose environment holds `mark`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            if stat[stat.rindex(")") + 2] in "ZX":
                continue
            if mark in Path(entry.path, "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def report(checks: list[Check]) -> str:
    return "\n".join(f"  {'PASS' if c.ok else 'FAIL'}  {c.name}: {c.detail}" for c in checks)
