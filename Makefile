# delayqueue developer entry points. `make test` is what CI runs (.ci/run).
VENV := .venv
PY := python3
PYTEST_ARGS ?=

.PHONY: install run test wheel clean

# The venv is rebuilt whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install --upgrade pip
	$(VENV)/bin/pip install -e '.[dev,report]'
	touch $@

install: $(VENV)/.installed

# Starts the server; with no redis-url set, an embedded Redis persisting to ./data.
run: install
	$(VENV)/bin/delayqueue serve

# The whole suite; e.g. make test PYTEST_ARGS='-k config -x'.
test: install
	$(VENV)/bin/pytest -q $(PYTEST_ARGS)

wheel: install
	$(VENV)/bin/python -m build --wheel

# report: install        (added by the lead: Spark report from the snapshots)
# bench: install         (added by the lead: load and timing benchmark)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
