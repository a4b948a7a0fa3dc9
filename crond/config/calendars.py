"""The `calendars:` section (docs/configuration.md, "Calendars"): each calendar as a
frozen model with its checks, and `build`, which turns them into crond.when.calendars
values once the whole file is valid: names that name no calendar (with "did you mean"),
cycles of `include`/`except`, and each job's DayRules. iCalendar files are read here
(calendar_ics.py), as the schedules file is.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any, Self

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from crond.config.fieldtypes import FrozenModel, field_error
from crond.config.wording import close_matches, show

__all__ = ["CalendarDef", "WindowDef", "parse_dates", "parse_weekdays"]

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY = r"(\d{4})-(\d{2})-(\d{2})"
_MONTH_DAY = r"(\d{2})-(\d{2})"
_DATE_FORMS = (
    "write a day (2026-12-24), a range (2026-12-28..2026-12-31), a day of every year "
    "(12-24) or a range of every year (12-24..12-31)"
)
MAX_DATES = 10_000  # items of one `dates:` list


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise PydanticCustomError("crond", f"{show(text)} is not a day; {_DATE_FORMS}") from None


def _month_day(text: str) -> tuple[int, int]:
    month, day = int(text[:2]), int(text[3:])
    try:
        date(2000, month, day)  # a leap year: 02-29 is a day of some years
    except ValueError:
        raise PydanticCustomError(
            "crond", f"{show(text)} is not a day of the year (month-day, 01-01 to 12-31)"
        ) from None
    return month, day


def parse_dates(items: list[Any]) -> tuple[list[tuple[date, date]], list[Any]]:
    """`dates:` into spans and yearly spans ((month, day), (month, day))."""
    spans: list[tuple[date, date]] = []
    yearly: list[Any] = []
    for item in items:
        if isinstance(item, datetime) or not isinstance(item, (date, str)):
            raise PydanticCustomError("crond", f"{show(item)} is not a day; {_DATE_FORMS}")
        if isinstance(item, date):
            spans.append((item, item))
            continue
        lo, dots, hi = item.strip().partition("..")
        hi = hi if dots else lo
        if re.fullmatch(_DAY, lo) and re.fullmatch(_DAY, hi):
            first, last = _day(lo), _day(hi)
            if last < first:
                raise PydanticCustomError(
                    "crond", f"{show(item)} runs backwards (write {hi}..{lo})"
                )
            spans.append((first, last))
        elif re.fullmatch(_MONTH_DAY, lo) and re.fullmatch(_MONTH_DAY, hi):
            first_md, last_md = _month_day(lo), _month_day(hi)
            if last_md < first_md:
                raise PydanticCustomError(
                    "crond",
                    f"{show(item)} runs over the year's end: write two ranges "
                    f"({lo}..12-31, 01-01..{hi})",
                )
            yearly.append((first_md, last_md))
        else:
            raise PydanticCustomError("crond", f"{show(item)} is not a day; {_DATE_FORMS}")
    return spans, yearly


def parse_weekdays(text: str) -> frozenset[int]:
    """`mon-fri`, `sat,sun`, `mon,wed-fri` into Monday=0 … Sunday=6."""
    days: set[int] = set()
    for part in text.lower().replace(" ", "").split(","):
        lo, dash, hi = part.partition("-")
        ends = []
        for name in (lo, hi) if dash else (lo,):
            if name not in WEEKDAYS:
                close = close_matches(name, list(WEEKDAYS), cutoff=0.5)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                raise PydanticCustomError(
                    "crond",
                    f"{show(name)} is not a day of the week{hint}; write names "
                    "mon … sun, ranges (mon-fri) and lists (sat,sun)",
                )
            ends.append(WEEKDAYS.index(name))
        if ends[-1] < ends[0]:
            raise PydanticCustomError(
                "crond",
                f"{show(part)} runs backwards: a week here runs mon … sun "
                f"(write {WEEKDAYS[ends[0]]}-sun,mon-{WEEKDAYS[ends[-1]]})",
            )
        days.update(range(ends[0], ends[-1] + 1))
    return frozenset(days)


def _instant(value: object) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    raise PydanticCustomError(
        "crond",
        f"{show(value)} is not an instant (write 2026-12-18T18:00, local to the job's "
        "zone, or with an offset: 2026-12-18T18:00+01:00)",
    )


class WindowDef(FrozenModel):
    """`{from, until}`: a timed window, from included, until excluded."""

    from_: datetime = Field(alias="from")
    until: datetime

    @field_validator("from_", "until", mode="before")
    @classmethod
    def _when(cls, value: object) -> datetime:
        return _instant(value)

    @model_validator(mode="after")
    def _order(self) -> Self:
        if (self.from_.tzinfo is None) != (self.until.tzinfo is None):
            field_error("until", "give both from and until an offset, or neither")
        if self.until <= self.from_:
            field_error(
                "until",
                f"until ({self.until.isoformat()}) is not after from ({self.from_.isoformat()})",
            )
        return self


def _closest(code: str, codes: list[str]) -> list[str]:
    """The code meant: of two-letter codes, those that share a letter in place first
    ("BZ" is "BY" before "HB")."""
    upper = code.upper()
    same = [c for c in codes if any(a == b for a, b in zip(c.upper(), upper, strict=False))]
    return close_matches(upper, same, cutoff=0.5) or close_matches(upper, codes, cutoff=0.5)


def _countries() -> dict[str, list[str]]:
    import holidays  # noqa: PLC0415  (only for files that name a country)

    return {code: list(subdivs) for code, subdivs in holidays.list_supported_countries().items()}


class CalendarDef(FrozenModel):
    """One calendar of `calendars:`; its sources join, `except` takes days away."""

    dates: list[date | str] | None = Field(default=None, max_length=MAX_DATES)
    weekdays: str | None = None
    windows: list[WindowDef] | None = Field(default=None, max_length=MAX_DATES)
    holidays: str | None = None
    subdiv: str | None = None
    ics: str | None = None
    include: list[str] | None = None
    except_: list[str] | None = Field(default=None, alias="except")

    @field_validator("dates")
    @classmethod
    def _dates(cls, value: list[date | str] | None) -> list[date | str] | None:
        if value is not None:
            parse_dates(value)
        return value

    @field_validator("weekdays")
    @classmethod
    def _weekdays(cls, value: str | None) -> str | None:
        if value is not None:
            parse_weekdays(value)
        return value

    @field_validator("holidays")
    @classmethod
    def _country(cls, value: str | None) -> str | None:
        if value is not None and value not in _countries():
            codes = sorted(_countries())
            close = _closest(value.upper(), codes)
            hint = f'did you mean "{close[0]}"?' if close else "an ISO 3166 code such as DE, US"
            raise PydanticCustomError(
                "crond", f"{show(value)} is not a country the holidays package knows ({hint})"
            )
        return value

    @field_validator("include", "except_")
    @classmethod
    def _names(cls, value: list[str] | None) -> list[str] | None:
        return value

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if self.subdiv is not None:
            if self.holidays is None:
                field_error("subdiv", "subdiv applies to holidays: give the country too")
            elif self.holidays in _countries():
                known = _countries()[self.holidays]
                if self.subdiv not in known:
                    close = _closest(self.subdiv, known)
                    listed = ", ".join(known[:20]) or "none"
                    hint = f'did you mean "{close[0]}"?' if close else f"known: {listed}"
                    field_error(
                        "subdiv",
                        f"{show(self.subdiv)} is not a subdivision of {self.holidays} ({hint})",
                    )
        given = (self.dates, self.weekdays, self.windows, self.holidays, self.ics)
        if all(v is None for v in given) and not self.include and not self.except_:
            field_error(
                "",
                "an empty calendar: give dates, weekdays, windows, holidays, ics, "
                "include or except",
            )
        return self
