"""What the daemon does for chains (docs/workflows.md; the rules: crond/schedule/chains.py):
at each end of a run, the children it starts are written with the run's end (the store's
commit: a crash after it still starts them) and handed to the scheduling core; at start,
the chained runs a previous daemon recorded and never started are handed over again;
the chained runs the core dropped (skipped) have their records taken away. With
replicas the records are the database's (crond/store/pg_chains.py): a replica takes back
those its previous process left at its start, and, once a heartbeat, those of replicas
silent for `replica_timeout` (`beat`); each child's run is claimed by its parent's run
id, so it runs once whichever replica starts it.

`trigger --no-chain` marks its run here: its end starts no child.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from crond.clock import iso_utc
from crond.daemon.stores import FAILED
from crond.schedule.chains import Parent
from crond.store.rows import Chained

if TYPE_CHECKING:
    from crond.daemon.loop import Loop
    from crond.daemon.recorder import StoreRecorder
    from crond.daemon.spawning import Spawner
    from crond.run.runner import Run, RunResult
    from crond.store.postgres import PostgresStore
    from crond.store.rows import Chained as Row
    from crond.store.sqlite import SqliteStore


class Chaining:
    """The daemon's part in chains, over its loop, recorder and spawner (it hands the
    recorder the chained runs of each end, and the spawner the core's chained starts)."""

    def __init__(
        self, loop: Loop[Run], recorder: StoreRecorder, spawner: Spawner, no_chain: set[str]
    ) -> None:
        self.loop = loop
        self.recorder = recorder
        self.no_chain = no_chain  # run ids of `trigger --no-chain` (the control socket's)
        recorder.chains = self.rows
        spawner.parents = loop.core.chains.parents  # the core's own map, shared
        self._mine = True  # with replicas: its previous process's records not yet taken
        self._next = 0.0  # (monotonic) the next look for a silent replica's records

    def children(self, run: Run, result: RunResult) -> tuple[list[str], Parent]:
        """The children `run`'s end starts (none for `trigger --no-chain`), and what they
        are told of it. Asked by the recorder to write them with the end, and at the end."""
        parent = Parent(run.job, run.run_id, result.outcome.value, result.exit_code, run.slot)
        if run.run_id in self.no_chain:
            return [], parent
        return self.loop.core.chains.chained(parent), parent

    def rows(self, run: Run, result: RunResult) -> list[Chained]:
        """The chained runs `run`'s end starts, as the store keeps them: written in the
        commit of the end (by the recorder, without replicas)."""
        children, parent = self.children(run, result)
        return [
            Chained(child, parent.job, parent.run_id, parent.outcome, parent.exit_code, run.slot)
            for child in children
        ]

    def ended(self, run: Run, result: RunResult) -> None:
        """`run` has ended: its children are decided at the loop's next wake."""
        children, parent = self.children(run, result)
        self.no_chain.discard(run.run_id)
        if children:
            self.loop.core.chains.put(children, parent)

    def restore(self) -> None:
        """The chained runs a previous daemon recorded and never started (or skipped);
        with replicas, asked of the database at the first heartbeat (`beat`)."""
        recorder = self.recorder
        if recorder.replica is not None or recorder.store is None:
            return
        rows = recorder.write(lambda store: cast("SqliteStore", store).pending_chained())
        self._put([] if rows is FAILED else rows)

    def beat(self) -> None:
        """With replicas, once a heartbeat: the chained runs this replica's previous process
        left (until taken), and those of replicas silent for `replica_timeout` once this
        one has proved itself alive for as long (crond/daemon/proof.py)."""
        recorder, clock = self.recorder, self.loop.clock
        if recorder.replica is None or clock.monotonic() < self._next:
            return
        self._next = clock.monotonic() + self.loop.heartbeat.total_seconds()
        proof, mine = recorder.proof, self._mine
        timeout = timedelta(seconds=proof.timeout) if proof.judging() else None
        if not mine and timeout is None:
            return
        now = clock.now()

        def adopt(store: object) -> list[Row]:
            return cast("PostgresStore", store).adopt_chained(now, timeout, mine=mine)

        def back(rows: object) -> None:
            if isinstance(rows, list):
                self._mine = self._mine and not mine
                self._put(rows)
                if rows:
                    self.loop.log.info("cluster.chains_adopted", runs=[
                        {"job": r.job, "parent_job": r.parent_job,
                         "parent_run_id": r.parent_run_id, "slot": iso_utc(r.slot)}
                        for r in rows
                    ])  # fmt: skip
                    self.loop.wake()

        recorder.send(adopt, then=back)

    def _put(self, rows: list[Row]) -> None:
        """Chained runs recorded and not started: the core's, to decide."""
        for row in rows:
            parent = Parent(row.parent_job, row.parent_run_id, row.outcome, row.exit_code, row.slot)
            self.loop.core.chains.put([row.job], parent)

    def forget_dropped(self) -> None:
        """The chained runs the core did not start: their records go."""
        dropped, recorder = self.loop.core.chains.dropped, self.recorder
        if dropped:
            self.loop.core.chains.dropped = []
            if recorder.replica is not None or recorder.store is not None:
                recorder.send(lambda store: cast("SqliteStore", store).drop_chained(dropped))
