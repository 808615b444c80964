"""WSGI entry point: ``gunicorn -c python:delayqueue.gunicorn_conf delayqueue.wsgi:app``.

Imported in each worker after the fork (the gunicorn config does not preload), so the
background loops and the hint subscriber start once per worker process, and the gevent
worker has monkey-patched before anything here imports redis-py.
"""

import logging
import os

from delayqueue.http.app import create_app
from delayqueue.server.logs import configure

# Under gunicorn_conf the master already set the root logger up (server/logs.py) and this
# worker inherited it; under another WSGI server, the same lines from here.
if not logging.getLogger().handlers:
    configure(os.environ.get("DELAYQUEUE_LOG_LEVEL", "info"))
app = create_app()
app.extensions["delayqueue"].start()
