"""GET /metrics: Prometheus' text format, parsed by Prometheus' own parser; the pool's and the
usage pipeline's families, named by Prometheus' rules; loopback only by default."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import redis
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from activity.ownership_manager import GroupTally, TickReport
from activity.types import FetchedBatch, FetchedProxy, HealthUpdate, ProxyState
from gateway_runtime.wire import ClientTraffic
from pool_admin import alerts, fetch_tasks
from pool_admin.bootstrap import get_pool, get_scheduler
from pool_admin.config.models import Alert, ApiClient, ProviderAccount, Upstream
from pool_admin.metrics import exposition
from pool_admin.metrics.gateway_events import record_tick, record_traffic
from pool_admin.metrics.stream import dropped_key, emit_event, flush_events
from tests.harness.metrics import drain_metrics
from tests.harness.vendor_server import vendor_server

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture(autouse=True)
def _fresh(filling_pool, settings, redis_url):
    settings.METRICS_REDIS_URL = redis_url
    exposition.clear_cache()
    yield
    exposition.clear_cache()


def scrape(address: str = "127.0.0.1"):
    return Client(REMOTE_ADDR=address).get("/metrics")


def families(body: bytes) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {
        f.name: [(s.labels, s.value) for s in f.samples]
        for f in text_string_to_metric_families(body.decode())
    }


def configure(*names: str) -> None:
    """Upstreams of one account ``acme``, never fetched (the pool figures come from seeding)."""
    account = ProviderAccount.objects.create(name="acme")
    for name in names:
        Upstream.objects.create(
            name=name, account=account, kind="preset", preset="webshare_list",
            endpoint_url="http://vendor.invalid/",
        )  # fmt: skip


def test_the_pool_and_the_pipeline_are_there_and_parse(settings, redis_url):
    configure("acme-a", "acme-b")
    now = datetime.now(UTC)
    expires = now + timedelta(minutes=5)
    proxies = [
        FetchedProxy(f"p{n}", f"k{n}", "10.0.0.1", 8000 + n, "http", expires, max_concurrency=2)
        for n in range(3)
    ]
    pool = get_pool()
    pool.upsert_fetched(FetchedBatch("acme-a", proxies, 100, timedelta(seconds=5), now))
    pool.apply_health([HealthUpdate("p0", ProxyState.AVAILABLE, now)])
    emit_event("outcome", upstream="acme-a", outcome="ok")
    emit_event("extract", client="c1", outcome="ok", returned=2, duration_ms=12,
               draws=[["acme-a", "us", 2, 1_500]])  # fmt: skip
    emit_event("fetch", upstream="acme-a", received=6, inserted=5, refreshed=0, available=2,
               dropped={"bad_port": 1})  # fmt: skip
    emit_event("check", upstream="acme-a", source="intake", states={"available": 2,
               "unhealthy": 3}, latency_ms=90, timed=2)  # fmt: skip
    emit_event("expired", upstream="acme-a", used=1, unused=4)
    flush_events()
    drain_metrics()
    redis.Redis.from_url(redis_url).incrby(dropped_key(), 3)
    redis.Redis.from_url(redis_url).hincrby(f"{settings.METRICS_STREAM}:lost", "total", 2)

    response = scrape()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")  # Prometheus' text
    got = families(response.content)
    assert got["proxypool_upstream_unextracted_proxies"] == [
        ({"upstream": "acme-a"}, 3.0),
        ({"upstream": "acme-b"}, 0.0),
    ]
    assert ({"upstream": "acme-a"}, 3.0) in got["proxypool_upstream_managed_proxies"]
    assert ({"upstream": "acme-a"}, 2.0) in got["proxypool_upstream_available_slots"]
    assert got["proxypool_upstream_read_errors"] == [({}, 0.0)]
    assert got["proxypool_upstreams_truncated"] == [({}, 0.0)]
    assert got["proxypool_usage_stream_entries"] == [({}, 1.0)]  # the five events: one entry
    assert got["proxypool_usage_events_dropped"] == [({}, 3.0)]  # the _total sample
    assert got["proxypool_usage_stream_entries_lost"] == [({}, 2.0)]
    assert got["proxypool_usage_stream_up"] == [({}, 1.0)]
    assert got["proxypool_usage_stream_lag_entries"] == [({}, 0.0)]
    assert "proxypool_usage_dead_letter_entries" in got
    # The pipeline's counters, from what the consumer applied: the outcome, an extract call
    # that drew two proxies, a fetch and its checks, an expiry.
    assert got["proxypool_usage_events_applied"] == [({}, 5.0)]
    assert got["proxypool_outcome_reports"] == [({"upstream": "acme-a", "outcome": "ok"}, 1.0)]
    assert got["proxypool_extract_calls"] == [({"outcome": "ok"}, 1.0)]
    assert got["proxypool_extracted_proxies"] == [({"upstream": "acme-a"}, 2.0)]
    assert ({"upstream": "acme-a", "reason": "bad_port"}, 1.0) in got["proxypool_dropped_entries"]
    checks = got["proxypool_checks"]
    assert ({"upstream": "acme-a", "source": "intake", "result": "available"}, 2.0) in checks
    assert ({"upstream": "acme-a", "used": "false"}, 4.0) in got["proxypool_expired_proxies"]
    assert ({"upstream": "acme-a"}, 2.0) in got["proxypool_time_to_first_use_seconds"]  # count
    assert ({"upstream": "acme-a"}, 0.09) in got["proxypool_check_latency_seconds"]  # sum, s
    assert ({}, 0.012) in got["proxypool_extract_duration_seconds"]
    assert got["proxypool_usage_totals_truncated"] == [({}, 0.0)]
    # Prometheus' rules: the prefix, and no label but the upstream and small fixed sets (no
    # proxy, IP, session or client).
    assert all(name.startswith("proxypool_") for name in got)
    assert {key for samples in got.values() for labels, _ in samples for key in labels} <= {
        "upstream", "outcome", "reason", "source", "result", "used", "quantile", "kind"
    }  # fmt: skip
    assert b"proxypool_usage_events_dropped_total 3.0" in response.content
    assert b'proxypool_extracted_proxies_total{upstream="acme-a"} 2.0' in response.content


def test_what_the_gateway_holds_per_upstream_from_the_same_read(monkeypatch):
    """Per upstream, the available proxies gateway workers hold (not draining) and the
    connections they offer, from the one ``upstream_inventory`` the slots come from."""
    configure("acme-a", "acme-b")
    now = datetime.now(UTC)
    expires = now + timedelta(minutes=5)
    proxies = [
        FetchedProxy(f"p{n}", f"k{n}", "10.0.0.1", 8000 + n, "http", expires, max_concurrency=n)
        for n in (2, 3, 4, 5)
    ]
    pool = get_pool()
    pool.upsert_fetched(FetchedBatch("acme-a", proxies, 100, timedelta(seconds=5), now))
    pool.apply_health([HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in proxies])
    pool.assign(now, "p2", "edge-1", timedelta(minutes=1))
    pool.assign(now, "p3", "edge-2", timedelta(minutes=1))
    draining = pool.assign(now, "p4", "edge-1", timedelta(minutes=1))
    pool.begin_drain("p4", "edge-1", draining.epoch)  # draining: not counted
    reads: list[str] = []
    real = pool.upstream_inventory
    monkeypatch.setattr(pool, "upstream_inventory", lambda u: reads.append(u) or real(u))
    got = families(scrape().content)
    assert got["proxypool_upstream_gateway_held_proxies"] == [
        ({"upstream": "acme-a"}, 2.0),
        ({"upstream": "acme-b"}, 0.0),
    ]
    assert got["proxypool_upstream_gateway_capacity"] == [
        ({"upstream": "acme-a"}, 5.0),
        ({"upstream": "acme-b"}, 0.0),
    ]
    assert ({"upstream": "acme-a"}, 5.0) in got["proxypool_upstream_available_slots"]  # p5 free
    assert reads == ["acme-a", "acme-b"]  # no read more than the slots already made


def test_fetch_failures_by_upstream_and_kind_and_open_alerts_by_kind(monkeypatch):
    """A vendor answering HTTP 500, fetched as the fetch task does: its failures counted by
    kind, and the alert they open is a gauge of open alerts by kind (every kind listed)."""
    monkeypatch.setitem(alerts.THRESHOLDS, Alert.Kind.FETCH_FAILING, 2)
    account = ProviderAccount.objects.create(name="acme")
    with vendor_server() as base:
        Upstream.objects.create(
            name="acme-a", account=account, kind="preset", preset="webshare_list",
            endpoint_url=f"{base}/status/500", allow_local_hosts=True,
        )  # fmt: skip
        for _ in range(2):
            get_scheduler().request(fetch_tasks.now(), "acme", "acme-a", timedelta(0))
            claims: list[dict] = []
            assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
            assert fetch_tasks.run_fetch(claims[0]) is None
    flush_events()
    drain_metrics()
    got = families(scrape().content)
    assert got["proxypool_fetch_failures"] == [({"upstream": "acme-a", "kind": "http_status"}, 2.0)]
    open_alerts = dict((labels["kind"], value) for labels, value in got["proxypool_open_alerts"])
    assert open_alerts == {
        kind.value: float(kind == Alert.Kind.FETCH_FAILING) for kind in Alert.Kind
    }


def test_a_scrape_is_read_at_most_once_per_few_seconds():
    first = scrape().content
    Upstream.objects.create(name="later", account=ProviderAccount.objects.create(name="x"),
                            kind="preset", preset="webshare_list",
                            endpoint_url="http://vendor.invalid/")  # fmt: skip
    assert scrape().content == first  # cached: the new upstream shows on a later scrape
    exposition.clear_cache()
    assert b'upstream="later"' in scrape().content


@pytest.mark.parametrize("address", ["10.1.2.3", "192.168.0.9", "2001:db8::1", "not-an-ip"])
def test_only_allowed_networks_may_scrape(address):
    response = scrape(address)
    assert response.status_code == 403
    assert b"proxypool_" not in response.content


def test_the_allowed_networks_are_a_setting(settings):
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert scrape("10.1.2.3").status_code == 200
    assert scrape("127.0.0.1").status_code == 403


def test_the_streams_redis_not_answering_is_a_gauge_not_an_error(settings):
    """The pool's families and the counters (PostgreSQL) are still there; the stream's are
    absent and ``proxypool_usage_stream_up`` is 0."""
    settings.METRICS_REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = scrape()
    assert response.status_code == 200
    got = families(response.content)
    assert got["proxypool_usage_stream_up"] == [({}, 0.0)]
    assert "proxypool_usage_stream_entries" not in got
    assert "proxypool_upstream_read_errors" in got


def test_at_most_so_many_upstreams_are_read_per_scrape(monkeypatch):
    configure("acme-a", "acme-b", "acme-c")
    monkeypatch.setattr(exposition, "MAX_UPSTREAMS", 2)
    got = families(scrape().content)
    assert [labels["upstream"] for labels, _ in got["proxypool_upstream_managed_proxies"]] == [
        "acme-a",
        "acme-b",
    ]
    assert got["proxypool_upstreams_truncated"] == [({}, 1.0)]


def test_the_gateways_families_per_group_and_upstream():
    """What ticks did per worker group, the snapshots workers refused per group and what they
    carried per group and upstream, from the producers through the consumer: never a client,
    worker, proxy or token label."""
    account = ProviderAccount.objects.create(name="acme")
    Upstream.objects.create(
        name="acme-a", account=account, kind="preset", preset="webshare_list",
        endpoint_url="http://vendor.invalid/",
    )  # fmt: skip
    record_tick(TickReport(expired=2, groups={"edge": GroupTally(assigned=3, renewed=6,
                                                                 drains_begun=1, released=1,
                                                                 refused=2)}),
                timedelta(milliseconds=250))  # fmt: skip
    record_tick(TickReport(groups={"edge": GroupTally()}, cut_short=True), timedelta(0))
    ApiClient.objects.create(name="shop")
    record_traffic(
        "edge",
        [ClientTraffic("shop", "acme-a", 40, 5, 4_000, 80_000, failed_upstream=3)],
        refused_snapshots=2,
    )
    flush_events()
    drain_metrics()
    response = scrape()
    got = families(response.content)
    edge = {"group": "edge"}
    assert got["proxypool_gateway_assigned_proxies"] == [(edge, 3.0)]
    assert got["proxypool_gateway_renewed_leases"] == [(edge, 6.0)]
    assert got["proxypool_gateway_drains_begun"] == [(edge, 1.0)]
    assert got["proxypool_gateway_released_proxies"] == [(edge, 1.0)]
    assert got["proxypool_gateway_refused_assigns"] == [(edge, 2.0)]
    assert got["proxypool_gateway_expired_leases"] == [({}, 2.0)]
    assert got["proxypool_gateway_ticks_cut_short"] == [({}, 1.0)]
    assert got["proxypool_gateway_tick_duration_seconds"] == [({}, 2.0), ({}, 0.25)]
    pair = {"group": "edge", "upstream": "acme-a"}
    assert got["proxypool_gateway_requests"] == [(pair, 40.0)]
    assert got["proxypool_gateway_tunnels"] == [(pair, 5.0)]
    assert got["proxypool_gateway_failures"] == [({**pair, "kind": "upstream"}, 3.0)]
    assert got["proxypool_gateway_refused_snapshots"] == [(edge, 2.0)]
    assert sorted(got["proxypool_gateway_bytes"], key=lambda s: s[0]["direction"]) == [
        ({**pair, "direction": "down"}, 80_000.0),
        ({**pair, "direction": "up"}, 4_000.0),
    ]
    gateway = [name for name in got if name.startswith("proxypool_gateway_")]
    assert {key for name in gateway for labels, _ in got[name] for key in labels} == {
        "group", "upstream", "direction", "kind"
    }  # fmt: skip
    text = response.content.decode()
    assert 'proxypool_gateway_bytes_total{direction="up",group="edge",upstream="acme-a"}' in text
    assert "proxypool_gateway_tick_duration_seconds_count 2.0" in text
    assert "# TYPE proxypool_gateway_requests_total counter" in text
