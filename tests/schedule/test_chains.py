"""Chains in the scheduling core (crond/schedule/chains.py) as tables, in the shape of
test_core.py: a parent's run ends with an outcome, and the next wake decides its
children's runs with the children's own rules."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.schedule.shell import Shell
from tests.schedule.test_core import Pause, Runs, Step, Trigger, Wake, WakeAt, jobs


@dataclass(frozen=True)
class Ends:
    """The oldest run of `job` ends with `outcome`: these children are chained."""

    job: str
    outcome: str
    children: list[str]

    def __call__(self, shell: Shell) -> None:
        assert shell.end(self.job, self.outcome) == self.children


@dataclass(frozen=True)
class Dropped:
    """The chained runs dropped so far, (child, parent's run id): their records go."""

    expect: list[tuple[str, str]]

    def __call__(self, shell: Shell) -> None:
        assert shell.core.chains.dropped == self.expect


EXTRACT = "extract: {every: 1m, command: x}"
LOAD = "load: {after: extract, command: x}"
REPORT = "report: {after: {load: success, extract: failure}, command: x}"
AUDIT = "audit: {after: {extract: finished}, command: x}"

CASES: dict[str, tuple[str, list[Step]]] = {
    "success_starts_the_child_for_the_parents_slot": (
        jobs(EXTRACT, LOAD),
        [
            Wake(60, ["start extract@60", "moved extract"]),
            Ends("extract", "success", ["load"]),
            WakeAt(60),  # at once
            Wake(61, ["start load@60"]),
            Runs(["load@60"]),
        ],
    ),
    "failure_branch_and_finished": (
        jobs(EXTRACT, LOAD, REPORT, AUDIT),
        [
            Wake(60, ["start extract@60", "moved extract"]),
            Ends("extract", "failed", ["report", "audit"]),
            Wake(61, ["start report@60", "start audit@60"]),
            Ends("report", "success", []),
            Ends("audit", "timeout", []),
            Wake(120, ["start extract@120", "moved extract"]),
            Ends("extract", "success", ["load", "audit"]),
            Wake(121, ["start load@120", "start audit@120"]),
            Ends("load", "success", ["report"]),
            Wake(122, ["start report@120"]),
        ],
    ),
    "a_paused_child_is_skipped_paused": (
        jobs(EXTRACT, LOAD),
        [
            Pause("load"),
            Wake(60, ["start extract@60", "moved extract"]),
            Ends("extract", "success", ["load"]),
            Wake(61, ["tell load: skip@60 paused"]),
            Runs([]),
        ],
    ),
    "a_disabled_child_is_skipped_paused": (
        jobs(EXTRACT, "load: {after: extract, command: x, enabled: false}"),
        [
            Wake(60, ["start extract@60", "moved extract"]),
            Ends("extract", "success", ["load"]),
            Wake(61, ["tell load: skip@60 paused"]),
        ],
    ),
    "the_childs_overlap_applies": (
        jobs(EXTRACT, LOAD),
        [
            Wake(60, ["start extract@60", "moved extract"]),
            Ends("extract", "success", ["load"]),
            Wake(61, ["start load@60"]),
            Wake(120, ["start extract@120", "moved extract"]),
            Ends("extract", "success", ["load"]),
            Wake(121, ["tell load: skip@120 overlap"]),
        ],
    ),
    "a_trigger_of_the_child_alone": (
        jobs(EXTRACT, LOAD),
        [Trigger("load", 30, ["start load@30"]), Runs(["load@30"])],
    ),
    "the_childs_locks_apply": (
        "locks: {db: 1}\n"
        + jobs(
            "extract: {every: 1m, command: x}",
            "load: {after: extract, command: x, locks: [db]}",
            "vacuum: {every: 10m, anchor: '2026-03-01T12:00:30Z', command: x, locks: [db]}",
        ),
        [
            Wake(30, ["start vacuum@30", "moved vacuum"]),
            Wake(60, ["start extract@60", "moved extract"]),
            Ends("extract", "success", ["load"]),
            Wake(61, ["waits load@60 for db (vacuum@30)"]),
        ],
    ),
    "a_chained_run_missed_waiting_for_its_lock_is_dropped": (
        "locks: {db: 1}\n"
        + jobs(
            "extract: {every: 1m, command: x}",
            "load: {after: extract, grace: 10s, command: x, locks: [db]}",
            "vacuum: {every: 10m, anchor: '2026-03-01T12:00:30Z', command: x, locks: [db]}",
        ),
        [
            Wake(30, ["start vacuum@30", "moved vacuum"]),
            Wake(60, ["start extract@60", "moved extract"]),
            Ends("extract", "success", ["load"]),
            Wake(61, ["waits load@60 for db (vacuum@30)"]),
            Dropped([]),
            Wake(71, ["tell load: missed 1 60..60 lock"]),
            Dropped([("load", "r-extract-60")]),
        ],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_chains(name: str) -> None:
    text, steps = CASES[name]
    shell = Shell(text)
    for step in steps:
        step(shell)
