"""The gateway's usage events (pool_admin/metrics/gateway_events.py) on the real stream and
PostgreSQL: what a tick did and what workers carried become per-minute rows and totals once;
only configured upstreams are kept; figures past an event's bound are split, not lost."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import OperationalError

from activity.ownership_manager import GroupTally, TickReport
from gateway_runtime.wire import UpstreamTraffic, limits
from pool_admin.config.models import (
    GatewayActivity,
    GatewayTicks,
    GatewayTraffic,
    ProviderAccount,
    Upstream,
    UsageTotal,
)
from pool_admin.metrics import gateway_events
from pool_admin.metrics.consumer import Consumer, options_from_settings
from pool_admin.metrics.events import MAX_NUMBER
from pool_admin.metrics.gateway_events import record_tick, record_traffic
from pool_admin.metrics.stream import dropped_events, flush_events, sent_events
from tests.harness.metrics import drain_metrics

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture(autouse=True)
def _upstreams(settings, redis_url):
    settings.METRICS_REDIS_URL = redis_url
    flush_events()  # nothing an earlier test queued
    account = ProviderAccount.objects.create(name="acme")
    for name in ("acme-us", "acme-eu"):
        Upstream.objects.create(name=name, account=account, endpoint_url="https://a.example/p")


def traffic_rows() -> dict[tuple[str, str], tuple[int, int, int, int]]:
    return {
        (r.worker_group, r.upstream): (r.requests, r.bytes_up, r.bytes_down, r.errors)
        for r in GatewayTraffic.objects.all()
    }


def totals(prefix: str) -> dict[tuple[str, str], int]:
    rows = UsageTotal.objects.filter(family__startswith=prefix)
    return {(r.family, r.labels): r.value for r in rows}


def test_what_workers_carried_becomes_rows_and_totals_per_group_and_upstream(caplog):
    record_traffic("edge", [UpstreamTraffic("acme-us", 10, 2_000, 90_000, 1),
                            UpstreamTraffic("acme-eu", 0, 0, 0, 0)])  # fmt: skip
    record_traffic("edge", [UpstreamTraffic("acme-us", 5, 1_000, 10_000, 0)])
    record_traffic("core", [UpstreamTraffic("acme-eu", 1, 10, 20, 1)])
    drain_metrics()
    assert traffic_rows() == {  # one row per group, upstream and minute; none for nothing
        ("edge", "acme-us"): (15, 3_000, 100_000, 1),
        ("core", "acme-eu"): (1, 10, 20, 1),
    }
    assert totals("gateway_") == {
        ("gateway_requests", "edge|acme-us"): 15,
        ("gateway_bytes", "edge|acme-us|up"): 3_000,
        ("gateway_bytes", "edge|acme-us|down"): 100_000,
        ("gateway_errors", "edge|acme-us"): 1,
        ("gateway_requests", "core|acme-eu"): 1,
        ("gateway_bytes", "core|acme-eu|up"): 10,
        ("gateway_bytes", "core|acme-eu|down"): 20,
        ("gateway_errors", "core|acme-eu"): 1,
    }
    # Applied once: the same entries delivered again (a consumer that died after its
    # commit) add nothing.
    client = redis.Redis.from_url(settings.METRICS_REDIS_URL)
    try:
        entries = client.xrange(settings.METRICS_STREAM)
        assert entries
        consumer = Consumer(client, "test", options_from_settings(block_ms=1))
        assert consumer.handle(entries) == 0  # type: ignore[arg-type]
    finally:
        client.close()
    assert traffic_rows()[("edge", "acme-us")] == (15, 3_000, 100_000, 1)
    assert totals("gateway_requests") == {
        ("gateway_requests", "edge|acme-us"): 15,
        ("gateway_requests", "core|acme-eu"): 1,
    }


def test_only_configured_upstreams_are_kept(caplog):
    """A worker naming an upstream no one configured (deleted meanwhile, a bug) cannot grow
    the rows or /metrics' labels: its rows are left out, with a warning that names no
    value it sent."""
    caplog.set_level(logging.WARNING, logger=gateway_events.__name__)
    record_traffic("edge", [UpstreamTraffic("acme-us", 1, 1, 1, 0),
                            UpstreamTraffic("made-up", 9, 9, 9, 9),
                            UpstreamTraffic("p-10.0.0.1", 9, 9, 9, 9)])  # fmt: skip
    drain_metrics()
    assert traffic_rows() == {("edge", "acme-us"): (1, 1, 1, 0)}
    [warning] = [r.getMessage() for r in caplog.records]
    assert "2 report rows named an upstream that is not configured" in warning
    assert "made-up" not in warning and "10.0.0.1" not in warning
    # An upstream configured later counts once the names are read again.
    Upstream.objects.create(name="made-up", account=ProviderAccount.objects.get(),
                            endpoint_url="https://a.example/p")  # fmt: skip
    gateway_events.forget_configured_upstreams()
    record_traffic("edge", [UpstreamTraffic("made-up", 2, 0, 0, 0)])
    drain_metrics()
    assert traffic_rows()[("edge", "made-up")] == (2, 0, 0, 0)


def test_the_last_upstreams_read_are_used_while_postgresql_is_down(monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger=gateway_events.__name__)
    record_traffic("edge", [UpstreamTraffic("acme-us", 1, 0, 0, 0)])  # read: answered

    def down(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(gateway_events._upstream_names, "ttl_s", 0)
    monkeypatch.setattr(Upstream.objects, "values_list", down)
    record_traffic("edge", [UpstreamTraffic("acme-us", 2, 0, 0, 0)])  # never raises
    assert "could not be read (OperationalError)" in caplog.text
    drain_metrics()
    assert traffic_rows() == {("edge", "acme-us"): (3, 0, 0, 0)}


def test_figures_past_what_an_event_carries_are_split_and_add_up_exactly():
    """The wire allows a hundred times an event's bound (a worker whose reports failed for
    hours reports all it carried meanwhile): several events that add up to it, none lost."""
    big = limits.MAX_COUNTER
    assert big > MAX_NUMBER
    sent, dropped = sent_events(), dropped_events()  # this process's counts since it began
    record_traffic("edge", [UpstreamTraffic("acme-us", 3, big, MAX_NUMBER, 0)])
    flush_events()
    assert sent_events() - sent == -(-big // MAX_NUMBER) == 100
    assert dropped_events() == dropped
    drain_metrics()
    assert traffic_rows() == {("edge", "acme-us"): (3, big, MAX_NUMBER, 0)}
    assert totals("gateway_bytes")[("gateway_bytes", "edge|acme-us|up")] == big


def test_a_tick_is_one_event_and_one_per_group_it_did_something_for():
    report = TickReport(
        expired=3,
        groups={"edge": GroupTally(assigned=2, refused=1), "idle": GroupTally(),
                "core": GroupTally(renewed=4, drains_begun=1, released=1)},
        cut_short=True,
    )  # fmt: skip
    sent = sent_events()
    record_tick(report, timedelta(milliseconds=1_500))
    record_tick(TickReport(groups={"idle": GroupTally()}), timedelta(milliseconds=20))
    flush_events()
    assert sent_events() - sent == 2 + 2  # a tick each, and the two busy groups of the first
    drain_metrics()
    [ticks] = GatewayTicks.objects.all()
    assert (ticks.ticks, ticks.duration_ms, ticks.cut_short, ticks.expired) == (2, 1_520, 1, 3)
    activity = {
        r.worker_group: (r.assigned, r.renewed, r.drains_begun, r.released, r.refused)
        for r in GatewayActivity.objects.all()
    }
    assert activity == {"edge": (2, 0, 0, 0, 1), "core": (0, 4, 1, 1, 0)}  # not "idle"
    assert totals("gateway_") == {
        ("gateway_ticks", ""): 2,
        ("gateway_tick_duration_ms", ""): 1_520,
        ("gateway_ticks_cut_short", ""): 1,
        ("gateway_expired_leases", ""): 3,
        ("gateway_assigned", "edge"): 2,
        ("gateway_refused", "edge"): 1,
        ("gateway_renewed", "core"): 4,
        ("gateway_drains_begun", "core"): 1,
        ("gateway_released", "core"): 1,
    }
