# delayqueue node: gunicorn + Flask. Point it at Redis with DELAYQUEUE_REDIS_URL
# (see docker-compose.yml); every setting is a DELAYQUEUE_* variable (config/delayqueue.yaml).
#
#   docker build -t delayqueue .
#   docker run -p 8080:8080 -e DELAYQUEUE_REDIS_URL=redis://redis.example:6379/0 delayqueue
#
# The base image is pinned to one Python release: CPython 3.11.14 on Debian 12 (bookworm),
# the interpreter line the project is developed and tested on (3.11). Bump it on purpose.
# tests/server/test_install_docker.py checks this file (there is no Docker engine where the project
# is developed) and runs the HEALTHCHECK's command against a live node.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# --- 1. the wheel: the only stage that sees the whole build context -------------------------
FROM ${PYTHON_IMAGE} AS wheel
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

# --- 2. the node ------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DELAYQUEUE_SNAPSHOT_DIR=/var/lib/delayqueue/snapshots

RUN groupadd --gid 10001 delayqueue \
    && useradd --create-home --uid 10001 --gid 10001 delayqueue \
    && mkdir -p /var/lib/delayqueue/snapshots /var/lib/delayqueue/report \
    && chown -R delayqueue:delayqueue /var/lib/delayqueue

# The node installs the server (`delayqueue[server]`) always; EXTRAS="[report]" adds the Spark
# report job's dependencies for its image (docker-compose.yml).
ARG EXTRAS=""

# The dependencies alone, from pyproject.toml only, at the exact versions constraints.txt pins
# (`make constraints` writes it): the same packages on every build, until the file changes.
# This layer stays cached until pyproject.toml, constraints.txt (or EXTRAS) change, so a code
# change rebuilds only the small layer below.
COPY pyproject.toml /tmp/deps/pyproject.toml
COPY constraints.txt /tmp/deps/constraints.txt
RUN python -c 'import re, sys, tomllib; p = tomllib.load(open("/tmp/deps/pyproject.toml", "rb"))["project"]; extras = dict.fromkeys(["server", *re.findall(r"[A-Za-z0-9_-]+", sys.argv[1])]); print("\n".join(p["dependencies"] + [d for e in extras for d in p["optional-dependencies"][e]]))' "${EXTRAS}" > /tmp/deps/requirements.txt \
    && pip install --no-cache-dir -c /tmp/deps/constraints.txt -r /tmp/deps/requirements.txt \
    && rm -rf /tmp/deps

# The project itself, without touching the dependencies; pip check proves the layer above
# holds everything the wheel requires.
COPY --from=wheel /dist/ /tmp/dist/
RUN pip install --no-cache-dir --no-deps /tmp/dist/*.whl \
    && pip check \
    && rm -rf /tmp/dist

# The user created above, by number (so a runtime can tell it is not root).
USER 10001:10001
# Run from the data directory so relative paths (data-dir) land in a writable place.
WORKDIR /var/lib/delayqueue
EXPOSE 8080

# Healthy while /camellia/health/status answers 200: HTTP 500 when the node was taken
# offline (POST /camellia/health/offline) or cannot reach Redis. The slim image has no curl;
# Python's own http.client does it, on the port the node listens on (DELAYQUEUE_PORT).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import http.client, os, sys; c = http.client.HTTPConnection('127.0.0.1', int(os.environ.get('DELAYQUEUE_PORT') or 8080), timeout=4); c.request('GET', '/camellia/health/status'); sys.exit(c.getresponse().status != 200)"]

# Identical to what `delayqueue serve` runs.
CMD ["python", "-m", "gunicorn", "-c", "python:delayqueue.gunicorn_conf", "delayqueue.wsgi:app"]
