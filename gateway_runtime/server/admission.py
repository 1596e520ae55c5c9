"""A gateway client's own limits on one worker, from the snapshot: connections held at once
(``max_connections``) and requests and tunnels started per second (``requests_per_second``, a
token bucket a second deep). Past either the client is answered 429; other clients are not
affected. Both tables are bounded by the snapshot's clients (at most the wire's 10,000).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway_runtime.wire import GatewayClient


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class Admission:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._connections: dict[str, int] = {}
        self._buckets: dict[str, _Bucket] = {}

    def enter(self, client: GatewayClient) -> bool:
        """A client connection begins; False (nothing counted) when the client holds its most."""
        held = self._connections.get(client.name, 0)
        if held >= client.max_connections:
            return False
        self._connections[client.name] = held + 1
        return True

    def leave(self, client_name: str) -> None:
        held = self._connections.get(client_name, 0) - 1
        if held > 0:
            self._connections[client_name] = held
        else:
            self._connections.pop(client_name, None)

    def connections(self, client_name: str) -> int:
        return self._connections.get(client_name, 0)

    def take(self, client: GatewayClient) -> bool:
        """One request or tunnel starts; False when the client is past its rate."""
        now = self._clock()
        rate = client.requests_per_second
        bucket = self._buckets.get(client.name)
        if bucket is None:
            if len(self._buckets) > 20_000:  # clients that left the snapshot, now and then
                self._buckets.clear()
            bucket = self._buckets[client.name] = _Bucket(float(rate), now)
        else:
            bucket.tokens = min(float(rate), bucket.tokens + (now - bucket.at) * rate)
            bucket.at = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True
