"""The PostgreSQL store's named locks (docs/workflows.md, "With replicas"): a run's locks
taken in the transaction that claims its slot, or none of them, and given back in the
transaction that writes its run's end.

How a claim counts a lock's holders without a race: it first locks the lock's row of
`crond_locks` (FOR UPDATE, every lock of the wake in the order of names, so claims that
race never deadlock one another), then counts the lock's rows of `crond_lock_holds` in a
statement of its own, which sees every hold committed before it got the row. A run that
fits inserts one hold a lock; one that does not is refused (`Locked`, naming the lock
and its holders) and its claim undone (the caller's savepoint). The holds are deleted at
the run's end (`release`), with a dead replica's runs (`RELEASE_STALE`, by the survivor
that closes them lost), with the runs a replica's previous process left (`release_own`)
and with the runs claimed and never started (`release_runs`). The capacity counted is the
claiming replica's file's: during a rolling change of a capacity each replica applies
its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from crond.store.pg_conn import utc
from crond.store.rows import Locked, LockHolder

# A lock a start needs: its name, and its capacity as the claiming replica's file says.
Need = tuple[str, int]

# The holders named in a refusal, at most (the event names the lock's first holders).
NAMED = 10

_ROW = "INSERT INTO crond_locks (cluster, name) VALUES (%s, %s) ON CONFLICT DO NOTHING"
_LOCK = (
    "SELECT name FROM crond_locks WHERE cluster = %s AND name = ANY(%s) ORDER BY name FOR UPDATE"
)
_COUNT = (
    "SELECT name, count(*) FROM crond_lock_holds WHERE cluster = %s AND name = ANY(%s) "
    "GROUP BY name"
)
_HOLDERS = (
    "SELECT job, slot, replica FROM crond_lock_holds WHERE cluster = %s AND name = %s "
    "ORDER BY taken, run_id LIMIT %s"
)
_HOLD = (
    "INSERT INTO crond_lock_holds (cluster, name, run_id, job, slot, replica, taken) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
RELEASE_RUN = "DELETE FROM crond_lock_holds WHERE cluster = %s AND run_id = %s"
_RELEASE_RUNS = "DELETE FROM crond_lock_holds WHERE cluster = %s AND run_id = ANY(%s)"
_RELEASE_OWN = "DELETE FROM crond_lock_holds WHERE cluster = %s AND replica = %s"
# The holds of the replicas whose last beat is older than an instant (pg_cluster's
# `close_dead`, with its parameters: cluster, cluster, this replica, the instant).
RELEASE_STALE = (
    "DELETE FROM crond_lock_holds WHERE cluster = %s AND replica IN (SELECT name FROM "
    "crond_replicas WHERE cluster = %s AND name <> %s AND last_beat < %s)"
)
# Every hold of a cluster, by run (`crond ps`: the locks each run holds).
BY_RUN = "SELECT run_id, name FROM crond_lock_holds WHERE cluster = %s ORDER BY run_id, name"


def lock_rows(cur: Any, cluster: str, names: Iterable[str]) -> None:
    """The rows of the locks `names`, made if new, locked to the end of the transaction,
    in the order of names (the first thing a claim that needs locks does)."""
    ordered = sorted(set(names))
    if not ordered:
        return
    cur.executemany(_ROW, [(cluster, name) for name in ordered])
    cur.execute(_LOCK, (cluster, ordered))


def take(  # noqa: PLR0917  (a hold's columns)
    cur: Any,
    cluster: str,
    replica: str,
    job: str,
    run_id: str,
    slot: datetime,
    needs: Sequence[Need],
    taken: datetime,
) -> Locked | None:
    """`run_id` takes all the locks it `needs` (their rows locked by `lock_rows`), or
    none: the first without room and its holders."""
    names = [name for name, _ in needs]
    cur.execute(_COUNT, (cluster, names))
    held = {name: int(count) for name, count in cur.fetchall()}
    for name, capacity in needs:
        if held.get(name, 0) >= capacity:
            cur.execute(_HOLDERS, (cluster, name, NAMED))
            holders = tuple(LockHolder(j, utc(s), r) for j, s, r in cur.fetchall())
            return Locked(name, holders)
    cur.executemany(_HOLD, [(cluster, name, run_id, job, slot, replica, taken) for name in names])
    return None


def release_runs(cur: Any, cluster: str, run_ids: Sequence[str]) -> None:
    cur.execute(_RELEASE_RUNS, (cluster, list(run_ids)))


def release_own(cur: Any, cluster: str, replica: str) -> None:
    cur.execute(_RELEASE_OWN, (cluster, replica))
