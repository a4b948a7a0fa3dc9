"""A run going on another replica, followed through the cluster's database (docs/web.md,
"Runs on other replicas"): the page's follow keeps its request fresh and reads back the
output tail the replica running the run writes (crond/store/pg_follow.py), once a second,
while a page looks; the run's end is its newest attempt's. Used when the daemon this
dashboard reaches (if any) does not run the run itself."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from crond.store.base import StateError

if TYPE_CHECKING:
    from crond.config.loaded import LoadedConfig
    from crond.store.pg_follow import FollowReads
    from crond.web.steer import Follow

ASK_S = 1.0
# Reads after the run's end is seen, at most, for its replica's last lines (it writes them
# at its next poll, within a second, and says `ended`).
_END_READS = 3


def connector(cfg: LoadedConfig) -> Callable[[], FollowReads] | None:
    """How to reach the file's cluster for a follow; None without a database."""
    from crond.store.locate import database_url  # noqa: PLC0415  (only with a database)

    url = database_url(cfg.daemon.database)
    if url is None:
        return None
    cluster = cfg.daemon.cluster

    def connect() -> FollowReads:
        try:
            from crond.store.pg_follow import FollowReads  # noqa: PLC0415  (psycopg)
        except ImportError:
            raise StateError("following a run on another replica needs psycopg") from None
        return FollowReads(url, cluster=cluster, replica="web", timeout=5.0)

    return connect


def follow_remote(follow: Follow, connect: Callable[[], FollowReads]) -> None:
    """Fill `follow` from the database until the run ends or no page looks any more."""
    run_id = follow.run_id or ""
    try:
        reads = connect()
    except StateError as exc:
        follow.error = str(exc)
        return
    try:
        after_end = 0
        while True:
            if time.monotonic() > follow.wanted_until:
                follow.error = "nobody is looking any more"
                return
            try:
                tail = reads.ask_tail(run_id)
            except StateError as exc:
                follow.error = str(exc)
                return
            if tail.attempt is None:
                follow.error = f"no run {run_id!r} in the cluster's history"
                return
            follow.add_tail(tail.lines, tail.seen, tail.attempt.get("replica"))
            if tail.attempt["finished"] is not None:
                after_end += 1
                if tail.ended or after_end >= _END_READS:
                    follow.result = {
                        "run_id": run_id,
                        "outcome": tail.attempt["outcome"],
                        "exit_code": tail.attempt["exit_code"],
                    }
                    return
            time.sleep(ASK_S)
    finally:
        reads.close()
