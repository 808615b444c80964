"""What a node checks and says once at start, in gunicorn's master (gunicorn_conf.py) and
in ``serve``: the port is free, the storage format is current, where the console and the
docs are, and a loud warning when it serves every address with authentication off.

Nothing here imports redis-py at module level: gunicorn's master imports this, and a worker
forked from a master that imported redis-py is monkey-patched by gevent after
``ssl.SSLContext`` was taken by name (``MonkeyPatchWarning``; settings/redis_url.py).
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import socket
import sys
import traceback
from typing import Iterable

from delayqueue.settings.config import Settings

logger = logging.getLogger("delayqueue.startup")

# Environment variables that hand gunicorn's master sockets it did not bind itself: a USR2
# re-exec (the old master still listens on the port) and systemd's socket activation.
INHERITED_SOCKETS = ("GUNICORN_FD", "LISTEN_FDS")


def port_in_use_message(port: int, option: str = "--port") -> str:
    """The one line a node whose port is taken stops with; ``option`` is how to choose."""
    return f"port {port} is in use; choose another with {option}"


def port_in_use(host: str, port: int) -> bool:
    """True when another socket already listens on ``host:port``.

    Binds the way gunicorn will (SO_REUSEADDR, so a port in TIME_WAIT counts as free) and lets
    go at once. Only "in use" is answered here: any other error (a host that is not an
    address of this machine, a port below 1024 without the right) is gunicorn's to report.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        return False
    for family, kind, proto, _name, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return True
    return False


def sockets_inherited(environ=os.environ) -> bool:
    return any(name in environ for name in INHERITED_SOCKETS)


def check_storage_apart(settings: Settings) -> int:
    """``check_node_start`` (core/storage.py) in a forked child; its exit code (0: start).

    Apart because the check talks to Redis through redis-py, which gunicorn's master must not
    import (the module docstring). The child prints its own lines: the refusal as one
    ``delayqueue: ...`` line (exit 2), an unreachable Redis as a warning (exit 0).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            code = _check_storage(settings)
        except BaseException:  # noqa: BLE001 - report anything, then leave the child at once
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _check_storage(settings: Settings) -> int:
    from delayqueue.core.storage import StorageFormatError, check_node_start
    from delayqueue.server.logs import configure

    try:
        warning = check_node_start(settings)
    except StorageFormatError as exc:
        print(f"delayqueue: {exc}", file=sys.stderr)
        return 2
    if warning:
        configure(settings.log_level)
        logger.warning("%s", warning)
    return 0


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


def _shown_host(host: str) -> str:
    """The host to put in a URL: an unspecified address (every address) as loopback."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host
    if address.is_unspecified:
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    return f"[{address}]" if address.version == 6 else str(address)


def bound_addresses(listeners: Iterable[object]) -> list[tuple[str, int]]:
    """(host, port) of each TCP listener gunicorn bound (a unix socket has none)."""
    found = []
    for listener in listeners:
        sock = getattr(listener, "sock", None)
        if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
            continue
        host, port = sock.getsockname()[:2]
        found.append((host, port))
    return found


def urls_line(host: str, port: int) -> str:
    """Where a person finds the console and the docs of a node bound to ``host:port``."""
    shown = _shown_host(host)
    line = f"console: http://{shown}:{port}/dashboard/  docs: http://{shown}:{port}/docs"
    if shown.strip("[]") != host.strip("[]"):
        line += f"  (listening on {host}: every address of this machine)"
    return line


def insecure_line(addresses: Iterable[tuple[str, int]], settings: Settings) -> str | None:
    """The warning for a node that anyone who reaches it may use: off loopback, no tokens."""
    if settings.auth_tokens:
        return None
    exposed = [f"{host}:{port}" for host, port in addresses if not _is_loopback(host)]
    if not exposed:
        return None
    return (f"NO AUTHENTICATION: listening on {', '.join(exposed)} with no auth-tokens set: "
            "anyone who reaches this port may send, read and delete every message; set "
            "auth-tokens (docs/operations.md#authentication) or listen on 127.0.0.1 (--host)")


def announce(server, settings: Settings) -> None:
    """gunicorn's ``when_ready`` (the master, once the port is bound, once per node)."""
    addresses = bound_addresses(server.LISTENERS)
    for host, port in addresses:
        logger.info("%s", urls_line(host, port))
    warning = insecure_line(addresses, settings)
    if warning:
        logger.warning("%s", warning)
