# Foresight: the two commands (`make run`, `make test`) create and reuse .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make run` needs the runtime dependencies only (a faster first install); lint, tests
# and benchmarks add the dev extra on top.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
# MLflow's per-download progress bars drown the CLI's own output.
export MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR := false

.PHONY: run test test-setup lint format bench clean venv

venv: $(DEV_STAMP)

# uv installs the packages: several times faster than pip on 2 cores (it downloads,
# links and byte-compiles in parallel; issue #38, benchmarks/venv_install.py). It
# byte-compiles at install, as pip does: with PYTHONDONTWRITEBYTECODE set (some machines
# and images set it) nothing would ever be compiled, and every command would pay it. The venv's own pip brings uv in, so a machine needs only
# python3 with venv and pip; where uv cannot be installed, pip does the work (slower).
# VENV_INSTALLER=pip forces pip.
VENV_INSTALLER ?= uv
define install
	@echo "Installing $(2) into $(VENV) with $(VENV_INSTALLER)..."
	@if [ "$(VENV_INSTALLER)" = uv ] && { test -x $(BIN)/uv || \
			$(BIN)/python -m pip install --quiet --disable-pip-version-check 'uv>=0.5'; }; then \
		$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python $(1); \
	else \
		echo "installing with pip (slower)"; \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip && \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check $(1); \
	fi
endef

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call install,-e .,the runtime dependencies)
	touch $(RUN_STAMP)

$(DEV_STAMP): $(RUN_STAMP)
	$(call install,-e '.[dev]',the dev tools)
	touch $(DEV_STAMP)

# A quick first version on the committed sample (fast model set; skipped once a version
# holds @champion), then serve the API, the scheduler and the MLflow UI while the full
# model set trains in the background, promoted only through the gate
# (other ports: make run PORT=8080 MLFLOW_UI_PORT=5050).
PORT ?= 8000
MLFLOW_UI_PORT ?= 5000
# One id per `make run`: its two commands say each data warning once between them
# (pipelines/data_warnings.py).
run: export FORESIGHT_RUN_ID := make-run-$(shell date +%Y%m%dT%H%M%S)-$(shell echo $$PPID)
run: $(RUN_STAMP)
	$(BIN)/python -m pipelines.ports 127.0.0.1 $(PORT) $(MLFLOW_UI_PORT)
	$(BIN)/foresight train --fast --unless-champion --mlflow-ui-port $(MLFLOW_UI_PORT)
	$(BIN)/foresight serve --clock replay --train-now --port $(PORT) --mlflow-ui-port $(MLFLOW_UI_PORT)

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(DEV_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# .ci/test-setup installs the Debian packages the integration tests drive (as root;
# otherwise it stops with the command to run); pytest ends with every skip and why.
test: test-setup lint
	$(BIN)/pytest

test-setup:
	bash .ci/test-setup

# Each benchmark prints a table and writes benchmarks/results/<name>.json.
bench: $(DEV_STAMP)
	$(BIN)/python benchmarks/cli_startup.py
	$(BIN)/python benchmarks/venv_install.py
	$(BIN)/python benchmarks/first_value.py --baseline
	$(BIN)/python benchmarks/forecast_accuracy.py
	$(BIN)/python benchmarks/forecast_headroom.py
	$(BIN)/python benchmarks/decision_quality.py
	$(BIN)/python benchmarks/live_loop.py
	$(BIN)/python benchmarks/peak_quantile.py
	$(BIN)/python benchmarks/api_load.py
	$(BIN)/python benchmarks/api_load.py --scenario mixed --gc-freeze
	$(BIN)/python benchmarks/api_load.py --scenario traces --gc-freeze
	$(BIN)/python benchmarks/grpc_expander.py
	$(BIN)/python benchmarks/training_scale.py --sizes 10 100 1000 --budget-s 900
	$(BIN)/python benchmarks/forecast_cycle.py --sizes 15 100
	$(BIN)/python benchmarks/dask_scaling.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
