"""Which addresses a proxy may be on: one rule for the parsers (a host as listed) and the
checker (the address a host name led to, once connected).

Never: the unspecified address and 0.0.0.0/8 (this host), link-local (169.254.0.0/16 and
fe80::/10: the cloud metadata address), multicast, broadcast and reserved ones, also
IPv4-mapped. Loopback and the private ranges only where local hosts are allowed (a local test,
the demo provider's proxies); any other global address always.
"""

from __future__ import annotations

import ipaddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: 0.0.0.0/8, "this network" (RFC 791): Python calls it private, and 0.x.y.z reaches this host.
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")


def allowed(address: Address, allow_local: bool) -> bool:
    """Whether a proxy may be at ``address``."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:  # first: IPv6's ::1 is in a reserved block too
        return allow_local
    if (
        address.is_unspecified
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address in _THIS_NETWORK
    ):
        return False
    return address.is_global or (allow_local and address.is_private)


def never(address: Address) -> bool:
    """Whether ``address`` is one no proxy may be at, local hosts allowed or not."""
    return not allowed(address, allow_local=True)
