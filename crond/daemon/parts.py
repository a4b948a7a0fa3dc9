"""The daemon's parts, made once and wired together as they are made: each is given what
it calls when it is built, in an order that allows it, so none is wired afterwards.

The daemon (`Service`, crond/daemon/lifecycle.py) owns them and is what they call back
into (`Owner`): the loop's Effects, the recorder's Told, the heartbeat's `publish` and
`replica_taken`, SIGHUP's `swap`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from structlog.typing import FilteringBoundLogger

from crond.clock import Clock
from crond.config.loaded import LoadedConfig
from crond.daemon import stores
from crond.daemon.backfilling import Backfilling
from crond.daemon.chaining import Chaining
from crond.daemon.cluster import Cluster, database_url, logged_as, replica_name
from crond.daemon.control import Steering
from crond.daemon.heartbeat import Heartbeat
from crond.daemon.loop import Loop
from crond.daemon.pausing import Pausing
from crond.daemon.recorder import StoreRecorder, Told
from crond.daemon.runs import Effects
from crond.daemon.serving import Serving
from crond.daemon.signals import Signals
from crond.daemon.spawning import Spawner
from crond.daemon.systemd import Systemd
from crond.daemon.telling import Telling
from crond.daemon.view import StoreView
from crond.run import runner
from crond.store import locate
from crond.store.base import ReplicaTaken


class Owner(Effects[runner.Run], Told, Protocol):
    """What the parts call back into: the daemon, which holds the file and its digest."""

    def publish(self) -> None:
        """The jobs as the daemon now sees them, into the store for `crond status`."""

    def replica_taken(self, exc: ReplicaTaken) -> None:
        """A live replica has this one's name: this one stops."""

    def swap(self, new: LoadedConfig, digest: str | None) -> dict[str, Any]:
        """A reloaded file that passed, swapped in: the reload's outcome."""


@dataclass(frozen=True)
class Parts:
    """What `make` made; the daemon holds each under the same name (tests reach them so)."""

    notifier: Systemd
    named: dict[str, str]  # which replica of which cluster: in daemon.started, the store's events
    recorder: StoreRecorder
    spawner: Spawner
    loop: Loop[runner.Run]
    view: StoreView
    telling: Telling
    cluster: Cluster | None  # a replica's
    heartbeat: Heartbeat
    serving: Serving
    signals: Signals
    pausing: Pausing
    steering: Steering
    chaining: Chaining


def make(
    path: Path,
    cfg: LoadedConfig,
    log: FilteringBoundLogger,
    clock: Clock,
    owner: Owner,
    *,
    state_dir: str | None,  # `crond run --state-dir`
    replica: str | None,  # `crond run --replica`
) -> Parts:
    """The parts of the daemon serving `cfg` (read from `path`), calling back into `owner`."""
    notifier = Systemd()
    url = database_url(cfg)
    name = None if url is None else replica_name(replica, cfg)
    named = logged_as(name, cfg)
    opener = stores.chosen(cfg, locate.resolve_dir(state_dir, cfg.daemon.state_dir), url, name)
    recorder = StoreRecorder(opener, log.bind(**named), clock, replica=name, told=owner)
    spawner = Spawner(log=log, clock=clock, recorder=recorder, database=url is not None, cfg=cfg)
    loop: Loop[runner.Run] = Loop(
        clock=clock, log=log, effects=owner, heartbeat=cfg.daemon.heartbeat
    )
    telling = Telling(log=log, clock=clock, loop=loop, recorder=recorder)
    cluster = None if name is None else Cluster(
        log=log, clock=clock, loop=loop, recorder=recorder,
        on_paused=telling.paused, on_lost=telling.lost,
    )  # fmt: skip
    heartbeat = Heartbeat(
        loop, recorder, notifier, log, owner.publish, on_taken=owner.replica_taken,
        cluster=None if cluster is None else cluster.beat,
    )  # fmt: skip
    signals = Signals(
        path=path, log=log, notifier=notifier, loop=loop, swap=owner.swap,
        on_reloaded=telling.reloaded,
    )  # fmt: skip
    pausing = Pausing(
        log=log, clock=clock, loop=loop, recorder=recorder, on_paused=telling.paused,
        noted=None if cluster is None else cluster.polling.noted,
    )  # fmt: skip
    steering = Steering(
        log=log, clock=clock, loop=loop, pausing=pausing, cluster=cluster,
        backfilling=Backfilling(loop, recorder, spawner),
        reload=signals.reload_asked,  # `crond reload`, as SIGHUP
    )  # fmt: skip
    return Parts(
        notifier=notifier, named=named, recorder=recorder, spawner=spawner, loop=loop,
        view=StoreView(clock=clock, loop=loop, recorder=recorder), telling=telling,
        cluster=cluster, heartbeat=heartbeat,
        serving=Serving(log=log, clock=clock, telling=telling, heartbeat=heartbeat),
        signals=signals, pausing=pausing, steering=steering,
        chaining=Chaining(loop, recorder, spawner, steering.no_chain),
    )  # fmt: skip
