"""The richer cron fields through a load (docs/schedules.md, "Richer cron fields"): each
job's `H` is picked by its own name, a wrong form is a located problem, and R2's "OR"
beside an L, W or # form is a located warning."""

from __future__ import annotations

import textwrap

import pytest

from crond.config import loaded, loader
from crond.config.problems import ConfigError

FILE = """\
jobs:
  alpha:
    cron: "H H * * *"
    command: x
  beta:
    cron: "H H * * *"
    command: x
  payday:
    cron: "0 9 LW * *"
    command: x
  board:
    cron: "0 9 L * mon"
    command: x
  quiet:
    cron: "0 9 L * mon"
    command: x
    enabled: false
"""


def test_each_job_gets_its_own_h() -> None:
    cfg = loader.loads(FILE, "s.yaml")
    alpha, beta = cfg.jobs["alpha"].cron_expr, cfg.jobs["beta"].cron_expr
    assert alpha is not None
    assert beta is not None
    assert (alpha.resolved, beta.resolved) == ("10 8 * * *", "9 3 * * *")
    again = loader.loads(FILE, "s.yaml").jobs["alpha"].cron_expr
    assert again is not None
    assert again.resolved == alpha.resolved  # a reload picks the same


def test_or_warning_is_located_at_the_cron_line() -> None:
    cfg = loader.loads(FILE, "s.yaml")
    found = [str(p) for p in loaded.or_warnings(cfg)]
    assert found == [
        's.yaml:12:11: jobs.board.cron: OR: this also fires on every day day-of-week "mon" '
        'matches, not only on day-of-month "L" (R2: with both day fields restricted, either '
        'one is enough); write * in day-of-week for "L" alone'
    ]


@pytest.mark.parametrize(
    ("cron", "said"),
    [
        ("0 0 * * fri#6", '"fri#6": a month has at most 5 of a weekday'),
        ("0 0 32W * *", '"32W": W takes a day 1-31'),
        ("0 0 L-40 * *", '"L-40": L-n counts 1 to 30 days back'),
        ("H(50-10) 0 * * *", '"H(50-10)" is a backwards range; H picks upwards: write H(10-50)'),
        ("0 0 * * 5W", '"5W": W belongs in day-of-month'),
        ("0 L * * *", '"L": L, W and # are only for the day fields'),
        ("H(0-70) 0 * * *", '"70" is out of range 0-59 in "H(0-70)"'),
        ("0 0 31W 2 *", '"31W" never occurs in feb (at most 29 days); the job would never run'),
    ],
)
def test_a_wrong_form_is_located(cron: str, said: str) -> None:
    text = textwrap.dedent(f"""\
        jobs:
          a:
            command: x
            cron: "{cron}"
        """)
    with pytest.raises(ConfigError) as info:
        loader.loads(text, "s.yaml")
    (problem,) = info.value.problems
    assert str(problem).startswith(f's.yaml:4:11: jobs.a.cron: "{cron}": ')
    assert said in str(problem)
