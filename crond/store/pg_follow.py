"""The live output of a run on another replica, through the cluster's database, for the
dashboard's Now page (docs/web.md, "Runs on other replicas").

A dashboard that watches a run keeps a row of `crond_follows` fresh (`until`: the
database's clock a few seconds ahead, moved on while a page looks); each replica's
second's poll reads the fresh rows (`WATCHED`, in the poll's own transaction: nothing
more while no one watches), and the replica running one of those runs writes its output
tail into the row, at most once a poll and only when lines came (`TailWrites`). The
dashboard reads the row back with the run's newest attempt (`FollowReads`). Rows a
dashboard stopped moving on are deleted by the next ask of any dashboard.

Bounded: at most 64 runs are watched in a cluster at once (WATCHED); a tail is the last
`TAIL_LINES` lines, each cut to `LINE_CHARS` characters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from crond.store.pg_conn import Connection, text, utc
from crond.store.rows import LINE_CHARS, TAIL_LINES

# A request's life after each ask, in seconds (a page asks every second); an expired one
# is deleted a minute later by a dashboard's ask (_PRUNE).
FRESH_S = 10

WATCHED = (
    "SELECT run_id FROM crond_follows WHERE cluster = %s AND until > clock_timestamp() "
    "ORDER BY run_id LIMIT 64"
)
_WRITE = (
    "UPDATE crond_follows SET lines = %s, seen = %s, ended = %s, written = clock_timestamp() "
    "WHERE cluster = %s AND run_id = %s"
)
_ASK = (
    "INSERT INTO crond_follows (cluster, run_id, until) "
    "VALUES (%s, %s, clock_timestamp() + make_interval(secs => %s)) "
    "ON CONFLICT (cluster, run_id) DO UPDATE SET until = excluded.until "
    "RETURNING lines, seen, ended"
)
_PRUNE = (
    "DELETE FROM crond_follows WHERE cluster = %s "
    "AND until < clock_timestamp() - interval '1 minute'"
)
_NEWEST = (
    "SELECT attempt, finished, outcome, exit_code, replica FROM crond_attempts "
    "WHERE cluster = %s AND run_id = %s ORDER BY id DESC LIMIT 1"
)


class Tail(NamedTuple):
    """A watched run as the dashboard reads it: the lines its replica wrote (stream, line),
    how many it has seen in all (the first kept is number `seen - len(lines)`), whether
    the attempt it wrote them for had ended, and the run's newest attempt (None: no such
    run in the cluster)."""

    lines: list[tuple[str, str]]
    seen: int
    ended: bool
    attempt: dict[str, Any] | None


class TailWrites(Connection):
    """A replica's side: the tails of the watched runs it runs."""

    def write_tails(
        self, tails: Sequence[tuple[str, Sequence[tuple[str, str]], int, bool]]
    ) -> None:
        """Each (run_id, its last lines, lines seen in all, whether it ended), written into
        its request's row; a request gone meanwhile is left gone."""
        rows = [
            (_encode(lines), seen, ended, self.cluster, text(run_id))
            for run_id, lines, seen, ended in tails
        ]
        with self._transaction() as cur:
            cur.executemany(_WRITE, rows)


class FollowReads(Connection):
    """A dashboard's side: ask for a run's tail (the request made fresh), read it back."""

    def ask_tail(self, run_id: str) -> Tail:
        with self._transaction() as cur:
            cur.execute(_PRUNE, (self.cluster,))
            cur.execute(_ASK, (self.cluster, text(run_id), FRESH_S))
            lines, seen, ended = cur.fetchone()  # type: ignore[misc]
            cur.execute(_NEWEST, (self.cluster, text(run_id)))
            newest = cur.fetchone()
        return self._decoded(lambda: Tail(_decode(lines), int(seen), bool(ended), _attempt(newest)))


def _encode(lines: Sequence[tuple[str, str]]) -> str:
    return json.dumps([[s, line[:LINE_CHARS]] for s, line in list(lines)[-TAIL_LINES:]])


def _decode(raw: str | None) -> list[tuple[str, str]]:
    if not raw:
        return []
    return [(str(s), str(line)) for s, line in json.loads(raw)][-TAIL_LINES:]


def _attempt(row: Any) -> dict[str, Any] | None:
    if row is None:
        return None
    attempt, finished, outcome, exit_code, replica = row
    return {
        "attempt": int(attempt),
        "finished": None if finished is None else utc(finished),
        "outcome": outcome,
        "exit_code": exit_code,
        "replica": replica,
    }
