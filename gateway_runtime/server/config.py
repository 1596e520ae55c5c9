"""A gateway worker's limits: every buffer, timeout and count its proxy server keeps to
(docs/gateway.md "The worker"). Each has a default a newcomer can run with and is set by
``python -m gateway_runtime`` from its flags or the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Mail submission: commercial gateways refuse these so their exits are not spam relays;
#: every other port, loopback targets included, is the upstream's business.
DEFAULT_DENY_PORTS = frozenset({25, 465, 587})


@dataclass(frozen=True, slots=True)
class Limits:
    #: A request head (line and headers) read at most; past it, 431 and the connection closes.
    max_header_bytes: int = 16 * 1024
    #: The whole request head must arrive within this after its first byte (slowloris).
    header_timeout: float = 10.0
    #: A keep-alive client connection waiting for its next request is closed after this.
    idle_timeout: float = 60.0
    #: A tunnel with no byte either way for this long is closed.
    tunnel_idle_timeout: float = 300.0
    #: Reaching an upstream proxy and its answer to CONNECT (or the SOCKS handshake).
    connect_timeout: float = 10.0
    #: From a request's last byte sent to the upstream to its answer's first byte.
    first_byte_timeout: float = 60.0
    #: Client connections the worker holds at once; past it a new one is answered 503.
    max_connections: int = 10_000
    #: Proxies tried for one request or tunnel when reaching one fails (never the same twice).
    connect_attempts: int = 3
    deny_ports: frozenset[int] = field(default=DEFAULT_DENY_PORTS)
    #: On shutdown, tunnels and requests in flight get this long to finish.
    drain_timeout: float = 30.0
    #: Kept-alive upstream connections: idle at most this long (below tinyproxy's and squid's
    #: own idle limits, so a kept connection is rarely one the upstream already dropped)...
    upstream_idle_timeout: float = 4.0
    #: ... at most this many per proxy, and this many in all.
    upstream_idle_per_proxy: int = 32
    upstream_idle_total: int = 2_000
    #: A request body kept in memory so a request on a kept connection the upstream had
    #: dropped can be sent again; a larger body goes on a new connection, never retried.
    retry_body_bytes: int = 64 * 1024
    #: Successful logins remembered per snapshot (saves the HMAC on each keep-alive request).
    login_cache: int = 10_000
    #: The SOCKS5 handshake must finish within this.
    socks_handshake_timeout: float = 10.0

    def __post_init__(self) -> None:
        for name in (
            "header_timeout",
            "idle_timeout",
            "tunnel_idle_timeout",
            "connect_timeout",
            "first_byte_timeout",
            "drain_timeout",
            "upstream_idle_timeout",
            "socks_handshake_timeout",
        ):
            if not 0 < getattr(self, name) <= 86_400:
                raise ValueError(f"{name} must be above 0 and at most a day")
        for name, low, high in (
            ("max_header_bytes", 1024, 1024 * 1024),
            ("max_connections", 1, 1_000_000),
            ("connect_attempts", 1, 10),
            ("upstream_idle_per_proxy", 0, 1_000),
            ("upstream_idle_total", 0, 100_000),
            ("retry_body_bytes", 0, 16 * 1024 * 1024),
            ("login_cache", 0, 1_000_000),
        ):
            if not low <= getattr(self, name) <= high:
                raise ValueError(f"{name} must be from {low} to {high}")
        if any(not 1 <= port <= 65_535 for port in self.deny_ports):
            raise ValueError("deny_ports holds TCP ports, 1 to 65535")
