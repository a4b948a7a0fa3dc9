"""A replica's own proof of life: when its writes last reached the cluster's database,
measured on its own monotonic clock (docs/replicas.md, "What each failure does").

Every replica judges the others by their heartbeat rows; this is what it knows of its
own. Three rules rest on it:

- **Judging others** (`judging`): a replica closes the runs of a silent peer as lost only
  once its own beats have succeeded for `replica_timeout` without a failure between
  (since its start, or since an outage). After an outage they all shared, the others
  had no way to beat either: their rows are stale for the same reason as its own was.
- **A claim refreshes the beat first** (`stale`): the claim's call beats before it
  claims (one call on the store's thread, the beat committed first) when the last
  proof is older than a heartbeat, so a replica thawed after `SIGSTOP` never starts a
  run while its row still says it is dead; a failed beat fails the claim (refused for
  `database`, tried again).
- **Fencing** (crond/daemon/fencing.py): how long it has gone without one.
- **A claimed run spawns only while the proof holds** (`lapsed`, crond/daemon/spawning.py):
  a replica frozen between its claim and the spawn (`fence_after` or longer) does not
  start the run when it thaws: the others may have closed it as lost and started the
  next slot meanwhile.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

from crond.clock import Clock
from crond.daemon.stores import FAILED, Failed
from crond.store.base import Replicated, Store

T = TypeVar("T")


class Proof:
    """When this replica last proved itself alive to the database (a beat that
    committed, alone or before a claim), and since when it has without a failure.
    `watchers` are told of each proof, with the silence it ended (seconds)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.heartbeat = 10.0  # seconds: daemon.heartbeat, set at each load
        self.timeout = 30.0  # seconds: daemon.replica_timeout, set at each load
        self.last: float | None = None  # monotonic, when the last proof was sent
        self.since: float | None = None  # monotonic: proofs without a failure since then
        self.watchers: list[Callable[[float], None]] = []

    def configure(self, heartbeat: float, timeout: float) -> None:
        self.heartbeat, self.timeout = heartbeat, timeout

    def proved(self, sent: float) -> None:
        """A beat sent at `sent` (monotonic, on the store's thread) committed."""
        silence = 0.0 if self.last is None else max(0.0, sent - self.last)
        if self.last is None or sent > self.last:
            self.last = sent
        if self.since is None:
            self.since = sent
        for watcher in list(self.watchers):
            watcher(silence)

    def failed(self) -> None:
        """A beat failed, or the database is known away: the count of a connected
        spell starts again at the next proof."""
        self.since = None

    def judging(self) -> bool:
        """Whether this replica may take a silent peer for dead now: it has itself been
        proving itself for `replica_timeout`, without a failure."""
        since = self.since
        return since is not None and self.clock.monotonic() - since >= self.timeout

    def stale(self) -> bool:
        """Whether a claim must beat first: no proof within the last heartbeat."""
        last = self.last
        return last is None or self.clock.monotonic() - last >= self.heartbeat

    def silent_for(self) -> float | None:
        """Seconds since the last proof was sent (None: none yet)."""
        return None if self.last is None else self.clock.monotonic() - self.last

    def fence_after(self) -> float:
        """Seconds without a proof after which this replica takes itself for cut off: a
        heartbeat before the others may take it for dead."""
        return max(self.timeout - self.heartbeat, self.heartbeat)

    def lapsed(self) -> bool:
        """Whether this replica has gone `fence_after` without a proof (frozen, or cut off
        from the database): what it claimed before may be another's by now."""
        silent = self.silent_for()
        return silent is not None and silent >= self.fence_after()

    async def claim(
        self,
        ask: Callable[..., Awaitable[tuple[float | None, T] | Failed]],
        call: Callable[[Store], T],
        *,
        force: bool,
    ) -> T | Failed:
        """`call` (a claim) asked through `ask` (the recorder's, off the loop), beating
        first when stale: its answer, or FAILED (no proof then either)."""
        answer = await ask(self.beating_first(call), force=force)
        if isinstance(answer, Failed):
            self.failed()
            return FAILED
        sent, result = answer
        if sent is not None:
            self.proved(sent)
        return result

    def beating_first(
        self, call: Callable[[Store], T]
    ) -> Callable[[Store], tuple[float | None, T]]:
        """`call` (a claim) as one call of the store's thread that beats first when the
        last proof is stale (a failed beat fails it all): its answer, with when the beat
        was sent (None: none was needed), for `proved` once it is back on the loop."""
        stale, clock = self.stale(), self.clock

        def beat_then_call(store: Store) -> tuple[float | None, T]:
            sent = None
            if stale:
                sent = clock.monotonic()
                cast(Replicated, store).beat(clock.now())
            return sent, call(store)

        return beat_then_call
