"""Durable state: what ran, each job's cursor, the view `crond status` reads.

- `sqlite`: the embedded store (one SQLite file in the state directory).
"""
