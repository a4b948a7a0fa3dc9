"""Durable state: what ran, each job's cursor, the view `crond status` reads.

- `base`: the seam — the `Store` and `Reader` Protocols the daemon and the CLI use, and
  the plain values that cross them;
- `locate`: where the store is (`state_dir`), and opening it (the one place an
  implementation is chosen);
- `sqlite`: the one implementation, one SQLite file in the state directory (its writes);
  `sqlite_read` its reads; `schema` its tables and their upgrades; `files` its lock and
  its files on disk.

What the daemon does when the store fails is its own policy: crond/daemon/recorder.py.
"""
