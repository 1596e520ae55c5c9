"""The gateway's usage events (pool_admin/metrics/gateway_events.py) on the real stream and
PostgreSQL: what a tick did and what workers carried (per client and upstream) and the
snapshots they refused become per-minute rows and totals once; only configured upstreams and
clients (and the workers' OTHER) are kept; figures past an event's bound are split, not
lost."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import OperationalError

from activity.ownership_manager import GroupTally, TickReport
from gateway_runtime.wire import ClientTraffic, limits
from pool_admin.config.models import (
    ApiClient,
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
    for name in ("shop", "crawler"):
        ApiClient.objects.create(name=name)


def T(upstream: str, requests: int = 0, bytes_up: int = 0, bytes_down: int = 0,
      failed_upstream: int = 0, client: str = "shop") -> ClientTraffic:  # fmt: skip
    """Shop's traffic through ``upstream`` (another client's when told)."""
    return ClientTraffic(client, upstream, requests=requests, bytes_up=bytes_up,
                         bytes_down=bytes_down, failed_upstream=failed_upstream)  # fmt: skip


def traffic_rows() -> dict[tuple[str, str], tuple[int, ...]]:
    """Per group and upstream, every client's: requests, bytes up and down, failures."""
    rows: dict[tuple[str, str], list[int]] = {}
    for r in GatewayTraffic.objects.all():
        sums = rows.setdefault((r.worker_group, r.upstream), [0, 0, 0, 0])
        for i, value in enumerate((r.requests, r.bytes_up, r.bytes_down, r.errors)):
            sums[i] += value
    return {key: tuple(sums) for key, sums in rows.items()}


def totals(prefix: str) -> dict[tuple[str, str], int]:
    rows = UsageTotal.objects.filter(family__startswith=prefix)
    return {(r.family, r.labels): r.value for r in rows}


def test_what_workers_carried_becomes_rows_and_totals_per_group_and_upstream(caplog):
    record_traffic("edge", [T("acme-us", 10, 2_000, 90_000, 1), T("acme-eu")])
    record_traffic("edge", [T("acme-us", 5, 1_000, 10_000, 0)])
    record_traffic("core", [T("acme-eu", 1, 10, 20, 1)])
    drain_metrics()
    assert traffic_rows() == {  # one row per group, upstream and minute; none for nothing
        ("edge", "acme-us"): (15, 3_000, 100_000, 1),
        ("core", "acme-eu"): (1, 10, 20, 1),
    }
    assert totals("gateway_") == {
        ("gateway_requests", "edge|acme-us"): 15,
        ("gateway_bytes", "edge|acme-us|up"): 3_000,
        ("gateway_bytes", "edge|acme-us|down"): 100_000,
        ("gateway_failures", "edge|acme-us|upstream"): 1,
        ("gateway_requests", "core|acme-eu"): 1,
        ("gateway_bytes", "core|acme-eu|up"): 10,
        ("gateway_bytes", "core|acme-eu|down"): 20,
        ("gateway_failures", "core|acme-eu|upstream"): 1,
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


def test_only_configured_upstreams_and_clients_are_kept(caplog, monkeypatch):
    """A worker naming an upstream or client no one configured (deleted meanwhile, a bug)
    cannot grow the rows or /metrics' labels: its rows are left out, with a warning that names
    no value it sent."""
    caplog.set_level(logging.WARNING, logger=gateway_events.__name__)
    # A warning clock of its own: an earlier test's left-out rows must not mute this one's.
    monkeypatch.setattr(gateway_events, "_left_out", gateway_events._LeftOut())
    record_traffic("edge", [T("acme-us", 1, 1, 1, 0), T("made-up", 9, 9, 9, 9),
                            T("p-10.0.0.1", 9, 9, 9, 9),
                            T("acme-us", 9, client="nobody"),
                            T("acme-us", 9, client="203.0.113.9")])  # fmt: skip
    drain_metrics()
    assert traffic_rows() == {("edge", "acme-us"): (1, 1, 1, 0)}
    [warning] = [r.getMessage() for r in caplog.records]
    assert "4 report rows named an upstream or API client that is not configured" in warning
    assert "made-up" not in warning and "10.0.0.1" not in warning
    assert "nobody" not in warning and "203.0.113.9" not in warning
    # An upstream configured later counts once the names are read again.
    Upstream.objects.create(name="made-up", account=ProviderAccount.objects.get(),
                            endpoint_url="https://a.example/p")  # fmt: skip
    gateway_events.forget_configured_upstreams()
    record_traffic("edge", [T("made-up", 2, 0, 0, 0)])
    drain_metrics()
    assert traffic_rows()[("edge", "made-up")] == (2, 0, 0, 0)


def test_the_last_upstreams_read_are_used_while_postgresql_is_down(monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger=gateway_events.__name__)
    record_traffic("edge", [T("acme-us", 1, 0, 0, 0)])  # read: answered

    def down(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(gateway_events._upstream_names, "ttl_s", 0)
    monkeypatch.setattr(Upstream.objects, "values_list", down)
    record_traffic("edge", [T("acme-us", 2, 0, 0, 0)])  # never raises
    assert "could not be read (OperationalError)" in caplog.text
    drain_metrics()
    assert traffic_rows() == {("edge", "acme-us"): (3, 0, 0, 0)}


def test_figures_past_what_an_event_carries_are_split_and_add_up_exactly():
    """The wire allows a hundred times an event's bound (a worker whose reports failed for
    hours reports all it carried meanwhile): several events that add up to it, none lost."""
    big = limits.MAX_COUNTER
    assert big > MAX_NUMBER
    sent, dropped = sent_events(), dropped_events()  # this process's counts since it began
    record_traffic("edge", [T("acme-us", 3, big, MAX_NUMBER, 0)])
    flush_events()
    assert sent_events() - sent == -(-big // MAX_NUMBER) == 100
    assert dropped_events() == dropped
    drain_metrics()
    assert traffic_rows() == {("edge", "acme-us"): (3, big, MAX_NUMBER, 0)}
    assert totals("gateway_bytes")[("gateway_bytes", "edge|acme-us|up")] == big


def test_each_client_has_its_rows_with_every_figure_and_other_is_kept():
    record_traffic("edge", [
        ClientTraffic("shop", "acme-us", 1, 2, 30, 400, 1, 2, 3, 4),
        ClientTraffic("crawler", "acme-us", tunnels=7, failed_closed=1),
        ClientTraffic(limits.OTHER, "acme-us", requests=5),
        ClientTraffic(limits.OTHER, limits.OTHER, requests=6),
    ])  # fmt: skip
    drain_metrics()
    columns = ("requests", "tunnels", "bytes_up", "bytes_down", "failed_connect",
               "failed_timeout", "failed_upstream", "failed_closed", "errors")  # fmt: skip
    rows = {
        (r["worker_group"], r["client"], r["upstream"]): tuple(r[c] for c in columns)
        for r in GatewayTraffic.objects.values("worker_group", "client", "upstream", *columns)
    }
    assert rows == {
        ("edge", "shop", "acme-us"): (1, 2, 30, 400, 1, 2, 3, 4, 10),
        ("edge", "crawler", "acme-us"): (0, 7, 0, 0, 0, 0, 0, 1, 1),
        ("edge", "(other)", "acme-us"): (5, 0, 0, 0, 0, 0, 0, 0, 0),
        ("edge", "(other)", "(other)"): (6, 0, 0, 0, 0, 0, 0, 0, 0),
    }
    # /metrics' totals: per group and upstream (no client), failures by kind.
    assert totals("gateway_") == {
        ("gateway_requests", "edge|acme-us"): 6,
        ("gateway_requests", "edge|(other)"): 6,
        ("gateway_tunnels", "edge|acme-us"): 9,
        ("gateway_bytes", "edge|acme-us|up"): 30,
        ("gateway_bytes", "edge|acme-us|down"): 400,
        ("gateway_failures", "edge|acme-us|connect"): 1,
        ("gateway_failures", "edge|acme-us|timeout"): 2,
        ("gateway_failures", "edge|acme-us|upstream"): 3,
        ("gateway_failures", "edge|acme-us|closed"): 5,
    }


def test_refused_snapshots_are_counted_per_group():
    record_traffic("edge", [], refused_snapshots=2)
    record_traffic("edge", [T("acme-us", 1)], refused_snapshots=1)
    record_traffic("core", [], refused_snapshots=0)  # nothing to count: no event
    drain_metrics()
    refused = {r.worker_group: r.snapshots_refused for r in GatewayActivity.objects.all()}
    assert refused == {"edge": 3}
    assert totals("gateway_snapshots") == {("gateway_snapshots_refused", "edge"): 3}


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
