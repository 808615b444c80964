# delayqueue node: gunicorn + Flask. Point it at Redis with DELAYQUEUE_REDIS_URL
# (see docker-compose.yml); every setting is a DELAYQUEUE_* variable (config/delayqueue.yaml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DELAYQUEUE_SNAPSHOT_DIR=/var/lib/delayqueue/snapshots

RUN useradd --create-home --uid 10001 delayqueue \
    && mkdir -p /var/lib/delayqueue/snapshots /var/lib/delayqueue/report \
    && chown -R delayqueue:delayqueue /var/lib/delayqueue

# EXTRAS="[report]" builds the image of the Spark report job (docker-compose.yml).
ARG EXTRAS=""
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir ".${EXTRAS}"

USER delayqueue
# Run from the data directory so relative paths (data-dir) land in a writable place.
WORKDIR /var/lib/delayqueue
EXPOSE 8080

# Identical to what `delayqueue serve` runs.
CMD ["python", "-m", "gunicorn", "-c", "python:delayqueue.gunicorn_conf", "delayqueue.wsgi:app"]
