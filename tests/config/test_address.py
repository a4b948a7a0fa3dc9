"""HOST:PORT for the metrics endpoint (crond/config/address.py): the file's
`daemon.metrics` and `crond run --metrics` take the same values and say the same of the
same mistake, with what to write instead."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from crond.cli import main
from crond.config import loader
from crond.config.address import AddressError, split_address
from crond.config.problems import ConfigError

JOB = "jobs:\n  a: {every: 1h, command: x}\n"

# (id, as written, what is said of it after the value)
BAD = [
    ("a_port_alone", "9464", "has no host: write HOST:PORT, e.g. 127.0.0.1:9464 (this host "
     "only) or 0.0.0.0:9464"),
    ("a_url", "http://127.0.0.1:9464/metrics", ": a URL is not HOST:PORT: write 127.0.0.1:9464 "
     "(the paths are /metrics and /healthz)"),
    ("a_url_without_port", "https://[::1]/metrics", ": a URL is not HOST:PORT: write "
     "[::1]:9464 (the paths are /metrics and /healthz)"),
    ("a_path", "0.0.0.0:9100/healthz", ": a path is not part of it: write 0.0.0.0:9100 (the "
     "paths are /metrics and /healthz)"),
    ("a_host_alone", "localhost", "has no port: write localhost:9464"),
    ("nothing_before_the_colon", ":9464", "has no host: write HOST:PORT, e.g. 127.0.0.1:9464 "
     "(this host only) or 0.0.0.0:9464"),
    ("ipv6_unbracketed", "::1:9464", ": write an IPv6 host in brackets, e.g. [::1]:9464"),
    ("port_too_big", "127.0.0.1:65536", ": the port must be a number from 0 to 65535; write "
     "HOST:PORT, e.g. 127.0.0.1:9464 (this host only) or 0.0.0.0:9464"),
]  # fmt: skip


def _said(written: str, said: str) -> str:
    return f"{written!r}{'' if said.startswith(':') else ' '}{said}"


@pytest.mark.parametrize(("written", "said"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_the_file_and_the_flag_say_the_same(tmp_path: Path, written: str, said: str) -> None:
    expected = _said(written, said)
    with pytest.raises(AddressError) as refused:
        split_address(written)
    assert str(refused.value) == expected
    with pytest.raises(ConfigError) as info:
        loader.loads(f"daemon:\n  metrics: '{written}'\n" + JOB, "s.yaml")
    (problem,) = info.value.problems
    assert str(problem) == f"s.yaml:2:12: daemon.metrics: {expected}"
    f = tmp_path / "s.yaml"
    f.write_text(JOB)
    result = CliRunner().invoke(main, ["run", str(f), "--metrics", written, "--state-dir", "none"])
    assert result.exit_code == 2
    assert f"Invalid value for '--metrics': {expected}" in " ".join(result.stderr.split())


def test_a_number_in_the_file_is_a_port_without_its_host() -> None:
    with pytest.raises(ConfigError) as info:
        loader.loads(textwrap.dedent("daemon:\n  metrics: 9464\n") + JOB, "s.yaml")
    assert [str(p) for p in info.value.problems] == [
        "s.yaml:2:12: daemon.metrics: 9464 has no host: write HOST:PORT, e.g. 127.0.0.1:9464 "
        "(this host only) or 0.0.0.0:9464"
    ]


@pytest.mark.parametrize(
    ("written", "address"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("[::1]:0", ("::1", 0)),
        ("localhost:9100", ("localhost", 9100)),
        ("0.0.0.0:9464", ("0.0.0.0", 9464)),
    ],
)
def test_good_addresses(written: str, address: tuple[str, int]) -> None:
    assert split_address(written) == address
    assert loader.loads(f"daemon:\n  metrics: '{written}'\n" + JOB).daemon.metrics == written
