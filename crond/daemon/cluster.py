"""A replica's part in its cluster (`daemon.database`, docs/replicas.md), beside the loop.

Once a heartbeat (`beat`, called by the daemon's heartbeat): say this replica is alive;
compare its clock with the database's (`cluster.clock_skew` past a second); close the
unfinished runs of replicas silent for `replica_timeout` as lost (`job.lost`, and the
notifiers' `lost`), but only once its own beats have succeeded for `replica_timeout`
(crond/daemon/proof.py: after an outage they all shared, the others could not beat
either); fence its own runs when it cannot beat (crond/daemon/fencing.py); compare the
replicas' files (`cluster.config_mismatch`, once per change, naming them).

Once a second, the cluster's pauses and kill requests: crond/daemon/polling.py, which the
cluster makes. For the control socket: the runs going on the other replicas (`crond ps`),
and kill requests for them (`crond kill`).

Every query goes through the recorder, off the loop and awaited with a deadline
(crond/daemon/offloop.py), so the database's absence is its business (one
`database.unavailable`, backoff) and this module just finds nothing to do meanwhile. The
heartbeat's queries are a task of their own (the loop's beat does not wait for them; one
at a time); the clock is compared only on a round trip that was itself short.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

from structlog.typing import FilteringBoundLogger

from crond import __version__
from crond.clock import Clock, iso_utc
from crond.daemon.fencing import Fencing
from crond.daemon.loop import Loop
from crond.daemon.polling import Polling
from crond.daemon.recorder import StoreRecorder
from crond.daemon.stores import FAILED, Failed
from crond.run import runner
from crond.store.base import AttemptRow, Replicated

if TYPE_CHECKING:
    from crond.config.loaded import LoadedConfig

SKEW_LIMIT = timedelta(seconds=1)
# The clock is compared on a round trip shorter than this only: a longer one (a database
# that stalled, then answered) says nothing of the clocks.
SHORT_TRIP = 0.5

T = TypeVar("T")


def database_url(cfg: LoadedConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The cluster's database: `CROND_DATABASE_URL`, else the file's `daemon.database`
    (None: no database, one daemon with its SQLite store)."""
    env = os.environ if environ is None else environ
    return env.get("CROND_DATABASE_URL") or cfg.daemon.database


def replica_name(
    flag: str | None, cfg: LoadedConfig, environ: Mapping[str, str] | None = None
) -> str:
    """This replica's name: `--replica`, else `CROND_REPLICA`, else `daemon.replica`, else
    the host name."""
    env = os.environ if environ is None else environ
    return flag or env.get("CROND_REPLICA") or cfg.daemon.replica or socket.gethostname()


def logged_as(replica: str | None, cfg: LoadedConfig) -> dict[str, str]:
    """Which replica of which cluster this is (none without a database): in the daemon's
    `daemon.started` and in the store's events (database.*), so that a log shared by
    replicas tells them apart."""
    return {} if replica is None else {"replica": replica, "cluster": cfg.daemon.cluster}


def given_problems(flag: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """What is wrong with the replica settings given outside the file (`--replica`,
    `CROND_REPLICA`, `CROND_DATABASE_URL`), checked as the file's are (the URL never
    shown but as `show_url` shows it)."""
    from pydantic_core import PydanticCustomError  # noqa: PLC0415  (only with a database)

    from crond.config.database import check_database, check_name  # noqa: PLC0415

    env = os.environ if environ is None else environ
    given = [
        ("CROND_DATABASE_URL", env.get("CROND_DATABASE_URL"), check_database),
        ("--replica", flag, lambda v: check_name(v, "replica")),
        (
            "CROND_REPLICA",
            None if flag else env.get("CROND_REPLICA"),
            lambda v: check_name(v, "replica"),
        ),
    ]
    found = []
    for where, value, check in given:
        if value is None:
            continue
        try:
            check(value)
        except PydanticCustomError as exc:
            found.append(f"{where}: {exc.message()}")
    return found


class Cluster:
    """What one replica does for its cluster, besides claiming its runs (the recorder)."""

    def __init__(
        self,
        *,
        log: FilteringBoundLogger,
        clock: Clock,
        loop: Loop[runner.Run],
        recorder: StoreRecorder,
        on_paused: Callable[[str, bool], None] | None = None,
        on_lost: Callable[[AttemptRow], None] | None = None,
    ) -> None:
        self.log = log
        self.clock = clock
        self.recorder = recorder
        self.on_lost = on_lost  # told of each run closed as lost (the notifiers)
        self.replica = recorder.replica or ""
        self.timeout = timedelta(seconds=30)  # daemon.replica_timeout, set at each load
        self.digest: str | None = None  # of this replica's file
        self._skewed = False
        self.skew: float | None = None  # seconds, as the last short round trip measured it
        self._beating: asyncio.Task[None] | None = None  # the heartbeat's queries
        self._mismatch: frozenset[tuple[str, str, str]] = frozenset()
        self.polling = Polling(
            log=log, clock=clock, loop=loop, recorder=recorder, on_paused=on_paused
        )  # the daemon runs its `poll_forever`
        self.proof = recorder.proof  # this replica's own proof of life
        self.fencing = Fencing(log=log, clock=clock, loop=loop, recorder=recorder, proof=self.proof)

    def configure(self, cfg: LoadedConfig, digest: str | None) -> None:
        self.timeout = cfg.daemon.replica_timeout
        self.digest = digest
        daemon = cfg.daemon
        self.proof.configure(
            daemon.heartbeat.total_seconds(), daemon.replica_timeout.total_seconds()
        )
        self.fencing.configure(cfg)

    async def _store(self, write: Callable[[Replicated], T]) -> T | Failed:
        """One query of the cluster's store through the recorder: its result, or FAILED."""
        return await self.recorder.ask(lambda store: write(cast(Replicated, store)), force=True)

    # --- once a heartbeat ----------------------------------------------------------------

    def beat(self, now: datetime) -> None:
        """The heartbeat's queries, in a task (the loop's beat goes on without them); not
        started again while the last one's are still waited for."""
        if self.recorder.store is None:
            self.proof.failed()  # not open (again) yet: no proof of life
            return
        if self._beating and not self._beating.done():
            return
        self._beating = asyncio.ensure_future(self.beat_once(now))

    async def beat_once(self, now: datetime) -> None:
        clock = self.clock

        def beat(store: Replicated) -> tuple[datetime, datetime, float, float]:
            ours, sent = clock.now(), clock.monotonic()  # when it is sent, on its thread
            theirs = store.beat(ours, self.skew)
            return ours, theirs, clock.monotonic() - sent, sent

        timed = await self._store(beat)
        if isinstance(timed, Failed):
            self.proof.failed()
        else:
            ours, theirs, trip, sent = timed
            self.proof.proved(sent)
            self._clock(ours, theirs, trip)
        if self.proof.judging():  # connected for replica_timeout: the others could beat
            lost = await self._store(lambda store: store.close_dead(now, self.timeout))
            for row in [] if lost is FAILED else lost:
                self._lost(row)
        replicas = await self._store(lambda store: store.replicas())
        if replicas is not FAILED:
            self._compare(replicas, now)

    def _clock(self, ours: datetime, theirs: datetime, round_trip: float) -> None:
        """`cluster.clock_skew` when this host's clock is more than a second from the
        database's (the round trip's half allowed for), once until it is back within."""
        if round_trip > SHORT_TRIP:
            return  # it waited on the database, not on a clock: nothing to compare
        skew = (ours - theirs).total_seconds()
        # Kept with the next beat (the dashboard's cluster page): the round trip's half
        # allowed for, toward zero.
        self.skew = round(max(abs(skew) - round_trip / 2, 0.0) * (1 if skew >= 0 else -1), 3)
        skewed = abs(skew) - round_trip / 2 > SKEW_LIMIT.total_seconds()
        if skewed and not self._skewed:
            self.log.warning(
                "cluster.clock_skew", replica=self.replica, skew_s=round(skew, 3),
                database_time=iso_utc(theirs),
            )  # fmt: skip
        elif self._skewed and not skewed:
            self.log.info("cluster.clock_ok", replica=self.replica, skew_s=round(skew, 3))
        self._skewed = skewed

    def _lost(self, row: AttemptRow) -> None:
        self.log.warning(
            "job.lost", job=row.job, run_id=row.run_id, slot=iso_utc(row.slot),
            replica=row.replica,
        )  # fmt: skip
        if self.on_lost is not None:
            self.on_lost(row)

    def _compare(self, replicas: list[Any], now: datetime) -> None:
        """`cluster.config_mismatch` when the live replicas do not all run this file (its
        digest) and this crond's version; said again only when who differs changes."""
        fresh = now - self.timeout
        differ = frozenset(
            (r.name, r.config_digest or "", r.version or "")
            for r in replicas
            if r.name != self.replica
            and r.last_beat >= fresh
            and r.config_digest  # one just started says its file's at its next beat
            and (r.config_digest != self.digest or r.version != __version__)
        )
        if differ == self._mismatch:
            return
        self._mismatch = differ
        if not differ:
            self.log.info("cluster.config_match", replica=self.replica)
            return
        self.log.warning(
            "cluster.config_mismatch",
            replica=self.replica,
            digest=(self.digest or "")[:12],
            version=__version__,
            others=[
                {"replica": name, "digest": digest[:12], "version": version}
                for name, digest, version in sorted(differ)
            ],
        )

    # --- for the control socket ----------------------------------------------------------

    async def _open_runs(self) -> list[AttemptRow]:
        """The cluster's unfinished attempts; none known when the database did not answer,
        and not asked while it is away (`crond ps` answers at once then)."""
        if self.recorder.database() != "ok":
            return []
        runs = await self._store(lambda store: store.open_runs())
        return [] if runs is FAILED else runs

    async def request_kill(self, target: str, by: dict[str, Any]) -> list[dict[str, Any]]:
        """Ask the other replicas to stop `target` (a job, or a run id): the runs of theirs
        it names (as the database has them), each with its replica."""
        text = json.dumps(by, separators=(",", ":"))
        now = self.clock.now()
        runs = await self._open_runs()
        theirs = [r for r in runs if r.replica != self.replica and target in (r.job, r.run_id)]
        if theirs:
            await self._store(lambda store: store.request_kill(target, text, now))
        return [{"job": r.job, "run_id": r.run_id, "replica": r.replica} for r in theirs]

    async def other_runs(self) -> list[dict[str, Any]]:
        """The runs going on the other replicas, as `crond ps` shows them, with the locks
        each holds (docs/workflows.md)."""
        if self.recorder.database() != "ok":
            return []
        got = await self._store(lambda store: (store.open_runs(), store.lock_holds()))
        runs, held = ([], {}) if isinstance(got, Failed) else got
        now = self.clock.now()
        return [
            {
                **({"locks": held[r.run_id]} if r.run_id in held else {}),
                "job": r.job,
                "run_id": r.run_id,
                "attempt": r.attempt,
                "pid": None,
                "slot": iso_utc(r.slot),
                "started": iso_utc(r.started),
                "elapsed": round(max(0.0, (now - r.started).total_seconds()), 3),
                "replica": r.replica,
            }
            for r in runs
            if r.replica != self.replica
        ]
