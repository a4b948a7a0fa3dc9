"""Chains in the whole daemon on a FakeClock (tests/daemon/test_daemon_fake_clock.py's
harness), with real child processes: a chain of three with a failure branch, what each
child is told of its parent, trigger with and without its chain, and the chained runs
kept in the store across a restart."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from pathlib import Path

from crond.clock import FakeClock
from crond.store import sqlite
from crond.store.rows import Chained
from tests.daemon.test_daemon_fake_clock import T0, serving

# Each run appends one JSON line: its job, slot and what it was told of its parent.
TELL = """\
import json, os, sys
keys = ("CROND_JOB", "CROND_SLOT", "CROND_PARENT_JOB", "CROND_PARENT_RUN_ID",
        "CROND_PARENT_OUTCOME", "CROND_PARENT_EXIT_CODE")
with open(sys.argv[1], "a") as out:
    print(json.dumps({k: os.environ.get(k) for k in keys}), file=out)
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
"""


def teller(out: Path) -> str:
    """The command of a job that tells into `out` (and exits with its argument)."""
    script = out.with_suffix(".py")
    script.write_text(TELL)
    return f"{sys.executable} {script} {out}"


def told(out: Path) -> list[dict[str, str | None]]:
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def etl(out: Path, extract_exit: int) -> str:
    tell = teller(out)
    return (
        "jobs:\n"
        f"  extract: {{cron: '1 12 * * *', command: '{tell} {extract_exit}'}}\n"
        f"  load: {{after: extract, command: '{tell}'}}\n"
        f"  report: {{after: {{load: success}}, command: '{tell}'}}\n"
        f"  page: {{after: {{extract: failure}}, command: '{tell}'}}\n"
    )


async def test_a_chain_of_three_runs_in_order_with_its_parents_told(tmp_path: Path) -> None:
    out = tmp_path / "told.jsonl"
    clock = FakeClock(T0)
    async with serving(tmp_path, etl(out, 0), clock) as (daemon, log):
        clock.advance(timedelta(minutes=1))
        await log.until(lambda: len(log.named("job.finished")) >= 3)
        finished = log.named("job.finished")
        runs = {e["job"]: e["run_id"] for e in finished}
        assert [e["job"] for e in finished] == ["extract", "load", "report"]
        assert not daemon.loop.core.chains
    lines = told(out)
    slot = "2026-03-01T12:01:00Z"
    assert [line["CROND_JOB"] for line in lines] == ["extract", "load", "report"]
    assert all(line["CROND_SLOT"] == slot for line in lines)  # the parent's slot
    assert lines[0]["CROND_PARENT_JOB"] is None
    assert lines[1] | {} == {
        "CROND_JOB": "load", "CROND_SLOT": slot, "CROND_PARENT_JOB": "extract",
        "CROND_PARENT_RUN_ID": runs["extract"], "CROND_PARENT_OUTCOME": "success",
        "CROND_PARENT_EXIT_CODE": "0",
    }  # fmt: skip
    assert (lines[2]["CROND_PARENT_JOB"], lines[2]["CROND_PARENT_RUN_ID"]) == ("load", runs["load"])


async def test_a_failed_parent_starts_its_failure_branch_only(tmp_path: Path) -> None:
    out = tmp_path / "told.jsonl"
    clock = FakeClock(T0)
    async with serving(tmp_path, etl(out, 3), clock) as (daemon, log):
        clock.advance(timedelta(minutes=1))
        await log.until(lambda: len(log.named("job.finished")) >= 2)
        clock.advance(timedelta(seconds=5))
        await log.until(lambda: daemon.loop.idle.is_set() and not daemon.loop.core.chains)
        assert [e["job"] for e in log.named("job.finished")] == ["extract", "page"]
    page = told(out)[1]
    assert (page["CROND_PARENT_OUTCOME"], page["CROND_PARENT_EXIT_CODE"]) == ("failed", "3")


async def test_a_paused_child_is_skipped_paused(tmp_path: Path) -> None:
    out = tmp_path / "told.jsonl"
    clock = FakeClock(T0)
    async with serving(tmp_path, etl(out, 0), clock) as (daemon, log):
        daemon.loop.pause("load", None)
        clock.advance(timedelta(minutes=1))
        await log.until(lambda: bool(log.named("job.skipped")))
        skipped = log.named("job.skipped")[0]
        assert (skipped["job"], skipped["reason"], skipped["slot"]) == (
            "load", "paused", "2026-03-01T12:01:00Z",
        )  # fmt: skip
        assert [e["job"] for e in log.named("job.finished")] == ["extract"]
    store = sqlite.SqliteStore(tmp_path / "state")
    assert store.pending_chained() == []  # its record taken away: no run after a restart
    store.close()


async def test_trigger_starts_the_children_and_no_chain_does_not(tmp_path: Path) -> None:
    out = tmp_path / "told.jsonl"
    clock = FakeClock(T0)
    async with serving(tmp_path, etl(out, 0), clock) as (daemon, log):
        while daemon.loop.going.tasks is None:  # the loop's first turn
            await asyncio.sleep(0)
        run = await daemon.loop.trigger("load")
        assert not isinstance(run, str)
        await log.until(lambda: len(log.named("job.finished")) >= 2)
        assert [e["job"] for e in log.named("job.finished")] == ["load", "report"]
        daemon.chaining.no_chain.add((await daemon.loop.trigger("load")).run_id)  # type: ignore[union-attr]
        await log.until(lambda: len(log.named("job.finished")) >= 3)
        clock.advance(timedelta(seconds=1))
        await log.until(lambda: daemon.loop.idle.is_set() and not daemon.loop.core.chains)
        assert [e["job"] for e in log.named("job.finished")] == ["load", "report", "load"]


async def test_a_chained_run_recorded_and_never_started_starts_after_a_restart_once(
    tmp_path: Path,
) -> None:
    """The daemon died between extract's end (its chained run of load recorded with it)
    and load's start: the next daemon starts load once, told of extract's run; its start
    takes the record away, so a third daemon would start nothing."""
    out = tmp_path / "told.jsonl"
    store = sqlite.SqliteStore(tmp_path / "state")
    slot = T0 - timedelta(hours=1)
    store.start_many([("extract", "r-extract", slot)], slot)
    store.end(1, job="extract", run_id="r-extract", finished=slot, outcome="success",
              exit_code=0, duration_s=1.0, output=[],
              chained=[Chained("load", "extract", "r-extract", "success", 0, slot)])  # fmt: skip
    store.close()
    clock = FakeClock(T0)
    async with serving(tmp_path, etl(out, 0), clock) as (_, log):
        await log.until(lambda: len(log.named("job.finished")) >= 2)  # load, then report
        assert [e["job"] for e in log.named("job.finished")] == ["load", "report"]
    load = told(out)[0]
    assert (load["CROND_PARENT_RUN_ID"], load["CROND_SLOT"]) == (
        "r-extract",
        "2026-03-01T11:00:00Z",
    )
    store = sqlite.SqliteStore(tmp_path / "state")
    assert store.pending_chained() == []  # a third daemon has nothing to start
    store.close()
