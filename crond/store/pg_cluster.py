"""The PostgreSQL store's cluster side: a replica's name registered (and refused while
another live process holds it), its heartbeat, the runs of dead replicas closed, the
kill requests every replica polls for, and who resumed a pause (the others log it).

**One name, one live process.** Two replicas of one name would close each other's runs as
`lost` and share their claims of `replicas: all` copies. At open, a replica inserts its
row if there is none and locks the row in the same transaction (`INSERT … ON CONFLICT DO
NOTHING`, then `SELECT … FOR UPDATE`), so of two processes of one name starting together
the second waits for the first's commit and then sees it. The row's holder is alive when,
on this host and boot, its pid runs (a pid equal to ours is us, restarted in a
container: not alive); elsewhere, when its last heartbeat is fresher than the timeout by
the database's clock. A restart after a crash is therefore never held back on one host,
and waits at most the timeout across hosts. docs/state.md says the rule for users.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg

from crond import __version__
from crond.store.base import AttemptRow, KillRow, Poll, ReplicaTaken
from crond.store.files import boot_id
from crond.store.pg_conn import PAUSES, Connection, attempt_of, pause_of, text, utc
from crond.store.pg_follow import WATCHED
from crond.store.pg_locks import RELEASE_STALE

# Kill requests are for runs going on now: a replica polls every second, so an hour old
# one has been seen by every replica alive.
KILL_KEEP = timedelta(hours=1)
# The most kill requests one `poll` returns (the rest come at the next).
POLL_KILLS = 1000

_CLOSED = (
    # An attempt as close_lost and close_dead return it: as it was before it was closed.
    "RETURNING id, run_id, job, slot, attempt, started, NULL::timestamptz, NULL::text, "
    "exit_code, duration_s, output, replica"
)
# The other replicas of the cluster whose last beat is older than a given instant.
_STALE = "SELECT name FROM crond_replicas WHERE cluster = %s AND name <> %s AND last_beat < %s"
_CLOSE_DEAD = (
    "UPDATE crond_attempts SET finished = %s, outcome = 'lost' WHERE cluster = %s "  # noqa: S608
    f"AND finished IS NULL AND replica IN ({_STALE}) {_CLOSED}"
)
CLOSE_LOST = (
    "UPDATE crond_attempts SET finished = %s, outcome = 'lost' WHERE cluster = %s "  # noqa: S608
    f"AND replica = %s AND finished IS NULL {_CLOSED}"
)
_TAKE_OUTBOX = f"UPDATE crond_outbox SET replica = %s WHERE cluster = %s AND replica IN ({_STALE})"  # noqa: S608
_BEAT = """
INSERT INTO crond_replicas (cluster, name, pid, host, boot_id, started, last_beat, version,
    config_digest, clock_skew_s)
VALUES (%(cluster)s, %(name)s, %(pid)s, %(host)s, %(boot)s, %(started)s, %(beat)s,
    %(version)s, %(digest)s, %(skew)s)
ON CONFLICT (cluster, name) DO UPDATE SET pid = excluded.pid, host = excluded.host,
    boot_id = excluded.boot_id, started = excluded.started, last_beat = excluded.last_beat,
    version = excluded.version, config_digest = excluded.config_digest,
    clock_skew_s = COALESCE(excluded.clock_skew_s, crond_replicas.clock_skew_s)
"""
# A name's first registration; no row back when the name has one already (committed, or
# being committed by a process starting with us: then this waits for its commit).
_REGISTER = _BEAT.split("ON CONFLICT", maxsplit=1)[0] + "ON CONFLICT DO NOTHING RETURNING 1"
# The name's row, locked to the end of the transaction, with the database's clock.
_HOLDER = (
    "SELECT pid, host, boot_id, last_beat, clock_timestamp() FROM crond_replicas "
    "WHERE cluster = %s AND name = %s FOR UPDATE"
)
# Both in the order of the (cluster, id) index, so that each reads only its cluster's few
# rows: ordered by id alone, the planner may walk the primary key through every cluster's.
_KILLS = (
    "SELECT id, target, who, replica, requested FROM crond_kills WHERE cluster = %s "
    "AND id > %s ORDER BY cluster, id LIMIT %s"
)
# A resume: the pause deleted and who ended it kept, in one statement (none kept when the
# job was not paused).
_RESUME = """
WITH ended AS (
    DELETE FROM crond_pauses WHERE cluster = %(cluster)s AND job = %(job)s RETURNING since
)
INSERT INTO crond_resumes (cluster, job, since, who, resumed)
SELECT %(cluster)s, %(job)s, since, %(who)s, %(now)s FROM ended
ON CONFLICT (cluster, job) DO UPDATE SET since = excluded.since, who = excluded.who,
    resumed = excluded.resumed
"""
_LAST_KILL = (
    "SELECT coalesce((SELECT id FROM crond_kills WHERE cluster = %s "
    "ORDER BY cluster DESC, id DESC LIMIT 1), 0)"
)


class ClusterRows(Connection):
    """What a replica does with the others of its cluster (base.Replicated's own part):
    one of the parts of crond.store.postgres.PostgresStore, beside its reads (pg_read.py),
    its runs (pg_write.py), its pauses and outbox (pg_records.py), all over one Connection
    (pg_conn.py)."""

    _started: datetime  # when this replica's store was opened (its heartbeat row says)
    _digest: str | None  # of the file last published: the heartbeat's

    @property
    def replica(self) -> str:
        return self._replica

    def _beat_values(self, now: datetime, skew: float | None = None) -> dict[str, Any]:
        return {
            "cluster": self.cluster, "name": self._replica, "pid": os.getpid(),
            "host": socket.gethostname(), "boot": boot_id(), "started": self._started,
            "beat": now, "version": __version__, "digest": self._digest, "skew": skew,
        }  # fmt: skip

    def _register(self, replica_timeout: timedelta) -> None:
        """Take this replica's name in its cluster, in one transaction with its row
        locked; ReplicaTaken while another live process holds it."""
        values = self._beat_values(self._started)
        with self._transaction() as cur:
            cur.execute(_REGISTER, values)
            if cur.fetchone() is None:  # the name has a row: whose, and is it alive?
                cur.execute(_HOLDER, (self.cluster, self._replica))
                pid, host, boot, last_beat, db_now = cur.fetchone()  # type: ignore[misc]
                self._refuse_live(pid, host, boot, utc(last_beat), utc(db_now), replica_timeout)
                cur.execute(_BEAT, values)

    def _refuse_live(  # noqa: PLR0917  (the holder's row, as read)
        self,
        pid: int,
        host: str,
        boot: str | None,
        last_beat: datetime,
        db_now: datetime,
        replica_timeout: timedelta,
    ) -> None:
        """Raise ReplicaTaken when the row's holder is alive (the module says when)."""
        here = host == socket.gethostname() and boot is not None and boot == boot_id()
        alive = _pid_runs(pid) if here else last_beat > db_now - replica_timeout
        if not alive:
            return
        age = max(0, round((db_now - last_beat).total_seconds()))
        raise ReplicaTaken(
            f"replica {_shown(self._replica)} of cluster {_shown(self.cluster)} is already "
            f"running (pid {pid} on host {_shown(host)}, last heartbeat {age}s ago): stop "
            "it, or give this one another name (--replica or CROND_REPLICA)"
        )

    def beat(self, now: datetime, skew: float | None = None) -> datetime:
        with self._transaction() as cur:
            cur.execute(_BEAT + " RETURNING clock_timestamp()", self._beat_values(now, skew))
            return utc(cur.fetchone()[0])  # type: ignore[index]

    def close_dead(self, now: datetime, timeout: timedelta) -> list[AttemptRow]:
        """One UPDATE of the open rows: a survivor racing this one waits for its row locks,
        then finds them closed (`finished IS NULL` is checked again on the row it waited
        for) and skips them. The dead replicas' notifications not yet delivered are this
        replica's to send from now on."""
        since = now - timeout
        with self._transaction() as cur:
            cur.execute(_CLOSE_DEAD, (now, self.cluster, self.cluster, self._replica, since))
            rows = cur.fetchall()
            self._summaries_lost(cur, rows, now)
            # Their runs' locks are free: the runs are lost (docs/workflows.md).
            cur.execute(RELEASE_STALE, (self.cluster, self.cluster, self._replica, since))
            cur.execute(
                _TAKE_OUTBOX, (self._replica, self.cluster, self.cluster, self._replica, since)
            )
        return self._decoded(lambda: sorted(map(attempt_of, rows), key=lambda r: r.id))

    def request_kill(self, target: str, by: str, now: datetime) -> int:
        with self._transaction() as cur:
            cur.execute(
                "INSERT INTO crond_kills (cluster, target, who, replica, requested) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (self.cluster, text(target), text(by), self._replica, now),
            )
            return int(cur.fetchone()[0])  # type: ignore[index]

    def poll(self, after: int) -> Poll:
        """Four index reads in one transaction (docs/state.md has what one costs); the
        fourth, the runs a dashboard watches (pg_follow.py), reads a table that is empty
        while no one watches."""
        with self._transaction() as cur:
            cur.execute(PAUSES, (self.cluster,))
            pauses = cur.fetchall()
            cur.execute(_KILLS, (self.cluster, after, POLL_KILLS))
            kills = cur.fetchall()
            cur.execute(_LAST_KILL, (self.cluster,))
            last = int(cur.fetchone()[0])  # type: ignore[index]
            cur.execute(WATCHED, (self.cluster,))
            watched = cur.fetchall()
        return self._decoded(
            lambda: Poll(
                {r[0]: pause_of(r) for r in pauses},
                [KillRow(int(i), t, w, r, utc(at)) for i, t, w, r, at in kills],
                last,
                frozenset(str(r[0]) for r in watched),
            )
        )

    def resume(self, job: str, by: str, now: datetime) -> None:
        with self._transaction() as cur:
            cur.execute(_RESUME, {"cluster": self.cluster, "job": job, "who": text(by), "now": now})

    def resumed_by(self, job: str, since: datetime) -> str | None:
        """Who ended the job's pause that began at `since`, or a later pause of it (paused
        and resumed again between two polls: the last resume's); None when none did
        (the pause ran out, or its resume is older than an hour)."""
        rows = self._all(
            "SELECT who FROM crond_resumes WHERE cluster = %s AND job = %s AND since >= %s",
            (self.cluster, job, since),
        )
        return str(rows[0][0]) if rows else None

    def _prune_kills(self, cur: psycopg.Cursor[Any]) -> None:
        """Kill requests and resumes an hour old: every live replica has polled them."""
        cur.execute(
            "DELETE FROM crond_kills WHERE cluster = %s AND requested < now() - %s",
            (self.cluster, KILL_KEEP),
        )
        cur.execute(
            "DELETE FROM crond_resumes WHERE cluster = %s AND resumed < now() - %s",
            (self.cluster, KILL_KEEP),
        )

    def resume_many(self, jobs: Sequence[str], by: str, now: datetime) -> None:
        who = text(by)
        with self._transaction() as cur:
            cur.executemany(
                _RESUME,
                [{"cluster": self.cluster, "job": job, "who": who, "now": now}
                 for job in sorted(jobs)],
            )  # fmt: skip


def _pid_runs(pid: int) -> bool:
    """Whether a process of that pid runs here (another user's answers EPERM: it does).
    Our own pid is not another process: it is this one, restarted in a fresh container."""
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _shown(name: str) -> str:
    """A name read from the database, as a message may show it: printable, bounded."""
    name = name[:200]
    return name if name.isprintable() and name.strip() == name and name else repr(name)
