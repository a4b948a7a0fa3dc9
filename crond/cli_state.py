"""`crond output` and `crond replicas`: what the state store knows beyond `status` and
`history` (docs/state.md)."""

from __future__ import annotations

import click

COMMANDS: tuple[click.Command, ...] = ()
