"""Where push URLs may connect (the server setting ``push-allowed-networks``).

A push URL is given by whoever may configure a subscription; without this check it could
make the server call its own Redis, a cloud metadata endpoint or any address of the private
network (server-side request forgery). The setting lists CIDRs, and the word ``public`` for
every globally routable address; the default is ``public`` alone. core/push_target.py checks
a URL's resolved addresses when it is set, and background/push_client.py again at every
connection (a name may resolve elsewhere later).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

PUBLIC = "public"
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def is_public(address: Address) -> bool:
    """Globally routable unicast: not loopback, private, link-local (cloud metadata:
    169.254.169.254), shared (100.64/10), multicast, reserved or unspecified."""
    return address.is_global and not address.is_multicast


@dataclass(frozen=True)
class AllowedNetworks:
    public: bool
    networks: tuple[Network, ...]

    @classmethod
    def parse(cls, text: str) -> "AllowedNetworks":
        """Parse "public,10.0.0.0/8,127.0.0.1" (an address alone is a /32 or /128).

        Raises:
            ValueError: naming the part that is neither ``public`` nor a CIDR.
        """
        public, networks = False, []
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            if part.lower() == PUBLIC:
                public = True
                continue
            try:
                networks.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ValueError(f"{part!r} is neither 'public' nor a CIDR such as "
                                 "10.0.0.0/8 or fd00::/8") from None
        return cls(public, tuple(networks))

    @property
    def text(self) -> str:
        """The setting as written back (configuration dumps, errors)."""
        parts = [PUBLIC] if self.public else []
        return ",".join(parts + [str(n) for n in self.networks])

    def allows(self, address: str | Address) -> bool:
        """Whether a push may connect to ``address`` (an IPv4-mapped IPv6 address is judged
        as the IPv4 address it carries)."""
        ip = ipaddress.ip_address(address.split("%", 1)[0] if isinstance(address, str)
                                  else address)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if self.public and is_public(ip):
            return True
        return any(ip.version == n.version and ip in n for n in self.networks)
