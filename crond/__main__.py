"""`python -m crond` is the same program as `crond`."""

from crond.cli import main

main()
