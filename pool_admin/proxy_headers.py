"""The client's address and scheme behind the reverse proxy (deploy/nginx/proxypool.conf).

A WSGI middleware, outermost in ``pool_admin.wsgi.application``: for a request whose peer
(``REMOTE_ADDR``) is in ``WEB_TRUSTED_PROXIES``, ``REMOTE_ADDR`` becomes the proxy's
``X-Real-IP`` and ``wsgi.url_scheme`` its ``X-Forwarded-Proto``; from any other peer both
headers are dropped, so a client that talks to a web server directly cannot pass for another
address (the admin's login lockout, ``/metrics``' allowed networks and the access log all read
``REMOTE_ADDR``). The environ is changed in place: the access log, written after the answer
from the same environ, shows the client's address. No Django import: it is given its networks.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Sequence
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: What the proxy sets (and overwrites whatever its client sent).
ADDRESS_HEADER = "HTTP_X_REAL_IP"
SCHEME_HEADER = "HTTP_X_FORWARDED_PROTO"
#: Headers no one but a trusted proxy may set: dropped from any other peer's request.
PROXY_HEADERS = (ADDRESS_HEADER, SCHEME_HEADER, "HTTP_X_FORWARDED_FOR")


def parse_networks(texts: Sequence[str]) -> tuple[Network, ...]:
    """``WEB_TRUSTED_PROXIES``' networks; a ValueError names the one that is not."""
    networks = []
    for text in texts:
        try:
            networks.append(ipaddress.ip_network(text.strip()))
        except ValueError:
            raise ValueError(f"{text!r} is not a network") from None
    return tuple(networks)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


class TrustedProxies:
    def __init__(self, app: WSGIApp, networks: Sequence[Network]) -> None:
        self.app = app
        self.networks = tuple(networks)

    def trusted(self, peer: str) -> bool:
        address = _address(peer)
        return address is not None and any(address in network for network in self.networks)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if self.networks and self.trusted(environ.get("REMOTE_ADDR", "")):
            client = _address(environ.get(ADDRESS_HEADER, ""))
            if client is not None:  # a proxy that sent none (or nonsense): its own address
                environ["REMOTE_ADDR"] = str(client)
            scheme = environ.get(SCHEME_HEADER, "").strip().lower()
            if scheme in ("http", "https"):
                environ["wsgi.url_scheme"] = scheme
        else:
            for header in PROXY_HEADERS:
                environ.pop(header, None)
        return self.app(environ, start_response)
