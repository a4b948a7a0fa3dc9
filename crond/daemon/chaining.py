"""What the daemon does for chains (docs/workflows.md; the rules: crond/schedule/chains.py):
at each end of a run, the children it starts are written with the run's end (the store's
commit: a crash after it still starts them) and handed to the scheduling core; at start,
the chained runs a previous daemon recorded and never started are handed over again;
the chained runs the core dropped (skipped) have their records taken away.

`trigger --no-chain` marks its run here: its end starts no child.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crond.schedule.chains import Parent

if TYPE_CHECKING:
    from crond.daemon.loop import Loop
    from crond.daemon.recorder import StoreRecorder
    from crond.run.runner import Run, RunResult


class Chaining:
    def __init__(self, loop: Loop[Run], recorder: StoreRecorder) -> None:
        self.loop = loop
        self.recorder = recorder
        self.no_chain: set[str] = set()  # run ids of `trigger --no-chain`

    def children(self, run: Run, result: RunResult) -> tuple[list[str], Parent]:
        """The children `run`'s end starts (none for `trigger --no-chain`), and what they
        are told of it. Asked by the recorder to write them with the end, and at the end."""
        parent = Parent(run.job, run.run_id, result.outcome.value, result.exit_code, run.slot)
        if run.run_id in self.no_chain:
            return [], parent
        return self.loop.core.chains.chained(parent), parent

    def ended(self, run: Run, result: RunResult) -> None:
        """`run` has ended: its children are decided at the loop's next wake."""
        children, parent = self.children(run, result)
        self.no_chain.discard(run.run_id)
        if children:
            self.loop.core.chains.put(children, parent)

    def restore(self) -> None:
        """The chained runs a previous daemon recorded and never started (or skipped)."""
        for child, parent in self.recorder.pending_chains():
            self.loop.core.chains.put([child], parent)

    def forget_dropped(self) -> None:
        """The chained runs the core did not start: their records go."""
        dropped = self.loop.core.chains.dropped
        if dropped:
            self.loop.core.chains.dropped = []
            self.recorder.drop_chained(dropped)
