"""A job's fires through its calendars: `days`, `skip`, `nth_day` and `roll`
(docs/schedules.md, "Calendars").

A fire's day is the local date of the fire in the job's zone. The *good* days are the
days of `days` (every day without it), of those the `nth_day` of each month when set,
less the days of the `skip` calendars: a year's good days are one bit set
(calendars.py). A fire on a good day is kept unless a timed window of a `skip` calendar
holds it; a fire on another day is no fire at all, or with `roll` moves to the nearest
good day (at most ROLL_DAYS away) at the same wall time. The next good day is found in
the bit sets, so a sparse calendar costs no walk over days, and nothing is looked for
more than HORIZON_YEARS ahead: `next_after` then says None (no fire).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from crond.when.calendars import Calendar, all_days, find_day, nth_of_months, year_start
from crond.when.timing import Fire, Timing

__all__ = ["HORIZON_YEARS", "ROLL_DAYS", "CalendarTiming", "DayRules", "Removed"]

HORIZON_YEARS = 10  # how far ahead a next fire is looked for (docs/schedules.md)
ROLL_DAYS = 31  # how far `roll` moves a fire at most
_BACK = timedelta(hours=4)  # a local day starts within this of its midnight's instant
_US = timedelta(microseconds=1)
_ONE = timedelta(days=1)


@dataclass(eq=False)
class DayRules:
    """A job's calendar fields, resolved (shared by the jobs that write the same)."""

    days: Calendar | None = None
    skip: Sequence[Calendar] = ()
    nth_day: int | None = None
    roll: str | None = None  # "next" or "previous"
    _good: dict[int, int] = field(default_factory=dict, repr=False)

    def good_mask(self, year: int) -> int:
        bits = self._good.get(year)
        if bits is None:
            # all_days: year 9999 has no 1 January 10000 to count its days to
            bits = self.days.mask(year) if self.days is not None else all_days(year)
            if self.nth_day is not None:
                bits = nth_of_months(bits, year, self.nth_day)
            for other in self.skip:
                bits &= ~other.mask(year)
            self._good[year] = bits
        return bits

    def good(self, day: date) -> bool:
        return bool(self.good_mask(day.year) >> (day.toordinal() - year_start(day.year)) & 1)

    def all_good(self, lo: date, hi: date) -> bool:
        """Whether every day from lo to hi (both included) is good."""
        while lo <= hi:
            year = lo.year
            last = min(hi, date(year, 12, 31))
            first_bit = lo.toordinal() - year_start(year)
            n = last.toordinal() - lo.toordinal() + 1
            want = (1 << n) - 1
            if self.good_mask(year) >> first_bit & want != want:
                return False
            lo = last + timedelta(days=1)
        return True

    def find(self, day: date, *, forward: bool = True) -> date | None:
        return find_day(self.good_mask, day, forward=forward, years=HORIZON_YEARS)

    def why_not(self, day: date) -> str:
        """Why a fire on `day` is removed: "skipped: de-holidays (Christmas Day)"."""
        for other in self.skip:
            if day in other:
                return f"skipped: {other.why(day)}"
        if self.days is not None and day not in self.days:
            return f"not in {self.days.name}"
        which = "last" if self.nth_day == -1 else f"nth_day {self.nth_day}"
        of = f" of {self.days.name}" if self.days is not None else ""
        return f"not the {which} day{of} in its month"

    def windows_of_skip(self) -> bool:
        """Whether a skip calendar holds timed windows."""
        return any(other.all_windows() for other in self.skip)

    def windows(self, zone: tzinfo) -> tuple[list[datetime], list[tuple[datetime, str]]]:
        """The skip calendars' windows in `zone`: starts (sorted) and (end, label)."""
        spans = sorted(
            (*w.resolved(zone), f"{name} ({w.label})" if w.label else name)
            for other in self.skip
            for w, name in other.all_windows()
        )
        return [s for s, _, _ in spans], [(e, label) for _, e, label in spans]


class Removed:
    """A fire a calendar took away or moved: for `crond next --all`."""

    __slots__ = ("fire", "why")

    def __init__(self, fire: Fire, why: str) -> None:
        self.fire, self.why = fire, why


class CalendarTiming:
    """A Timing whose fires pass through a job's DayRules."""

    period: timedelta | None = None

    def __init__(self, inner: Timing, rules: DayRules, zone: tzinfo) -> None:
        self.inner, self.rules, self.zone = inner, rules, zone
        self._starts, self._ends = rules.windows(zone)

    def __repr__(self) -> str:
        return f"CalendarTiming({self.inner!r})"

    def _in_window(self, at: datetime) -> tuple[datetime, str] | None:
        """The window holding `at` (the one that ends last), if any."""
        i = bisect.bisect_right(self._starts, at)
        best = None
        for j in range(i):  # windows are few; a fire is inside when start <= at < end
            end, label = self._ends[j]
            if at < end and (best is None or end > best[0]):
                best = (end, label)
        return best

    def _day_start(self, day: date) -> datetime:
        return datetime.combine(day, time(0), self.zone).astimezone(UTC) - _BACK

    def next_after(self, t: datetime) -> Fire | None:
        if self.rules.roll is not None:
            return self._rolled_after(t)
        x = t
        limit = t.astimezone(self.zone).date() + timedelta(days=366 * HORIZON_YEARS)
        while True:
            fire = self.inner.next_after(x)
            if fire is None:
                return None
            day = fire.local.date()
            if day > limit:
                return None
            if not self.rules.good(day):
                good = self.rules.find(day + timedelta(days=1))
                if good is None or good > limit:
                    return None
                x = max(fire.at, self._day_start(good))
                continue
            window = self._in_window(fire.at)
            if window is not None:
                x = max(fire.at, window[0] - _US)
                continue
            return fire

    def removed(self, after: datetime, until: datetime, limit: int) -> list[Removed]:
        """The plain fires in (after, until] the calendars take away (a rolled fire is
        shown where it lands instead), at most `limit`: for `crond next --all`."""
        found: list[Removed] = []
        for fire in self.inner.fires(after):
            if fire.at > until or len(found) >= limit:
                break
            day = fire.local.date()
            if not self.rules.good(day):
                if self.rules.roll is None:
                    found.append(Removed(fire, self.rules.why_not(day)))
                continue
            window = self._in_window(fire.at)
            if window is not None:
                found.append(Removed(fire, f"skipped: {window[1]}"))
        return found

    def fires(self, after: datetime) -> Iterator[Fire]:
        t = after
        while (fire := self.next_after(t)) is not None:
            yield fire
            t = fire.at

    # --- roll ------------------------------------------------------------------------

    def _rolled_after(self, t: datetime) -> Fire | None:
        rules, forward = self.rules, self.rules.roll == "next"
        first = t.astimezone(self.zone).date() - timedelta(days=1)
        plain = self.inner.next_after(t)
        if plain is None:
            return None
        # The usual case: no bad day near, so nothing rolls in before the plain fire.
        day = plain.local.date()
        if day - first < timedelta(days=ROLL_DAYS) and rules.all_good(first, day + _ONE):
            return plain if self._in_window(plain.at) is None else self._after_window(plain)
        limit = first + timedelta(days=366 * HORIZON_YEARS)
        good = rules.find(first)
        while good is not None and good <= limit:
            found = [
                fire
                for fire in self._onto(good, forward)
                if fire.at > t and self._in_window(fire.at) is None
            ]
            if found:
                return min(found)
            good = rules.find(good + timedelta(days=1))
        return None

    def _after_window(self, fire: Fire) -> Fire | None:
        window = self._in_window(fire.at)
        assert window is not None
        return self._rolled_after(max(fire.at, window[0] - _US))

    def _onto(self, good: date, forward: bool) -> list[Fire]:
        """The fires that end on the good day `good`: its own, and those of the days
        between it and the good day before it (`forward`) or after it, at most ROLL_DAYS
        away, moved onto it at their wall time. One fire per instant."""
        rules, step = self.rules, timedelta(days=1)
        if forward:
            prev = rules.find(good - step, forward=False)
            lo = max(good - timedelta(days=ROLL_DAYS), (prev or date.min) + step)
            hi = good
        else:
            nxt = rules.find(good + step)
            lo = good
            hi = min(good + timedelta(days=ROLL_DAYS), (nxt or date.max) - step)
        out: dict[datetime, Fire] = {}
        for fire in self.inner.fires(self._day_start(lo)):
            day = fire.local.date()
            if day > hi:
                break
            if day < lo:
                continue
            moved = fire if day == good else self._at_wall(good, fire)
            out.setdefault(moved.at, moved)
        return sorted(out.values())

    def _at_wall(self, day: date, fire: Fire) -> Fire:
        """`fire`'s wall time on `day`: on the first pass of a repeated one, at the jump
        when it does not exist that day (docs/schedules.md, R4, R5)."""
        wall = datetime.combine(day, fire.local.time())
        at = wall.replace(tzinfo=self.zone).astimezone(UTC)
        if at.astimezone(self.zone).replace(tzinfo=None) != wall:  # in a gap: the jump
            lo, hi = wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC), at
            while hi - lo > timedelta(seconds=1):
                mid = lo + (hi - lo) / 2
                if mid.astimezone(self.zone).replace(tzinfo=None) > wall:
                    hi = mid
                else:
                    lo = mid
            at = hi.replace(microsecond=0)
            note = (
                f"rolled from {fire.local:%Y-%m-%d}; {fire.local:%H:%M} skipped by DST; "
                "runs at the jump (R4)"
            )
        else:
            note = f"rolled from {fire.local:%Y-%m-%d}"
        return Fire(at, at.astimezone(self.zone), note)
