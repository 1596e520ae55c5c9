"""The gateway clients' cache (pool_admin/gateway_clients.py): read at most once per TTL, the
last set kept while PostgreSQL cannot answer, 503 only when none was ever read, and the bound on
clients refused whole rather than cut."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import OperationalError

from activity.snapshot_publisher import ClientSet
from gateway_runtime.wire import GatewayClient, limits, make_verifier
from pool_admin import gateway_clients
from pool_admin.api.auth import ConfigUnavailable
from pool_admin.config.models import ApiClient, ApiKey
from pool_admin.gateway_clients import GatewayClientsCache, read_gateway_clients


def client_set(name: str) -> ClientSet:
    verifier = make_verifier("pp_0123456789ab_" + "k" * 32, b"s" * 16)
    return ClientSet.of([GatewayClient(name, (verifier,), 10, 10)])


@pytest.fixture
def clock():
    return [1000.0]


def test_the_clients_are_read_once_per_ttl_and_kept_while_postgresql_is_down(clock):
    answers: list[object] = [client_set("a"), OperationalError("down"), client_set("b")]
    reads = []

    def read() -> ClientSet:
        reads.append(1)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    cache = GatewayClientsCache(read, ttl=timedelta(seconds=5), clock=lambda: clock[0])
    assert cache.current().clients[0].name == "a"
    clock[0] += 4.9
    assert cache.current().clients[0].name == "a" and len(reads) == 1
    clock[0] += 0.2
    assert cache.current().clients[0].name == "a"  # PostgreSQL down: the last set kept
    assert len(reads) == 2
    clock[0] += 5.1
    assert cache.current().clients[0].name == "b"


def test_no_clients_ever_read_is_a_503(clock):
    def down() -> ClientSet:
        raise OperationalError("down")

    with pytest.raises(ConfigUnavailable):
        GatewayClientsCache(down, clock=lambda: clock[0]).current()


def test_the_stamp_changes_with_the_clients_only():
    assert client_set("a").stamp == client_set("a").stamp
    assert client_set("a").stamp != client_set("b").stamp


@pytest.mark.django_db
@pytest.mark.postgres
def test_more_clients_than_a_snapshot_carries_are_refused_whole(monkeypatch):
    monkeypatch.setattr(limits, "MAX_CLIENTS", 2)
    for name in ("c1", "c2", "c3"):
        ApiKey.objects.issue(ApiClient.objects.create(name=name, gateway_enabled=True))
    with pytest.raises(gateway_clients.TooManyGatewayClients):
        read_gateway_clients()
    ApiClient.objects.filter(name="c3").update(gateway_enabled=False)
    assert [c.name for c in read_gateway_clients().clients] == ["c1", "c2"]
