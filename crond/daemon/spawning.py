"""The spawn path of the daemon's runs: what each run is made from, done once where it can
be (docs/performance.md: a burst is bounded by fork/exec, so no per-run work that can be
done once).

The jobs' environment is the daemon's, read once, less what is the daemon's own (systemd's
messages to it, crond's database and its credentials, and the variables the file takes
by `${NAME}` for notifiers, pings and the database); each job's `RunSpec` is made once
per loaded job; a wake's run ids are chosen when its starts are recorded (`claim`) and
found again at each spawn (`launch`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from datetime import datetime

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock
from crond.config.loaded import LoadedConfig, LoadedJob, secret_names
from crond.daemon.recorder import StoreRecorder
from crond.daemon.runs import Gate
from crond.run import process, runner
from crond.schedule.actions import Claims, Key
from crond.schedule.chains import Parent
from crond.store.base import Start

# systemd's messages to this process: a job must not talk to systemd in crond's name.
_DAEMON_ONLY = frozenset(
    {
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "INVOCATION_ID",
        "CROND_DATABASE_URL",  # crond's own database (and its password) is not the jobs'
        "CROND_REPLICA",
    }
)


class Spawner:
    """The daemon's `launch` and `claim` (the loop's Effects): runs made ready to spawn."""

    def __init__(
        self,
        *,
        log: FilteringBoundLogger,
        clock: Clock,
        recorder: StoreRecorder,
        database: bool,
        cfg: LoadedConfig,
    ) -> None:
        self.log = log
        self.clock = clock
        self.recorder = recorder
        self.specs: dict[str, tuple[LoadedJob, runner.RunSpec]] = {}
        # Read once: every job's environment starts here, without what is the daemon's own
        # (with a database, libpq's PG* variables are how crond reaches it: a job that runs
        # as another user must not inherit its password; a job gives its own in `env:`).
        self._environ = {
            k: v
            for k, v in os.environ.items()
            if k not in _DAEMON_ONLY and not (database and k.startswith("PG"))
        }
        self.environ = _without_secrets(self._environ, cfg)
        self._run_ids: dict[tuple[str, datetime], str] = {}  # run ids chosen by `claim`
        # The chained starts the core decided, by (child, slot): the core's own map.
        self.parents: dict[Key, Parent] = {}
        # The backfill starts the core decided, (job, slot) -> backfill id: its own map.
        self.backfills: dict[Key, str] = {}

    def launch(self, job: LoadedJob, slot: datetime, gate: Gate | None = None) -> runner.Run:
        """A run of `job`, spawned now; the loop drives it in its TaskGroup."""
        cached = self.specs.get(job.name)
        if cached is None or cached[0] is not job:
            cached = (job, runner.spec_for(job, self.environ))
            self.specs[job.name] = cached
        run_id = self._run_ids.pop((job.name, slot), None)
        if run_id is not None and self.recorder.replica is not None:
            gate = self._while_proved(gate)
        parent = self.parents.pop((job.name, slot), None)  # a chained run's (the core's)
        return runner.Run(
            cached[1] if parent is None else _chained(cached[1], parent),
            slot,
            run_id=run_id,
            clock=self.clock,
            log=self.log,
            recorder=self.recorder,
            gate=gate,
        )

    def _while_proved(self, gate: Gate | None) -> Gate:
        """`gate`, then a refusal to spawn a run this replica claimed if it has since gone
        without a proof of life for the fencing threshold (frozen between the claim and
        the spawn: the others may have closed the run as lost and started the next slot;
        docs/replicas.md, "What each failure does"). The run ends killed, unstarted."""
        proof = self.recorder.proof

        def gate_then_proof() -> None:
            if gate is not None:
                gate()
            if proof.lapsed():
                raise process.RefusedError(
                    f"crond: not started: this replica went {proof.silent_for():.1f}s without "
                    f"reaching its database since it claimed the run (frozen?), past its "
                    f"fencing threshold ({proof.fence_after():g}s): another replica may have "
                    "taken it for lost"
                )

        return gate_then_proof

    async def claim(
        self,
        starts: Sequence[tuple[LoadedJob, datetime]],
        told: Sequence[Key],
        at: datetime,
        *,
        counted: bool = False,
    ) -> Claims:
        """The runs one wake is about to start at `at` (the wake may come just before):
        their `started` rows in one commit, before the first spawn (one per run would
        cost each later spawn of the wake the commits of those before). A replica claims
        them in that commit: those it may not start, and why; and of the `told` slots
        (skipped, missed), those another replica claimed first, and so tells of."""
        if self.recorder.store is None and self.recorder.replica is None:
            return Claims()
        doubt = self.recorder.in_doubt  # a claim in doubt is tried again as it was
        self._run_ids = {
            (job.name, slot): doubt.run_id((job.name, slot)) or runner.new_run_id(at)
            for job, slot in starts
        }
        records = [Start(name, rid, slot) for (name, slot), rid in self._run_ids.items()]
        # A chained start takes its record away in the commit that records it (run id ->
        # its parent's run id: with replicas, what its claim is by).
        chained = {
            rid: parent.run_id
            for (name, slot), rid in self._run_ids.items()
            if (parent := self.parents.get((name, slot))) is not None
        }
        limits = {
            job.name: job.settings.max_runs
            for job, _ in starts
            if counted and job.settings.max_runs is not None
        }
        # A backfill's start moves its progress in the commit that records it.
        backfills = {
            rid: backfill
            for key, rid in self._run_ids.items()
            if (backfill := self.backfills.pop(key, None)) is not None
        }
        return await self.recorder.prepare(
            records, told, started=at, chained=chained, limits=limits, backfills=backfills
        )

    def reload(self, cfg: LoadedConfig) -> None:
        """A reload: the specs of the jobs no longer in the file are forgotten, and all of
        them when the file's `${NAME}`s changed what the jobs inherit."""
        environ = _without_secrets(self._environ, cfg)
        if environ != self.environ:
            self.environ, self.specs = environ, {}
        jobs = cfg.jobs
        self.specs = {name: spec for name, spec in self.specs.items() if name in jobs}


def _chained(spec: runner.RunSpec, parent: Parent) -> runner.RunSpec:
    """A chained run's spec: the job's, with what it is told of its parent's end."""
    told = {
        "CROND_PARENT_JOB": parent.job,
        "CROND_PARENT_RUN_ID": parent.run_id,
        "CROND_PARENT_OUTCOME": parent.outcome,
        "CROND_PARENT_EXIT_CODE": "" if parent.exit_code is None else str(parent.exit_code),
    }
    return dataclasses.replace(spec, env={**spec.env, **told})


def _without_secrets(environ: dict[str, str], cfg: LoadedConfig) -> dict[str, str]:
    """A job's inherited environment: without the variables the file takes by `${NAME}`
    for notifiers, pings and the database (docs/running.md)."""
    secrets = secret_names(cfg)
    return {k: v for k, v in environ.items() if k not in secrets} if secrets else environ
