# The two set-up commands of the README: `make run` and `make test`.
# Each creates .venv when it is missing and installs the project into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run web test lint types pytest collect run-tests mutate bench bench-peers clean

# pip's and setuptools' chatter goes to .venv/install.log; it is shown if the install fails.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || { echo "creating $(VENV)"; $(PY) -m venv $(VENV); }
	@echo "installing crond and its dev tools into $(VENV) (log: $(VENV)/install.log)"
	@{ $(BIN)/python -m pip install --upgrade pip && \
	   $(BIN)/python -m pip install -e '.[dev]'; } > $(VENV)/install.log 2>&1 \
	 || { tail -n 40 $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

# The example's state (run history, cursors) stays in the checkout, in .state/, whoever
# runs it: not in /var/lib/crond as root, nor in ~/.local/state.
run: $(STAMP)
	$(BIN)/crond run schedules.example.yaml --state-dir .state

# The dashboard of `make run`'s daemon (docs/web.md), at http://127.0.0.1:8080/.
web: $(STAMP)
	$(BIN)/crond web schedules.example.yaml --state-dir .state

# mypy (one core, ~15 s) runs beside the tests' collection (one core, ~8 s): two cores.
test: $(STAMP) lint
	@$(MAKE) --no-print-directory -j2 --output-sync=target types collect
	@$(MAKE) --no-print-directory run-tests

lint: $(STAMP)
	$(BIN)/ruff check crond tests bench
	$(BIN)/ruff format --check crond tests bench

types: $(STAMP)
	$(BIN)/mypy

# On 6 workers (pytest-xdist; three a core: most e2e tests wait on timers, child
# processes and a database; 6 took ~205 s where 4 took ~229 s, same machine, same day);
# docs/performance.md has the figures. A file's tests alone:
# `.venv/bin/pytest -q tests/test_x.py` runs them in one process.
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set, and made once up front:
# crond's modules (else each of the hundreds of `crond` processes the tests start compiles
# them again) and the tests' assertion-rewritten modules (a collection without running
# anything; else each worker rewrites them all: ~8 s of CPU each).
pytest: $(STAMP) collect
	@$(MAKE) --no-print-directory run-tests

collect: $(STAMP)
	$(BIN)/python -m compileall -q crond
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -p no:xdist --collect-only > /dev/null

# The slowest 15 tests are listed at the end: where the suite's three minutes go.
run-tests: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -n 6 --dist loadgroup --durations=15

# `make mutate`: mutation testing of crond.when's pure core with mutmut, in a scratch copy
# of the checkout (tests/mutate.py; MODULES=plan limits it to some modules). Minutes, not
# seconds: not part of `make test` nor CI. tests/MUTANTS.md lists the equivalent survivors.
# mutmut is an extra of its own (pyproject.toml), installed here only.
mutate: $(VENV)/.mutate-installed
	$(BIN)/python tests/mutate.py $(if $(MODULES),--only $(MODULES))

$(VENV)/.mutate-installed: $(STAMP)
	@echo "installing mutmut into $(VENV) (log: $(VENV)/install.log)"
	@$(BIN)/python -m pip install -e '.[dev,mutate]' >> $(VENV)/install.log 2>&1 \
	 || { tail -n 40 $(VENV)/install.log; exit 1; }
	@touch $@

# `make bench`: every bench/bench_*.py, under 15 minutes (bench/README.md); with
# CROND_BENCH_QUICK=1, a short look. `make bench-peers`: installs cron, yacron and
# APScheduler 3 in throwaway places (bench/peers/install.sh), then runs all with the peers.
bench: $(STAMP)
	@start=$$(date +%s); for b in bench/bench_*.py; do echo "== $$b"; \
	    $(BIN)/python $$b || exit 1; done; \
	    echo "== make bench: $$(( $$(date +%s) - start )) s"

bench-peers: $(STAMP)
	PY=$(PY) sh bench/peers/install.sh
	CROND_BENCH_PEERS=1 CROND_BENCH_CROND=$(CURDIR)/bench/.peers/crond/bin/crond $(MAKE) bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
