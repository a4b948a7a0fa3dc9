"""Start lag: how long after its slot a job starts, for 1 job and for 200 jobs due together.

    .venv/bin/python bench/bench_lag.py [--quick] [--peers]

The job is `sh -c 'date +%s.%N >> FILE'`; a start is the instant the job wrote, and its
lag is that instant minus the slot. Figures:

1. one job every minute (`* * * * *`), 3 minute boundaries: its lag at each (with
   crond's own lag_ms and the spawn-to-write floor after each boundary, for scale);
2. 200 jobs every minute, due together, 3 boundaries: at each, the first, median and
   last start after the slot (with crond's own lag_ms of its last spawn, and a bare
   Popen loop of 200 after each boundary);
3. crond only, for more samples: one job `every: 1s` (40 slots), and 200 jobs
   `every: 5s` (6 slots); with the spawn-to-write floor (one bare Popen of the job, then
   its write) and a bare Popen loop of 200 after each slot, for scale.

Targets for crond: lag median < 5 ms, with crond's own share (slot to spawned, its
`lag_ms`) < 1 ms median and < 5 ms p99 (p99 from the every-second run); 200 jobs due
together: the last start within 1.2x a bare Popen loop of the same 200 commands in the
same run (the jobs' own CPU over two cores is ~200 ms: no spawner starts them all
within 100 ms here, which was the old target). With --peers, the minute figures are
measured for each peer too (cron, yacron, APScheduler 3), with crond/peer ratios.
Each minute-based run starts right after the previous one and crond's faster runs fill
the waits: about 6 minutes for crond, 5 more per peer.
"""

from __future__ import annotations

import contextlib
import functools
import json
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

import common
from common import JobDef, NotReadyError, System, row, summary, verdict


def minute_figures(system: System, count: int, boundaries: int) -> dict[str, list[float]] | None:
    """`count` jobs every minute. Per boundary: the first, median and last start's lag
    (ms), how many did not start and, right after, a bare loop of as many spawns (more than
    one job) or the spawn-to-write floor (one job); for crond also its own lag_ms of the
    last spawn, which splits a start's lag between the spawner and the job's own start.
    None when the system could not be started."""

    def make(out: Path) -> list[JobDef]:
        return common.stamp_jobs(count, out, cron="* * * * *")

    own: list[float] = []

    def read_own(work: Path) -> None:
        own.extend(last_spawns(work / "crond.log"))

    with tempfile.TemporaryDirectory(prefix=f"bench-lag-{system.name}-") as tmp:
        work = Path(tmp)
        if count > 1:
            base = functools.partial(common.bare_loop, work / "bare.txt", count)
        else:
            base = functools.partial(common.spawn_to_write, work / "floor.txt")
        on_stop = read_own if system.name == "crond" else None
        try:
            rounds = common.slot_rounds(
                system, make, 60, boundaries, work, baseline=base, on_stop=on_stop
            )
        except NotReadyError as exc:
            common.skipped(system, f"{count} jobs: {exc}")
            return None
    figures: dict[str, list[float]] = {"first": [], "median": [], "last": [], "missing": []}
    baselines = [r.baseline for r in rounds if r.baseline is not None]
    figures["bare" if count > 1 else "floor"] = baselines
    figures["own"] = own
    for r in rounds:
        figures["missing"].append(count - len(r.lags))
        if r.lags:
            figures["first"].append(r.lags[0])
            figures["median"].append(statistics.median(r.lags))
            figures["last"].append(r.lags[-1])
    return figures


def last_spawns(log: Path) -> list[float]:
    """crond's own lag_ms (slot to spawn returned) of the last job.started of each slot."""
    last: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in log.read_bytes().splitlines():
            if b'"job.started"' in line:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    event = json.loads(line)
                    slot = event["slot"]
                    last[slot] = max(last.get(slot, 0.0), float(event["lag_ms"]))
    return list(last.values())


def show(
    label: str, name: str, fig: dict[str, list[float]], keys: Sequence[str], note: str
) -> None:
    for key in keys:
        text = summary(fig[key]) if fig[key] else "no start seen"
        title = f"{label}, {key}" if len(keys) > 1 else label
        row(title, name, text, note if key == keys[-1] else "")
    if any(fig["missing"]):
        row("", name, f"starts missing at the boundaries: {fig['missing']}")


def compare(
    name: str, fig: dict[str, list[float]], ours: dict[str, list[float]] | None, key: str
) -> str:
    """crond's median over the peer's, for `key`."""
    if not ours or not ours[key] or not fig[key]:
        return ""
    r = common.ratio(statistics.median(ours[key]), statistics.median(fig[key]))
    return f"crond/{name} {r}"


def every_second(work: Path, seconds: int) -> tuple[list[float], list[float], list[float]]:
    """The job's lags, crond's own lag_ms, and the spawn-to-write floor after each slot."""

    def make(out: Path) -> list[JobDef]:
        return common.stamp_jobs(1, out, every="1s")

    own: list[float] = []
    floor = functools.partial(common.spawn_to_write, work / "floor.txt")
    rounds = common.slot_rounds(
        common.CrondSystem(), make, 1, seconds, work, baseline=floor,
        on_stop=lambda w: own.extend(common.own_lags(w / "crond.log")),
    )  # fmt: skip
    lags = [lag for r in rounds for lag in r.lags]
    return lags, own, [r.baseline for r in rounds if r.baseline is not None]


def together_fast(work: Path, boundaries: int) -> list[common.Round]:
    def make(out: Path) -> list[JobDef]:
        return common.stamp_jobs(200, out, every="5s")

    bare = functools.partial(common.bare_loop, work / "bare.txt", 200)
    return common.slot_rounds(common.CrondSystem(), make, 5, boundaries, work, baseline=bare)


def show_every_second(seconds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-lag-") as tmp:
        lags, own, floor = every_second(Path(tmp), seconds)
    med = statistics.median(lags) if lags else float("inf")
    row(
        "1 job every: 1s",
        "crond",
        summary(lags, p99=True),
        f"target median < 5 ms: {verdict(med < 5)}",
    )
    own_med = statistics.median(own) if own else float("inf")
    own_p99 = common.pct(own, 0.99) if own else float("inf")
    row(
        "  crond's own lag_ms (spawned)",
        "crond",
        summary(own, p99=True),
        f"target median < 1 ms: {verdict(own_med < 1)}; p99 < 5 ms: {verdict(own_p99 < 5)}",
    )
    row("  floor: bare Popen to write", "", summary(floor), "(same run, after each slot)")


def show_together_fast(slots: int) -> None:
    since = len(common.BARE_JOB_CPU)
    with tempfile.TemporaryDirectory(prefix="bench-lag-") as tmp:
        rounds = together_fast(Path(tmp), slots)
    lasts = [r.lags[-1] for r in rounds if r.lags]
    complete = all(len(r.lags) == 200 for r in rounds)
    row("200 jobs every: 5s, first start", "crond", summary([r.lags[0] for r in rounds if r.lags]))
    row("200 jobs every: 5s, last start", "crond", summary(lasts))
    bare = [r.baseline for r in rounds if r.baseline is not None]
    row("bare Popen loop of 200, last start", "", summary(bare), "(same run, after each slot)")
    if lasts and bare:
        ratios = [r.lags[-1] / r.baseline for r in rounds if r.lags and r.baseline]
        ratio = statistics.median(ratios)
        ok = complete and ratio <= 1.2
        row(
            "last start / bare loop",
            "crond",
            f"median {ratio:.2f}x",
            f"target <= 1.2x: {verdict(ok)}",
        )
    common.cpu_floor_row(since, 200)


def main() -> None:
    args = common.parser(__doc__).parse_args()
    boundaries = 1 if args.quick else 3
    fast_slots = 2 if args.quick else 6
    common.header("start lag (ms after the slot); job: sh -c 'date +%s.%N >> FILE'")
    ours: dict[str, dict[str, list[float]]] = {}
    # The crond-only runs fill the waits for the next minute boundary.
    fast_first = common.until_next_minute(lead=5) > fast_slots * 5 + 8
    for system in common.systems(common.want_peers(args)):
        if why := system.missing():
            common.skipped(system, why)
            continue
        crond = system.name == "crond"
        if crond and fast_first:
            show_together_fast(fast_slots)
        one = minute_figures(system, 1, boundaries)
        if one is None:
            continue
        if crond:
            ours["1"] = one
            med = statistics.median(one["first"]) if one["first"] else float("inf")
            note = f"target median < 5 ms: {verdict(med < 5)}"
        else:
            note = compare(system.name, one, ours.get("1"), "first")
        show("1 job every minute", system.name, one, ["first"], note)
        if crond:
            row("  crond's own lag_ms (spawned)", "crond", summary(one["own"]), "(job.started)")
        row("  floor: bare Popen to write", "", summary(one["floor"]), "(same run, after each)")
        if crond:
            show_every_second(15 if args.quick else 40)
        since = len(common.BARE_JOB_CPU)
        fig = minute_figures(system, 200, boundaries)
        if fig is None:
            continue
        if crond:
            ours["200"] = fig
            note = ""  # judged against the bare loop, on the row below
        else:
            note = compare(system.name, fig, ours.get("200"), "last")
        show("200 jobs every minute", system.name, fig, ["first", "median", "last"], note)
        if crond:
            row("  crond's own lag_ms, last spawn", "crond", summary(fig["own"]), "(job.started)")
        if fig["bare"] and fig["last"]:
            r = statistics.median(a / b for a, b in zip(fig["last"], fig["bare"], strict=False))
            judged = ""
            if crond:
                ok = r <= 1.2 and not any(fig["missing"])
                judged = f"; target <= 1.2x: {verdict(ok)}"
            row("bare Popen loop of 200, last start", system.name, summary(fig["bare"]),
                f"last start / bare loop: median {r:.2f}x{judged}")  # fmt: skip
        common.cpu_floor_row(since, 200)
        if crond and not fast_first:
            show_together_fast(fast_slots)


if __name__ == "__main__":
    main()
