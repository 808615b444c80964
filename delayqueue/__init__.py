"""delayqueue: an HTTP delay-queue server on Redis Lua, speaking camellia-delay-queue's API."""

__version__ = "0.1.0"
