"""Calendars in the file: every mistake located, with the bad value, what would be right
and "did you mean" (docs/configuration.md, "Calendars"); the payroll example with the
real `crond` binary (docs/schedules.md)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from crond.config import loader
from crond.config.problems import ConfigError

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        loader.loads(textwrap.dedent(text), "s.yaml", environ={}, now=NOW)
    return [str(p) for p in info.value.problems]


def test_an_unknown_calendar_is_located_with_did_you_mean() -> None:
    found = problems("""\
        calendars:
          business-days: {weekdays: mon-fri}
        jobs:
          a: {cron: "0 9 * * *", days: busines-days, command: x}
          b: {cron: "0 9 * * *", skip: [business-days, holidayz], command: x}
        """)
    assert found == [
        's.yaml:4:32: jobs.a.days: "busines-days" names no calendar '
        '(did you mean "business-days"?)',
        's.yaml:5:48: jobs.b.skip.1: "holidayz" names no calendar '
        "(the file's calendars: business-days)",
    ]


def test_an_unknown_calendar_from_defaults_is_told_once_at_defaults() -> None:
    """A name every job takes from `defaults` is one mistake, at its line there; a job's
    own is told at the job."""
    found = problems("""\
        calendars:
          business: {weekdays: mon-fri}
        defaults:
          days: busines
          skip: [nope]
        jobs:
          a: {cron: "0 9 * * *", command: x}
          b: {cron: "0 9 * * *", command: x}
          c: {cron: "0 9 * * *", command: x, days: bussiness}
        """)
    assert found == [
        's.yaml:4:9: defaults.days: "busines" names no calendar (did you mean "business"?)',
        's.yaml:5:10: defaults.skip.0: "nope" names no calendar (the file\'s calendars: business)',
        's.yaml:9:44: jobs.c.days: "bussiness" names no calendar (did you mean "business"?)',
    ]


def test_an_unknown_country_and_subdivision() -> None:
    found = problems("""\
        calendars:
          de: {holidays: DX}
          by: {holidays: DE, subdiv: BZ}
        jobs:
          a: {cron: "0 9 * * *", days: de, command: x}
        """)
    assert found[0].startswith('s.yaml:2:18: calendars.de.holidays: "DX" is not a country')
    assert 'did you mean "' in found[0]
    assert found[1].startswith('s.yaml:3:22: calendars.by.subdiv: "BZ" is not a subdivision of DE')
    assert 'did you mean "BY"?' in found[1]


def test_a_cycle_is_refused_naming_it() -> None:
    found = problems("""\
        calendars:
          a: {weekdays: mon, include: [b]}
          b: {except: [c]}
          c: {include: [a]}
        jobs:
          j: {cron: "0 9 * * *", days: a, command: x}
        """)
    assert found == [
        's.yaml:4:17: calendars.c.include.0: "a" makes a cycle (a → b → c → a): '
        "a calendar cannot contain itself"
    ]


def test_a_job_that_never_fires_in_ten_years_is_refused() -> None:
    found = problems("""\
        calendars:
          gone: {dates: [2020-01-01..2020-12-31]}
          far: {dates: [2037-01-01]}
        jobs:
          a: {cron: "0 9 * * *", days: gone, command: x}
          b: {cron: "0 9 * * *", days: far, command: x}
          c: {cron: "0 9 * * mon", skip: [far], nth_day: 5, command: x}
        """)
    assert len(found) == 2
    assert found[0].startswith("s.yaml:5:32: jobs.a.days: no fire in the next 10 years")
    assert found[1].startswith("s.yaml:6:32: jobs.b.days: no fire in the next 10 years")


def test_bad_days_weekdays_windows_and_nth_day() -> None:
    found = problems("""\
        calendars:
          a: {dates: [2026-12-31..2026-12-01, 13-01, "next friday"]}
          b: {weekdays: "fri-mon"}
          c: {weekdays: "mon-fir"}
          d: {windows: [{from: 2026-12-18T18:00, until: 2026-12-18T17:00}]}
          e: {subdiv: BY}
          f: {}
        jobs:
          j: {cron: "0 9 * * *", nth_day: 0, roll: next, command: x}
          k: {cron: "0 9 * * *", roll: sideways, nth_day: 1, command: x}
        """)
    text = "\n".join(found)
    assert 'calendars.a.dates: "2026-12-31..2026-12-01" runs backwards' in text
    assert 'calendars.b.weekdays: "fri-mon" runs backwards' in text
    assert 'calendars.c.weekdays: "fir" is not a day of the week (did you mean "fri"?)' in text
    assert "calendars.d.windows.0.until: until (2026-12-18T17:00:00) is not after from" in text
    assert "calendars.e.subdiv: subdiv applies to holidays: give the country too" in text
    assert "calendars.f: an empty calendar" in text
    assert "jobs.j.nth_day: 0 is no day: 1 is the first day of the month, -1 the last" in text
    assert "jobs.k.roll:" in text
    assert all(line.split(":")[1].isdigit() and line.split(":")[1] != "0" for line in found)


def test_roll_needs_days() -> None:
    found = problems("""\
        jobs:
          j: {cron: "0 9 * * *", roll: next, command: x}
        """)
    assert found == [
        "s.yaml:2:26: jobs.j.roll: roll moves a fire on a day outside days: "
        "give days (or nth_day) too"
    ]


PAYROLL = """\
timezone: Europe/Berlin
calendars:
  bavaria: {holidays: DE, subdiv: BY}
  business-days: {weekdays: mon-fri, except: [bavaria, year-end]}
  year-end: {dates: [12-24..12-31]}
jobs:
  payroll: {cron: "0 9 * * *", days: business-days, nth_day: -1, command: ./pay}
"""


def test_payroll_with_the_crond_binary(tmp_path: Path) -> None:
    """09:00 on the last business day of each month in Bavaria, never from Christmas Eve
    to New Year's Eve: December pays on the 23rd."""
    f = tmp_path / "s.yaml"
    f.write_text(PAYROLL)
    crond = str(Path(sys.executable).parent / "crond")
    run = subprocess.run(
        [crond, "next", str(f), "--from", "2026-01-01T00:00:00Z", "-n", "24", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    days = [line.split('"local": "')[1][:16] for line in run.stdout.splitlines()]
    assert days == [
        *("2026-01-30T09:00", "2026-02-27T09:00", "2026-03-31T09:00", "2026-04-30T09:00"),
        *("2026-05-29T09:00", "2026-06-30T09:00", "2026-07-31T09:00", "2026-08-31T09:00"),
        *("2026-09-30T09:00", "2026-10-30T09:00", "2026-11-30T09:00", "2026-12-23T09:00"),
        *("2027-01-29T09:00", "2027-02-26T09:00", "2027-03-31T09:00", "2027-04-30T09:00"),
        *("2027-05-31T09:00", "2027-06-30T09:00", "2027-07-30T09:00", "2027-08-31T09:00"),
        *("2027-09-30T09:00", "2027-10-29T09:00", "2027-11-30T09:00", "2027-12-23T09:00"),
    ]
    ok = subprocess.run([crond, "validate", str(f)], capture_output=True, text=True, check=False)
    assert (ok.returncode, ok.stdout.strip()) == (0, f"{f}: 1 job OK")


def test_next_all_lists_the_removed_fires_with_the_holiday(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        textwrap.dedent("""\
            timezone: Europe/Berlin
            calendars:
              de-holidays: {holidays: DE, subdiv: BY}
              freeze: {windows: [{from: 2026-12-30T08:00, until: 2026-12-30T10:00}]}
            jobs:
              daily: {cron: "0 9 * * *", skip: [de-holidays, freeze], command: x}
            """)
    )
    crond = str(Path(sys.executable).parent / "crond")
    args = [crond, "next", str(f), "--from", "2026-12-23T00:00:00Z", "-n", "6"]
    shown = subprocess.run([*args, "--all"], capture_output=True, text=True, check=True)
    assert shown.stdout.endswith(
        "removed by calendars:\n"
        "daily  2026-12-25 09:00 skipped: de-holidays (Christmas Day)\n"
        "daily  2026-12-26 09:00 skipped: de-holidays (Second Day of Christmas)\n"
        "daily  2026-12-30 09:00 skipped: freeze\n"
    )
    plain = subprocess.run(args, capture_output=True, text=True, check=True)
    assert "removed" not in plain.stdout
    assert "2026-12-25" not in plain.stdout


ICS = """\
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:1
DTSTART;VALUE=DATE:20260610
DTEND;VALUE=DATE:20260612
SUMMARY:Offsite
END:VEVENT
BEGIN:VEVENT
UID:2
DTSTART:20260615T083000Z
DTEND:20260615T093000Z
SUMMARY:Migration
END:VEVENT
BEGIN:VEVENT
UID:3
DTSTART;VALUE=DATE:20260601
DTEND;VALUE=DATE:20260602
RRULE:FREQ=WEEKLY;COUNT=3
SUMMARY:Monday freeze
END:VEVENT
END:VCALENDAR
"""


def ics_job(tmp_path: Path, ics: str) -> str:
    path = tmp_path / "off.ics"
    path.write_text(ics.replace("\n", "\r\n"))
    return f"""\
        calendars:
          blackout: {{ics: {path}}}
        jobs:
          daily: {{cron: "0 9 * * *", skip: [blackout], command: x}}
        """


def test_an_ics_file_skips_its_days_and_its_timed_events(tmp_path: Path) -> None:
    cfg = loader.loads(textwrap.dedent(ics_job(tmp_path, ICS)), "s.yaml", environ={}, now=NOW)
    timing = cfg.jobs["daily"].make_timing()
    days = []
    for fire in timing.fires(NOW):
        if fire.at.month > 6:
            break
        days.append(fire.at.day)
    # Mondays 1, 8, 15 (weekly, 3 times); 10 and 11 (DTEND excluded); 15 at 09:00Z is
    # after the migration (08:30-09:30Z)? No: inside it.
    assert days == [d for d in range(2, 31) if d not in (8, 10, 11, 15)]


def test_an_ics_file_with_too_many_events_is_refused_at_its_line(tmp_path: Path) -> None:
    endless = ICS.replace("FREQ=WEEKLY;COUNT=3", "FREQ=MINUTELY")
    found = problems(ics_job(tmp_path, endless))
    assert len(found) == 1
    assert found[0].startswith("s.yaml:2:19: calendars.blackout.ics: ")
    assert "more than 10,000 events" in found[0]


def test_a_missing_ics_file_is_located(tmp_path: Path) -> None:
    text = ics_job(tmp_path, ICS).replace("off.ics", "gone.ics")
    found = problems(text)
    assert len(found) == 1
    assert found[0].startswith("s.yaml:2:19: calendars.blackout.ics: ")
    assert "no such file" in found[0]
