"""A private PostgreSQL for the test run: `server` starts and stops one, `plugin` gives
tests a fresh database on it."""
