"""The gateway clients every worker's snapshot carries: the enabled API clients allowed at the
gateway, each with its extract restrictions, its gateway limits and one salted verifier per
active key (gateway_runtime/wire/verifier.py; made when the key was issued).

Read from PostgreSQL at most once per ``CLIENTS_TTL`` per process and kept: a change an operator
makes reaches the snapshots within it, and while PostgreSQL is down the last set read keeps
being served (as a recently verified API key keeps working), so the workers keep their clients.
Bounded: at most ``wire.limits.MAX_CLIENTS`` clients (more is "unavailable", never a set with
some left out) and each client's ``MAX_CLIENT_KEYS`` newest keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from django.db.models import Prefetch

from activity.snapshot_publisher import ClientSet
from gateway_runtime.wire import GatewayClient, limits
from pool_admin.api.auth import ConfigUnavailable
from pool_admin.config.models import ApiClient, ApiKey
from pool_admin.kept_reads import KeptRead, NeverRead

CLIENTS_TTL = timedelta(seconds=5)


class TooManyGatewayClients(Exception):
    """More clients may use the gateway than a snapshot carries."""


def read_gateway_clients() -> ClientSet:
    """The gateway clients as PostgreSQL has them now."""
    keys = ApiKey.objects.active().exclude(gateway_verifier="").order_by("-created_at")
    found = list(
        ApiClient.objects.filter(enabled=True, gateway_enabled=True)
        .prefetch_related("allowed_upstreams", Prefetch("keys", queryset=keys, to_attr="usable"))
        .order_by("name")[: limits.MAX_CLIENTS + 1]
    )
    if len(found) > limits.MAX_CLIENTS:
        raise TooManyGatewayClients(
            f"more than {limits.MAX_CLIENTS} API clients may use the gateway"
        )
    clients = []
    for client in found:
        verifiers = tuple(key.gateway_verifier for key in client.usable[: limits.MAX_CLIENT_KEYS])
        if not verifiers:  # no key it could present at a worker
            continue
        clients.append(
            GatewayClient(
                name=client.name,
                verifiers=verifiers,
                max_connections=client.gateway_max_connections,
                requests_per_second=client.gateway_requests_per_second,
                allowed_upstreams=frozenset(u.name for u in client.allowed_upstreams.all()),
                allowed_regions=frozenset(client.allowed_regions),
                allowed_protocols=frozenset(client.allowed_protocols),
            )
        )
    return ClientSet.of(clients)


class GatewayClientsCache:
    """The process's gateway clients, read at most once per ``ttl`` (see the module's text)."""

    def __init__(
        self,
        read: Callable[[], ClientSet] = read_gateway_clients,
        ttl: timedelta = CLIENTS_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kept = KeptRead(
            read, ttl, "gateway clients", also=(TooManyGatewayClients,), clock=clock
        )

    def current(self) -> ClientSet:
        """The clients; ``ConfigUnavailable`` (503) only when none could ever be read."""
        try:
            return self._kept.current()
        except NeverRead as exc:
            raise ConfigUnavailable() from exc

    def clear(self) -> None:
        self._kept.forget()
