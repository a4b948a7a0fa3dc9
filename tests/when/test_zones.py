"""crond.when.zones: a zone by name (with a suggestion when it is misspelled), the host's
zone behind `local`, and which tz database is in use."""

from __future__ import annotations

import shutil
import sys
import types
import zoneinfo
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from crond.when import zones
from crond.when.zones import ZoneError

SYSTEM_ZONES = Path("/usr/share/zoneinfo")
needs_system_zones = pytest.mark.skipif(
    not (SYSTEM_ZONES / "Europe" / "Berlin").is_file(), reason="no system tz database"
)
HINT = "(an IANA name such as Europe/Berlin, UTC, or local)"


@pytest.mark.parametrize("name", ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires"])
def test_a_zone_by_its_name(name: str) -> None:
    assert zones._find_zone(name) is ZoneInfo(name)


UNKNOWN = [
    ("europe/berlin", '(did you mean "Europe/Berlin"?)'),  # spelled otherwise: never loaded
    ("EUROPE/BERLIN", '(did you mean "Europe/Berlin"?)'),
    ("Europe/Berln", '(did you mean "Europe/Berlin"?)'),
    ("America/New_Yrok", '(did you mean "America/New_York"?)'),
    ("Mars/Olympus", HINT),
    ("", HINT),
    ("/etc/passwd", HINT),  # a path is never opened
    (".hidden", HINT),
    ("Europe/../Europe/Berlin", '(did you mean "Europe/Berlin"?)'),  # nor a relative one
    ("Europe/Berlin/..", '(did you mean "Europe/Berlin"?)'),
    ("zone.tab", HINT),  # a file of the zone directory that is not a zone
    ("tzdata.zi", HINT),
    ("America/Argentina", '(did you mean "America/Argentina/Salta"?)'),  # a directory
    ("a" * 300, HINT),  # too long a file name
]


@pytest.mark.parametrize(("name", "hint"), UNKNOWN, ids=[u[0][:20] or "empty" for u in UNKNOWN])
def test_an_unknown_zone_is_refused_with_a_hint(name: str, hint: str) -> None:
    with pytest.raises(ZoneError) as caught:
        zones._find_zone(name)
    assert str(caught.value) == f'unknown time zone "{name}" {hint}'


def test_a_zone_spelled_as_on_disk_needs_no_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing every zone takes ~30 ms: only a name that does not load as written, or not
    from a file spelled that way, needs it."""

    def listing() -> dict[str, str]:
        raise AssertionError("every zone listed")

    monkeypatch.setattr(zones, "_available", listing)
    assert zones._find_zone("Europe/Berlin") is ZoneInfo("Europe/Berlin")


def test_a_case_insensitive_file_system_loads_no_misspelt_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where `europe/berlin` opens Europe/Berlin's file (macOS, say), it is refused all the
    same, as it is on Linux."""
    exact = {name.lower(): name for name in zoneinfo.available_timezones()}
    real = zoneinfo.ZoneInfo

    def insensitive(key: str) -> ZoneInfo:
        return real(exact.get(key.lower(), key))

    monkeypatch.setattr(zoneinfo, "ZoneInfo", insensitive)
    with pytest.raises(ZoneError, match=r'"europe/berlin" \(did you mean "Europe/Berlin"\?\)'):
        zones._find_zone("europe/berlin")
    assert zones._find_zone("Europe/Berlin") is real("Europe/Berlin")


def test_lookups_are_cached() -> None:
    assert zones.get_zone("Asia/Tokyo") is zones.get_zone("Asia/Tokyo")
    assert zones.get_zone("Asia/Tokyo") is ZoneInfo("Asia/Tokyo")
    assert zones.get_zone("local") is zones.host_zone()


@needs_system_zones
def test_a_zone_on_disk_is_spelled_as_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert zones._spelled_as_on_disk("Europe/Berlin")
    assert not zones._spelled_as_on_disk("Nowhere/Nothing")
    # A file reached through a path that is not its listed name.
    assert not zones._spelled_as_on_disk("Europe/./Berlin")
    assert not zones._spelled_as_on_disk("Europe//Berlin")
    monkeypatch.setattr(zoneinfo, "TZPATH", ("/nonexistent", str(SYSTEM_ZONES)))
    assert zones._spelled_as_on_disk("Europe/Berlin")  # found under the second root


@needs_system_zones
def test_a_zone_only_the_tzdata_package_has_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """No zone file under the zone path (zoneinfo's fallback, the `tzdata` package): the
    full listing decides."""
    monkeypatch.setattr(zoneinfo, "TZPATH", ())
    assert not zones._spelled_as_on_disk("Europe/Berlin")
    assert zones._find_zone("Europe/Berlin") is ZoneInfo("Europe/Berlin")
    with pytest.raises(ZoneError, match="did you mean"):
        zones._find_zone("europe/berlin")


# --- the host's zone ---------------------------------------------------------------------


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Where the host's zone file is read from, under the test's control; no $TZ."""
    monkeypatch.delenv("TZ", raising=False)
    localtime = tmp_path / "localtime"
    monkeypatch.setattr(zones, "_LOCALTIME", localtime)
    return localtime


@pytest.mark.parametrize("tz", ["Asia/Tokyo", ":Asia/Tokyo"])
def test_tz_names_the_host_zone(host: Path, monkeypatch: pytest.MonkeyPatch, tz: str) -> None:
    monkeypatch.setenv("TZ", tz)
    assert zones._read_host_zone() is ZoneInfo("Asia/Tokyo")


def test_local_is_the_host_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    monkeypatch.setattr(zones, "host_zone", lambda: tokyo)
    assert zones._find_zone("local") is tokyo
    with pytest.raises(ZoneError):
        zones._find_zone("Local")  # only `local` itself


@needs_system_zones
@pytest.mark.parametrize("tz", ["", "Nowhere/Nothing", "../etc", "America", "a" * 300])
def test_else_the_zone_localtime_links_to(
    host: Path, monkeypatch: pytest.MonkeyPatch, tz: str
) -> None:
    monkeypatch.setenv("TZ", tz)
    host.symlink_to(SYSTEM_ZONES / "America" / "New_York")
    assert zones._read_host_zone() is ZoneInfo("America/New_York")


@needs_system_zones
def test_the_zone_is_named_by_what_follows_the_last_zoneinfo(host: Path, tmp_path: Path) -> None:
    target = tmp_path / "zoneinfo" / "old" / "zoneinfo" / "Asia" / "Tokyo"
    target.parent.mkdir(parents=True)
    shutil.copyfile(SYSTEM_ZONES / "Asia" / "Tokyo", target)
    host.symlink_to(target)
    assert zones._read_host_zone() is ZoneInfo("Asia/Tokyo")


@needs_system_zones
@pytest.mark.parametrize("name", ["Custom/Zone", "zone.tab"])
def test_a_linked_zone_the_database_lacks_is_read_as_it_is(
    host: Path, tmp_path: Path, name: str
) -> None:
    target = tmp_path / "zoneinfo" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SYSTEM_ZONES / "Asia" / "Kolkata", target)
    host.symlink_to(target)
    zone = zones._read_host_zone()
    assert zone.key == "localtime"
    instant = datetime(1942, 9, 1, tzinfo=UTC)  # Kolkata's war time, +06:30
    assert instant.astimezone(zone).utcoffset() == timedelta(hours=6, minutes=30)


@needs_system_zones
def test_a_localtime_copy_is_read_as_it_is(host: Path) -> None:
    shutil.copyfile(SYSTEM_ZONES / "Asia" / "Kolkata", host)
    zone = zones._read_host_zone()
    assert zone.key == "localtime"
    instant = datetime(1942, 9, 1, tzinfo=UTC)  # Kolkata's war time, +06:30
    assert instant.astimezone(zone).utcoffset() == timedelta(hours=6, minutes=30)


@pytest.mark.parametrize("content", [None, b"not a zone file", "link to nowhere"])
def test_else_utc(host: Path, tmp_path: Path, content: bytes | str | None) -> None:
    if isinstance(content, bytes):
        host.write_bytes(content)
    elif content is not None:
        host.symlink_to(tmp_path / "zoneinfo" / "Not" / "AZone")
    assert zones._read_host_zone() is ZoneInfo("UTC")


# --- the tz database in use ------------------------------------------------------------


def _root(tmp_path: Path, name: str, first_line: str | None) -> str:
    root = tmp_path / name
    root.mkdir()
    if first_line is not None:
        (root / "tzdata.zi").write_text(first_line + "\nR ...\n", encoding="ascii")
    return str(root)


def test_the_system_database_names_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = _root(tmp_path, "empty", None)
    other = _root(tmp_path, "other", "# a file of another kind")
    system = _root(tmp_path, "system", "# version 2099z")
    monkeypatch.setattr(zoneinfo, "TZPATH", (empty, other, system))
    assert zones.tzdata_version() == f"system 2099z ({system})"


def test_else_the_tzdata_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zoneinfo, "TZPATH", (_root(tmp_path, "empty", None),))
    fake = types.ModuleType("tzdata")
    fake.IANA_VERSION = "2098y"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tzdata", fake)
    assert zones.tzdata_version() == "tzdata package 2098y"
    monkeypatch.setitem(sys.modules, "tzdata", types.ModuleType("tzdata"))
    assert zones.tzdata_version() == "tzdata package ?"
    monkeypatch.setitem(sys.modules, "tzdata", None)  # not installed
    assert zones.tzdata_version() == "unknown"
