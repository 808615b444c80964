"""A push URL, checked when it is set (createSubscription / setSubscriptionConfig).

Only http and https, a host, no credentials in the URL (they would be stored and shown), and
every address the host resolves to inside ``push-allowed-networks`` (settings/
push_networks.py). The delivery loop checks the resolved address again at each connection
(background/push_client.py): DNS may answer differently later.
"""

from __future__ import annotations

import socket
from typing import Callable
from urllib.parse import urlsplit

from delayqueue.settings.push_networks import AllowedNetworks

from .errors import BadRequest

Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (TCP), in the resolver's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a push URL.

    Raises:
        ValueError: not an http or https URL with a host, or with a user or password.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError("must be an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry a user or password (use pushSecret to sign)")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


def check_push_url(url: str, networks: AllowedNetworks,
                   resolver: Resolver = resolve) -> str:
    """The URL, if a push may go there.

    Raises:
        BadRequest: naming ``pushUrl`` and the rule it breaks: not http(s), a host that does
            not resolve, or an address outside ``push-allowed-networks``.
    """
    try:
        _, host, port = origin(url)
    except ValueError as exc:
        raise BadRequest(f"pushUrl: {exc}, got {url[:200]!r}") from None
    try:
        addresses = resolver(host, port)
    except (OSError, UnicodeError) as exc:
        raise BadRequest(f"pushUrl: host {host!r} does not resolve ({exc})") from None
    refused = [a for a in addresses if not networks.allows(a)]
    if refused or not addresses:
        raise BadRequest(
            f"pushUrl: host {host!r} resolves to {', '.join(refused) or 'nothing'}, outside "
            f"push-allowed-networks ({networks.text or 'nothing'}); loopback, private and "
            "link-local addresses need an operator to list them")
    return url
