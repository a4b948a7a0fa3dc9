"""crond: a declarative cron daemon."""

# Written here rather than read with importlib.metadata: importing that (email, zipfile,
# ...) and finding the distribution cost every command ~40 ms of its start-up.
# tests/test_version.py keeps it equal to pyproject.toml's, and to the installed one's.
__version__ = "0.1.0"

__all__ = ["__version__"]
