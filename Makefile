# The two set-up commands of the README: `make run` and `make test`.
# Each creates .venv when it is missing and installs the project into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint types pytest bench clean

# pip's and setuptools' chatter goes to .venv/install.log; it is shown if the install fails.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || { echo "creating $(VENV)"; $(PY) -m venv $(VENV); }
	@echo "installing crond and its dev tools into $(VENV) (log: $(VENV)/install.log)"
	@{ $(BIN)/python -m pip install --upgrade pip && \
	   $(BIN)/python -m pip install -e '.[dev]'; } > $(VENV)/install.log 2>&1 \
	 || { tail -n 40 $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/crond run schedules.example.yaml

test: $(STAMP) lint types pytest

lint: $(STAMP)
	$(BIN)/ruff check crond tests bench
	$(BIN)/ruff format --check crond tests bench

types: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
