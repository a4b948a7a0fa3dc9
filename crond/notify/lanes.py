"""Delivery's queues (delivery.py): each notifier is a lane, and so are each job's pings.

Per lane, items start in the order they were made: a retry before any newer item, and
no newer item while a retry is in flight, so a receiver that was down is not told
`recovered` before the `failed` it ends. At most `flying` tries of a lane run at once (a
job's pings: one); at most `limit` items wait in a lane, past which the oldest is pushed
out. The lanes are served in turn: one that started something goes to the back.

How many tries run in all is the caller's (`room`); no time is read here (`now` is
Delivery's monotonic seconds).
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

from crond.notify.outbox import OutboxItem

LaneKey = tuple[str, str]  # ("notify", notifier) or ("ping", job)


@dataclass(eq=False)
class Entry:
    item: OutboxItem
    id: int | None  # in the outbox; None: not kept (no outbox, or it failed)
    seq: int  # the order items were made in
    tries: int = 0
    due: float = 0.0  # monotonic: when its next try may start


@dataclass(eq=False)
class Lane:
    waiting: deque[Entry] = field(default_factory=deque)  # never tried, oldest first
    retrying: list[Entry] = field(default_factory=list)  # tried, waiting for `due`
    flying: int = 0
    flying_again: int = 0  # of those in flight, retries: newer items wait for them too

    def __len__(self) -> int:
        return len(self.waiting) + len(self.retrying)

    def next_entry(self, now: float) -> Entry | None:
        """The oldest made entry, if it may start: a retry once it is due; a new item
        only while no older one waits for its retry, so a receiver that was down is not
        told `recovered` before the `failed` it ends."""
        if self.retrying:
            entry = min(self.retrying, key=lambda e: e.seq)
            if entry.due > now:
                return None
            self.retrying.remove(entry)
            return entry
        if self.flying_again:  # a retry in flight: the newer ones go once it is settled
            return None
        return self.waiting.popleft() if self.waiting else None

    def oldest(self) -> Entry:
        """The oldest made entry that waits (tries start in order: a retrying one is older
        than any never tried)."""
        if self.retrying:
            entry = min(self.retrying, key=lambda e: e.seq)
            self.retrying.remove(entry)
            return entry
        return self.waiting.popleft()


class Lanes:
    """Every lane with something queued or flying, in the order they are served."""

    def __init__(self, *, limit: int, flying: int) -> None:
        self.limit = limit
        self.flying = flying
        self._lanes: dict[LaneKey, Lane] = {}
        self._seq = itertools.count()

    def add(self, item: OutboxItem, outbox_id: int | None) -> list[Entry]:
        """Queue `item` in its lane; the oldest entries pushed out past `limit`."""
        key: LaneKey = ("ping", item.job) if item.kind == "ping" else ("notify", item.notifier)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = Lane()
        lane.waiting.append(Entry(item, outbox_id, next(self._seq)))
        pushed_out = []
        while len(lane) > self.limit:
            pushed_out.append(lane.oldest())
        return pushed_out

    def take(self, now: float, room: int) -> list[tuple[LaneKey, Lane, Entry]]:
        """What may start now, per lane in order, at most `room` in all; each is counted
        as flying in its lane until `landed`."""
        starting: list[tuple[LaneKey, Lane, Entry]] = []
        for key in list(self._lanes):
            if len(starting) >= room:
                break
            lane = self._lanes[key]
            started = False
            # A job's pings go one at a time: healthchecks.io must see a run's /start
            # before its end, and a run's end before the next run's /start.
            cap = 1 if key[0] == "ping" else self.flying
            while lane.flying < cap and len(starting) < room:
                entry = lane.next_entry(now)
                if entry is None:
                    break
                lane.flying += 1
                lane.flying_again += 1 if entry.tries else 0
                starting.append((key, lane, entry))
                started = True
            if not lane and not lane.flying:
                del self._lanes[key]
            elif started:  # to the back: the next pass serves the other lanes first
                self._lanes[key] = self._lanes.pop(key)
        return starting

    def landed(self, key: LaneKey, lane: Lane, *, retried: bool) -> None:
        """A try taken from `lane` ended (its entry is settled: done, or retrying)."""
        lane.flying -= 1
        lane.flying_again -= 1 if retried else 0
        if not lane and not lane.flying and self._lanes.get(key) is lane:
            del self._lanes[key]

    def idle_until(self, deadline: float) -> bool:
        """Nothing flies, and nothing waits that may start before `deadline`."""
        return all(
            not lane.flying and not lane.waiting and all(e.due > deadline for e in lane.retrying)
            for lane in self._lanes.values()
        )

    def waiting(self) -> int:
        """The entries queued in all lanes (not those flying)."""
        return sum(len(lane) for lane in self._lanes.values())

    def clear(self) -> None:
        self._lanes.clear()
