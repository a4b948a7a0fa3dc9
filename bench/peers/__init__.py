"""Drivers that run the same benchmarks on the systems people use today.

Each driver writes the benchmark's jobs in its system's own format, starts the system
from a throwaway place (bench/.peers, installed by `make bench-peers`, or Debian's
`cron` package) and reports when it is ready. None of them is imported by crond.
"""

from __future__ import annotations

from common import System

from peers.apscheduler_peer import ApschedulerSystem
from peers.cron_peer import CronSystem
from peers.yacron_peer import YacronSystem


def peer_systems() -> list[System]:
    return [CronSystem(), YacronSystem(), ApschedulerSystem()]
