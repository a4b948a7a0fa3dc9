"""A job's `start` and `end` (docs/configuration.md): `end` before `start` is refused,
located at the value of `end`, as any bad value is."""

from __future__ import annotations

from tests.config.test_locks_config import problems


def test_end_before_start_is_located_at_the_end_value() -> None:
    text = (
        "jobs:\n"
        "  a: {every: 1m, command: x, start: 2026-02-01T00:00:00Z, end: 2026-01-01T00:00:00Z}\n"
        "  b:\n"
        "    every: 1m\n"
        "    command: x\n"
        "    start: 2026-02-01T00:00:00Z\n"
        "    end:   2026-01-01T00:00:00Z\n"
    )
    said = (
        "end 2026-01-01T00:00:00+00:00 is before start 2026-02-01T00:00:00+00:00: the job "
        "would never fire (swap them, or remove one)"
    )
    assert problems(text) == [
        f"s.yaml:2:64: jobs.a.end: {said}",
        f"s.yaml:7:12: jobs.b.end: {said}",
    ]
