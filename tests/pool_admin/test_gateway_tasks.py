"""The ownership manager's Django side (pool_admin/gateway_tasks.py): the groups read from
PostgreSQL, one tick at a time under the tick lease, on the real pool."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activity import FetchedBatch, FetchedProxy, HealthUpdate, ProxyState
from pool_admin import gateway_tasks
from pool_admin.bootstrap import get_pool, tick_lease
from pool_admin.config.models import (
    GatewayActivity,
    GatewayTicks,
    GatewayWorker,
    ProviderAccount,
    Upstream,
    WorkerGroup,
)
from pool_admin.metrics.stream import flush_events, sent_events
from tests.harness.metrics import drain_metrics

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


def stock(upstream: str, n: int) -> None:
    now = datetime.now(UTC)
    proxies = [
        FetchedProxy(
            proxy_id=f"{upstream}-p{i}",
            unique_key=f"{upstream}-{i}",
            host=f"10.1.{i // 250}.{i % 250 + 1}",
            port=8080,
            protocol="http",
            expires_at=now + timedelta(minutes=10),
            max_concurrency=4,
        )
        for i in range(n)
    ]
    pool = get_pool()
    pool.upsert_fetched(FetchedBatch(upstream, proxies, 1000, timedelta(seconds=5), now))
    pool.apply_health([HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in proxies])


@pytest.fixture
def gateway(filling_pool):
    account = ProviderAccount.objects.create(name="acme")
    us = Upstream.objects.create(
        name="acme-us", account=account, endpoint_url="https://a.example/p"
    )
    eu = Upstream.objects.create(
        name="acme-eu", account=account, endpoint_url="https://a.example/p"
    )
    group = WorkerGroup.objects.create(name="edge", target_capacity=8)
    group.allowed_upstreams.add(eu)
    GatewayWorker.objects.create(name="edge-1", group=group)
    GatewayWorker.objects.create(name="edge-off", group=group, enabled=False)
    stock("acme-us", 5)
    stock("acme-eu", 5)
    return us, eu, group


def held(worker: str) -> list[str]:
    return sorted(get_pool().worker_assignments(worker, 100).held)


def test_the_groups_are_read_as_configured(gateway):
    [edge] = gateway_tasks.configured_groups()
    assert (edge.name, edge.target_capacity, edge.upstreams) == ("edge", 8, ("acme-eu",))
    assert edge.workers == frozenset({"edge-1"})  # a disabled worker gets nothing


def test_a_tick_tops_a_live_worker_up_from_its_groups_upstreams(gateway):
    get_pool().open_session("edge-1", "s1", timedelta(minutes=5))
    report = gateway_tasks.run_ownership_tick()
    assert report is not None and report.groups["edge"].assigned == 2  # 2 x 4 connections
    assert [pid.split("-p")[0] for pid in held("edge-1")] == ["acme-eu", "acme-eu"]
    assert tick_lease().holder(gateway_tasks.LEASE_NAME, datetime.now(UTC)) is None  # released


def test_no_group_selecting_upstreams_draws_from_every_enabled_one(gateway):
    _, eu, group = gateway
    group.allowed_upstreams.clear()
    eu.enabled = False
    eu.save()
    [edge] = gateway_tasks.configured_groups()
    assert edge.upstreams == ("acme-us",)


def test_a_tick_is_skipped_while_another_holds_the_lease(gateway):
    get_pool().open_session("edge-1", "s1", timedelta(minutes=5))
    now = datetime.now(UTC)
    assert tick_lease().acquire(gateway_tasks.LEASE_NAME, "other-1", now, timedelta(seconds=30))
    assert gateway_tasks.run_ownership_tick() is None
    assert held("edge-1") == []
    tick_lease().release(gateway_tasks.LEASE_NAME, "other-1", now)
    assert gateway_tasks.run_ownership_tick() is not None
    assert len(held("edge-1")) == 2


def test_a_tick_that_ran_is_recorded_and_a_skipped_one_is_not(gateway, settings, redis_url):
    """One ``gateway_tick`` event per tick that ran, and a ``gateway_ownership`` event for a
    group only when the tick did something for it (a tick every 2 s: the stream stays small)."""
    settings.METRICS_REDIS_URL = redis_url
    flush_events()
    get_pool().open_session("edge-1", "s1", timedelta(minutes=5))
    sent = sent_events()
    assert gateway_tasks.run_ownership_tick() is not None  # assigns 2
    assert gateway_tasks.run_ownership_tick() is not None  # nothing to do
    now = datetime.now(UTC)
    assert tick_lease().acquire(gateway_tasks.LEASE_NAME, "other-1", now, timedelta(seconds=30))
    assert gateway_tasks.run_ownership_tick() is None  # skipped: nothing recorded
    tick_lease().release(gateway_tasks.LEASE_NAME, "other-1", now)
    flush_events()
    assert sent_events() - sent == 2 + 1
    drain_metrics()
    assert sum(r.ticks for r in GatewayTicks.objects.all()) == 2
    assert sum(r.cut_short for r in GatewayTicks.objects.all()) == 0
    activity = [(r.worker_group, r.assigned, r.refused) for r in GatewayActivity.objects.all()]
    assert activity == [("edge", 2, 0)]
