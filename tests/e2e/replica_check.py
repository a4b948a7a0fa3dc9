"""The checks of a fault soak of replicas (bench/soak_replicas.py, and the short one of
tests/e2e/test_replica_faults.py): what must hold of several replicas of one file on
one PostgreSQL database while replicas die, freeze and lose the database (docs/replicas.md).

The truth of which runs happened is not crond's: every job of the soak writes its own
stamps, a line when it starts and one when it ends (`S|E JOB SLOT REPLICA PID RUN_ID
EPOCH`, see `stamp_command`), with the replica's name from its daemon's environment. The
replicas' JSON events (each tagged with the replica that logged it, `_replica`), the
tables crond_attempts and crond_claims, the liveness files sampled by the soak and the
soak's own record of each fault (its kind, its target, when it began and ended) are the
rest of the input. `check` is pure: the synthetic test feeds it made-up data.

The rules (`Finding`s; each counts its violations, gives up to 5 examples, and splits the
count by the fault under way, or just over, when it happened):

- `started_once`: each slot of a job started at most once (a `replicas: all` job: once
  per replica), by the jobs' stamps and by first attempts in crond_attempts;
- `none_vanished`: every slot between the first instant all replicas were up and the
  last checked one was started, or told: `job.skipped`, `job.missed` (its range), or a
  run closed as lost. A `replicas: all` job's copies are counted per replica, outside
  the time that replica was killed (from 1 s before its SIGKILL, a copy it may have
  died with unclaimed, to 2 s after the restarted one is up);
- `no_false_lost`: no run told lost (`job.lost`, or an attempt closed as `lost`) while
  its replica was alive: not killed since the run started, and not frozen (SIGSTOP) for
  `replica_timeout` (a replica silent that long is taken for dead by design). Split into
  runs whose process was still running at that instant and runs that had ended;
- `skip_never_overlapped`: the runs of each `overlap: skip` job never overlapped, from
  their own stamps;
- `slots_in_order`: of one job (a `replicas: all` job: of one replica's copy), a slot
  never started after a newer slot had (docs/replicas.md, the database unreachable: a
  newer slot of a job makes the older waiting one missed);
- `heartbeat_fresh`: the liveness file never older than 2 x heartbeat while its replica
  ran and was not frozen by the soak (samples every 0.5 s);
- `no_false_skew`: no `cluster.clock_skew`: no clock is moved by the soak.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

EXAMPLES = 5
# A violation this long after a fault ended is still put down to it (its aftermath).
AFTERMATH_S = 10.0
# Margin after a killed replica is up again before its copies of a `replicas: all` job count.
RESTART_MARGIN_S = 2.0
# ... and before its SIGKILL: a copy due this little before may have died with it unclaimed.
KILL_MARGIN_S = 1.0
# Margin after SIGCONT before a thawed replica's liveness file must be fresh again.
THAW_MARGIN_S = 1.0


def stamp_command(path: str, seconds: float) -> str:
    """The shell command of a soak job: a start stamp, `seconds` of sleep, an end stamp.
    SOAK_REPLICA is set in each replica's environment by the soak."""
    line = f'$CROND_JOB $CROND_SLOT $SOAK_REPLICA $$ $CROND_RUN_ID $(date +%s.%N)" >> {path}'
    return f'echo "S {line}; sleep {seconds}; echo "E {line}'


def epoch(text: str) -> float:
    """An ISO-8601 instant (a `Z` suffix too) as seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class Stamp:
    kind: str  # "S" or "E"
    job: str
    slot: float
    replica: str
    pid: int
    run_id: str
    at: float


def parse_stamps(text: str) -> list[Stamp]:
    """The stamps file's lines (a line cut short by a kill is ignored)."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 7 or parts[0] not in ("S", "E"):
            continue
        try:
            out.append(
                Stamp(parts[0], parts[1], epoch(parts[2]), parts[3], int(parts[4]), parts[5],
                      float(parts[6]))
            )  # fmt: skip
        except ValueError:
            continue
    return out


@dataclass(frozen=True)
class JobSpec:
    name: str
    period_s: float
    overlap: str  # skip, allow, replace
    replicas: str = "one"  # or "all"


@dataclass(frozen=True)
class Fault:
    """One fault the soak made: `target` is a replica's name, or "" for the database."""

    kind: str
    target: str
    start: float
    end: float


@dataclass(frozen=True)
class Attempt:
    """What the checks read of a row of crond_attempts."""

    job: str
    slot: float
    attempt: int
    replica: str
    run_id: str
    outcome: str | None
    started: float
    finished: float | None


@dataclass(frozen=True)
class Sample:
    """A liveness file read by the soak: its age then (None: missing or unreadable)."""

    replica: str
    at: float
    age: float | None


@dataclass
class Observed:
    jobs: list[JobSpec]
    replicas: list[str]
    heartbeat_s: float
    replica_timeout_s: float
    span: tuple[float, float]  # first instant all were up; last slot instant checked
    stamps: list[Stamp] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # each with `_replica`
    attempts: list[Attempt] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)


@dataclass
class Finding:
    rule: str
    what: str
    count: int = 0
    examples: list[str] = field(default_factory=list)
    by_fault: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.count == 0

    def add(self, example: str, fault: str) -> None:
        self.count += 1
        self.by_fault[fault] += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(example)


def fault_at(faults: Sequence[Fault], at: float) -> str:
    """The kind of the fault under way at `at` (or ended at most AFTERMATH_S before);
    "none" when there was none."""
    best: Fault | None = None
    for fault in faults:
        if fault.start <= at <= fault.end + AFTERMATH_S and (
            best is None or fault.start > best.start
        ):
            best = fault
    return best.kind if best is not None else "none"


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at).astimezone().strftime("%H:%M:%S.%f")[:-3]


def _windows(
    faults: Iterable[Fault], kind: str, replica: str, after: float
) -> list[tuple[float, float]]:
    return [(f.start, f.end + after) for f in faults if f.kind == kind and f.target == replica]


def _inside(at: float, windows: Iterable[tuple[float, float]]) -> bool:
    return any(a <= at <= b for a, b in windows)


def _slots(start: float, end: float, period: float) -> list[float]:
    first = math.ceil(start / period) * period
    count = int((end - first) // period) + 1
    return [first + i * period for i in range(max(count, 0))]


# --- the rules --------------------------------------------------------------------------------


def started_once(obs: Observed) -> Finding:
    found = Finding("started_once", "slots started more than once (per replica: replicas all)")
    specs = {j.name: j for j in obs.jobs}
    starts: dict[tuple[str, float, str], list[Stamp]] = defaultdict(list)
    for s in obs.stamps:
        if s.kind == "S" and s.job in specs:
            copy = s.replica if specs[s.job].replicas == "all" else ""
            starts[(s.job, s.slot, copy)].append(s)
    for (job, slot, copy), runs in sorted(starts.items()):
        if len(runs) > 1:
            who = ", ".join(f"{r.replica} pid {r.pid}" for r in runs)
            found.add(f"stamps: {job} slot {_iso(slot)}{' copy ' + copy if copy else ''}: "
                      f"{len(runs)} starts ({who})", fault_at(obs.faults, slot))  # fmt: skip
    firsts: dict[tuple[str, float, str], list[Attempt]] = defaultdict(list)
    for a in obs.attempts:
        if a.attempt == 1 and a.job in specs:
            copy = a.replica if specs[a.job].replicas == "all" else ""
            firsts[(a.job, a.slot, copy)].append(a)
    for (job, slot, _copy), rows in sorted(firsts.items()):
        if len(rows) > 1:
            who = ", ".join(r.replica for r in rows)
            found.add(f"crond_attempts: {job} slot {_iso(slot)}: {len(rows)} first attempts "
                      f"({who})", fault_at(obs.faults, slot))  # fmt: skip
    return found


def _missed_ranges(events: Iterable[dict[str, Any]]) -> list[tuple[str, str, float, float, int]]:
    out = []
    for e in events:
        if e.get("event") == "job.missed":
            out.append((str(e.get("job")), str(e.get("_replica", "")), epoch(e["first_slot"]),
                        epoch(e["last_slot"]), int(e.get("count", 0))))  # fmt: skip
    return out


def none_vanished(obs: Observed) -> Finding:
    found = Finding("none_vanished", "slots neither started nor told (skipped, missed, lost)")
    start, end = obs.span
    told: set[tuple[str, float, str]] = set()  # (job, slot, replica) told by that replica
    for e in obs.events:
        if e.get("event") in ("job.skipped", "job.lost") and "slot" in e:
            told.add((str(e["job"]), epoch(e["slot"]), str(e.get("_replica", ""))))
    specs = {j.name: j for j in obs.jobs}
    bad_counts = 0
    for job, replica, first, last, count in _missed_ranges(obs.events):
        period = specs[job].period_s if job in specs else 1.0
        slots = _slots(first, last, period)
        if count != len(slots):
            bad_counts += 1
        for slot in slots:
            told.add((job, slot, replica))
    for a in obs.attempts:
        if a.outcome == "lost":
            told.add((a.job, a.slot, a.replica))
    started = {(s.job, s.slot, s.replica) for s in obs.stamps if s.kind == "S"}
    if bad_counts:
        found.notes.append(f"{bad_counts} job.missed whose count is not its range's slots")
    for spec in obs.jobs:
        for slot in _slots(start, end, spec.period_s):
            if spec.replicas == "all":
                for replica in obs.replicas:
                    down = _windows(obs.faults, "kill", replica, RESTART_MARGIN_S)
                    if _inside(slot + KILL_MARGIN_S, down) or _inside(slot, down):
                        continue
                    key = (spec.name, slot, replica)
                    if key not in started and key not in told:
                        found.add(f"{spec.name} slot {_iso(slot)} copy {replica}",
                                  fault_at(obs.faults, slot))  # fmt: skip
            else:
                if any((spec.name, slot, r) in started or (spec.name, slot, r) in told
                       for r in obs.replicas):  # fmt: skip
                    continue
                found.add(f"{spec.name} slot {_iso(slot)}", fault_at(obs.faults, slot))
    return found


def _lost_reports(obs: Observed) -> dict[str, tuple[float, str]]:
    """run_id -> (the first instant it was told lost, by what)."""
    lost: dict[str, tuple[float, str]] = {}
    for e in obs.events:
        if e.get("event") == "job.lost" and e.get("run_id"):
            at = epoch(e["timestamp"])
            rid = str(e["run_id"])
            if rid not in lost or at < lost[rid][0]:
                lost[rid] = (at, f"job.lost by {e.get('_replica')}")
    for a in obs.attempts:
        if a.outcome == "lost" and a.run_id not in lost:
            lost[a.run_id] = (a.finished if a.finished is not None else a.started, "attempt row")
    return lost


def no_false_lost(obs: Observed) -> Finding:
    found = Finding("no_false_lost", "runs told lost while their replica was alive")
    runs: dict[str, dict[str, Stamp]] = defaultdict(dict)
    for s in obs.stamps:
        runs[s.run_id][s.kind] = s
    running = ended = expected = unknown = 0
    for rid, (at, how) in sorted(_lost_reports(obs).items(), key=lambda kv: kv[1][0]):
        stamps = runs.get(rid, {})
        start = stamps.get("S")
        if start is None:
            unknown += 1  # claimed, never spawned (its replica died between): not a false loss
            continue
        replica = start.replica
        killed = any(
            f.kind == "kill" and f.target == replica and start.at <= f.start <= at
            for f in obs.faults
        )
        frozen = any(
            f.kind == "stop" and f.target == replica and f.start <= at
            and f.end - max(f.start, start.at) >= obs.replica_timeout_s
            for f in obs.faults
        )  # fmt: skip
        if killed or frozen:
            expected += 1
            continue
        end = stamps.get("E")
        still = end is None or end.at > at
        if still:
            running += 1
        else:
            ended += 1
        state = "still running" if still else f"ended {at - end.at:.1f}s before" if end else ""
        found.add(f"{start.job} slot {_iso(start.slot)} on {replica} (pid {start.pid}) told "
                  f"lost at {_iso(at)} ({how}), its process {state}",
                  fault_at(obs.faults, at))  # fmt: skip
    found.notes.append(
        f"false losses: {running} with the process still running, {ended} after it ended; "
        f"expected losses (replica killed, or frozen past replica_timeout): {expected}; "
        f"lost runs never stamped: {unknown}"
    )
    return found


def skip_never_overlapped(obs: Observed, end_of_soak: float | None = None) -> Finding:
    found = Finding("skip_never_overlapped", "runs of an overlap: skip job that overlapped")
    last = end_of_soak if end_of_soak is not None else math.inf
    for spec in obs.jobs:
        if spec.overlap != "skip":
            continue
        by_run: dict[str, dict[str, Stamp]] = defaultdict(dict)
        for s in obs.stamps:
            if s.job == spec.name:
                by_run[s.run_id][s.kind] = s
        spans = sorted(
            [
                (parts["S"].at, parts["E"].at if "E" in parts else last, parts["S"])
                for parts in by_run.values()
                if "S" in parts
            ],
            key=lambda span: (span[0], span[1]),
        )
        copies: dict[str, list[tuple[float, float, Stamp]]] = defaultdict(list)
        for span in spans:  # a `replicas: all` job: each replica's copy on its own
            copies[span[2].replica if spec.replicas == "all" else ""].append(span)
        for each in copies.values():
            reach = -math.inf
            holder: Stamp | None = None
            for began, ended, stamp in each:
                if began < reach and holder is not None:
                    found.add(f"{spec.name} slot {_iso(stamp.slot)} started on {stamp.replica} "
                              f"at {_iso(began)}, {reach - began:.2f}s before the run of slot "
                              f"{_iso(holder.slot)} on {holder.replica} ended",
                              fault_at(obs.faults, began))  # fmt: skip
                if ended > reach:
                    reach, holder = ended, stamp
    return found


def slots_in_order(obs: Observed) -> Finding:
    found = Finding("slots_in_order", "starts of an older slot after a newer one's")
    specs = {j.name: j for j in obs.jobs}
    starts: dict[tuple[str, str], list[Stamp]] = defaultdict(list)
    for s in obs.stamps:
        if s.kind == "S" and s.job in specs:
            starts[(s.job, s.replica if specs[s.job].replicas == "all" else "")].append(s)
    for runs in starts.values():
        newest: Stamp | None = None
        for s in sorted(runs, key=lambda r: r.at):
            if newest is not None and s.slot < newest.slot:
                found.add(f"{s.job} slot {_iso(s.slot)} started on {s.replica} at {_iso(s.at)}, "
                          f"after slot {_iso(newest.slot)} had on {newest.replica} at "
                          f"{_iso(newest.at)}", fault_at(obs.faults, s.at))  # fmt: skip
            if newest is None or s.slot > newest.slot:
                newest = s
    return found


def heartbeat_fresh(obs: Observed) -> Finding:
    limit = 2 * obs.heartbeat_s
    found = Finding("heartbeat_fresh", f"liveness samples older than {limit:g}s (2 x heartbeat)")
    worst: dict[str, float] = {}
    for s in obs.samples:
        if s.age is None:
            continue
        frozen = _windows(obs.faults, "stop", s.replica, THAW_MARGIN_S + limit)
        down = _windows(obs.faults, "kill", s.replica, RESTART_MARGIN_S)
        if _inside(s.at, frozen) or _inside(s.at, down):
            continue
        if s.age > limit:
            fault = fault_at(obs.faults, s.at)
            worst[fault] = max(worst.get(fault, 0.0), s.age)
            found.add(f"{s.replica} at {_iso(s.at)}: {s.age:.1f}s old", fault)
    if worst:
        found.notes.append(
            "oldest: " + ", ".join(f"{k} {v:.1f}s" for k, v in sorted(worst.items()))
        )
    return found


def no_false_skew(obs: Observed) -> Finding:
    found = Finding("no_false_skew", "cluster.clock_skew while no clock moved")
    for e in obs.events:
        if e.get("event") == "cluster.clock_skew":
            at = epoch(e["timestamp"])
            found.add(f"{e.get('_replica')} at {_iso(at)}: skew_s {e.get('skew_s')}",
                      fault_at(obs.faults, at))  # fmt: skip
    return found


def check(obs: Observed, end_of_soak: float | None = None) -> list[Finding]:
    return [
        started_once(obs),
        none_vanished(obs),
        no_false_lost(obs),
        skip_never_overlapped(obs, end_of_soak),
        slots_in_order(obs),
        heartbeat_fresh(obs),
        no_false_skew(obs),
    ]


def tallies(obs: Observed) -> dict[str, Counter[str]]:
    """Not rules, the figures beside them: events of interest by the fault under way."""
    names = ("job.started", "job.missed", "job.skipped", "job.lost", "database.unavailable",
             "database.available", "cluster.clock_skew")  # fmt: skip
    out: dict[str, Counter[str]] = {n: Counter() for n in names}
    for e in obs.events:
        name = e.get("event")
        if name in out and "timestamp" in e:
            weight = int(e.get("count", 1)) if name == "job.missed" else 1
            out[str(name)][fault_at(obs.faults, epoch(e["timestamp"]))] += weight
    return out


def report(findings: Sequence[Finding], obs: Observed | None = None) -> str:
    lines = []
    for f in findings:
        mark = "PASS" if f.ok else "FAIL"
        split = ", ".join(f"{k} {v}" for k, v in sorted(f.by_fault.items()))
        lines.append(f"  {mark}  {f.rule}: {f.count} {f.what}" + (f" [{split}]" if split else ""))
        lines += [f"          e.g. {e}" for e in f.examples]
        lines += [f"          {n}" for n in f.notes]
    if obs is not None:
        kinds = Counter(f.kind for f in obs.faults)
        lines.append("  faults: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
        for name, counts in tallies(obs).items():
            split = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            lines.append(f"  {name}: {sum(counts.values())} [{split}]")
    return "\n".join(lines)
