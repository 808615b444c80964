"""WSGI entry point: ``gunicorn -c python:delayqueue.gunicorn_conf delayqueue.wsgi:app``.

Imported in each worker after the fork (the gunicorn config does not preload), so the
background loops and the hint subscriber start once per worker process.
"""

import logging
import os

from delayqueue.http.app import create_app

logging.basicConfig(
    level=os.environ.get("DELAYQUEUE_LOG_LEVEL", "info").upper(),
    format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s",
)
app = create_app()
app.extensions["delayqueue"].start()
