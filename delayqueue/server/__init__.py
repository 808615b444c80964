"""Serving: gunicorn's worker classes and the embedded redis-server."""
