"""Durable state: what ran, each job's cursor, the view `crond status` reads.

- `base`: the seam — the `Store` and `Reader` Protocols the daemon and the CLI use, and
  the plain values that cross them; the Store is split by concern in `base_runs` (runs
  and cursors), `base_records` (pauses, the outbox) and `base_cluster` (replicas), all
  re-exported from `base`;
- `locate`: where the store is (`state_dir`), and opening it: the SQLite store for the
  daemon, and for `crond status`/`history` either implementation (a cluster's database
  when the file has `daemon.database` or CROND_DATABASE_URL is set); a daemon with a
  database opens it in crond/daemon/lifecycle.py;
- two implementations:
  - `sqlite`: one daemon's, one SQLite file in the state directory (its writes);
    `sqlite_write` its writes of runs; `sqlite_read` its reads; `schema` its tables and
    their upgrades; `files` its lock and its files on disk;
  - `postgres`: the replicas', one PostgreSQL database shared by a cluster (the claims
    that start each slot once); its parts `pg_conn`, `pg_read`, `pg_cluster`,
    `pg_write`, `pg_abandon`, `pg_locks`, `pg_records`, its tables `schema_pg`. psycopg (the
    `crond[postgres]` extra) is imported only when a database is used.

What the daemon does when the store fails is its own policy: crond/daemon/stores.py.
"""
