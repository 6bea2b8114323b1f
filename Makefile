# headroom: two commands for a newcomer: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
DATASETS ?= $(abspath ../shared/datasets)

.PHONY: install demo test test-fast test-datasets lint bench screenshot clean components

install: $(STAMP)

# torch first and pinned: 2.13.0 is a CPU build on this machine's disk; a looser
# requirement resolved alone would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: install
	$(VENV)/bin/headroom run

test: install
	$(PY) -m pytest -q

# Debian's chromium and prometheus-alertmanager, which the browser and Alertmanager tests drive
components:
	./.ci/components

test-fast: install
	$(PY) -m pytest -q -m "not slow"

lint: install
	$(VENV)/bin/ruff check .

test-datasets: install
	HEADROOM_DATASETS=$(DATASETS) $(PY) -m pytest -q -m datasets

$(VENV)/.bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $@

bench: $(VENV)/.bench
	$(PY) benchmarks/ingest.py --rows 5000000
	HEADROOM_DATASETS=$(DATASETS) $(PY) benchmarks/forecast_accuracy.py
	HEADROOM_DATASETS=$(DATASETS) $(PY) benchmarks/detection.py

# docs/report.png: the report `make demo` wrote, as headless Chromium shows it (apt: chromium)
screenshot:
	chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
	  --disable-sync --no-first-run --hide-scrollbars --window-size=1280,1600 \
	  --screenshot=$(abspath docs/report.png) file://$(abspath reports/report.html)

clean:
	rm -rf $(VENV) data/warehouse.duckdb data/warehouse.duckdb.wal data/demo reports .pytest_cache
