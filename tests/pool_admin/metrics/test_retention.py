"""Retention of the usage aggregates (pool_admin/metrics/retention.py): old minutes roll up
into hours with nothing lost or counted twice, in bounded batches; rows past retention go;
the totals are counters and stay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Sum

from activity import Outcome
from pool_admin.config.models import (
    ClientDraws,
    GatewayActivity,
    GatewayTicks,
    GatewayTraffic,
    UpstreamDrops,
    UpstreamQuality,
    UsageTotal,
)
from pool_admin.metrics import retention
from pool_admin.metrics.aggregates import TABLES, apply_events
from pool_admin.metrics.events import Event
from pool_admin.metrics.retention import keep_bounded, minute_of

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

NOW = datetime(2026, 6, 1, 12, 30, tzinfo=UTC)
ROLL_UP = timedelta(hours=48)
KEEP = timedelta(days=90)


def test_every_outcome_has_its_column():
    """The aggregates name columns after outcomes: a new outcome needs a column (migration)."""
    columns = {f.name for f in UpstreamQuality._meta.get_fields()}
    assert {o.value for o in Outcome} <= columns


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _events(at: datetime, n: int) -> list[Event]:
    ms = _ms(at)
    return [
        *[Event("outcome", ms, {"upstream": "u1", "outcome": "ok"}) for _ in range(n)],
        Event("fetch", ms, {"upstream": "u1", "received": 5, "inserted": 4, "refreshed": 1,
                            "available": 3, "dropped": {"bad_port": 1}}),
        Event("extract", ms, {"client": "c1", "outcome": "ok", "returned": 2,
                              "duration_ms": 3, "draws": [["u1", "us", 2, 40]]}),
    ]  # fmt: skip


def _figures() -> dict[str, int]:
    q = UpstreamQuality.objects.aggregate(ok=Sum("ok"), fetched=Sum("fetched"),
                                          extracted=Sum("extracted"))  # fmt: skip
    q["dropped"] = UpstreamDrops.objects.aggregate(n=Sum("entries"))["n"]
    q["drawn"] = ClientDraws.objects.aggregate(n=Sum("proxies"))["n"]
    return q


def _totals() -> dict[tuple[str, str], int]:
    return {(f, labels): v for f, labels, v in UsageTotal.objects.values_list(
        "family", "labels", "value")}  # fmt: skip


def test_old_minutes_roll_up_into_their_hours_and_nothing_is_lost():
    old_hour = NOW.replace(minute=0) - timedelta(days=3)
    for minute in (0, 1, 59):
        apply_events(_events(old_hour + timedelta(minutes=minute), n=2))
    apply_events(_events(old_hour + timedelta(hours=1, minutes=5), n=1))
    apply_events(_events(NOW - timedelta(hours=1), n=7))  # recent: stays per minute
    before = _figures()
    totals = _totals()

    result = keep_bounded(ROLL_UP, KEEP, NOW)
    # 4 old minutes, each a row in 4 tables (quality, drops, client usage, client draws)
    assert (result.rolled_up, result.deleted, result.more) == (4 * 4, 0, False)
    assert _figures() == before
    assert _totals() == totals  # counters: a roll-up changes none
    hours = UpstreamQuality.objects.filter(hourly=True).order_by("period_start")
    assert [(r.period_start, r.ok, r.fetched) for r in hours] == [
        (old_hour, 6, 12),
        (old_hour + timedelta(hours=1), 1, 4),
    ]
    assert UpstreamQuality.objects.filter(hourly=False).count() == 1
    for table in TABLES:  # every table rolled up, none left behind
        assert not table.model.objects.filter(hourly=False, period_start__lt=NOW - ROLL_UP)
    # A late event in a rolled-up hour makes a minute row; the next run adds it to the hour.
    apply_events(_events(old_hour + timedelta(minutes=30), n=3))
    keep_bounded(ROLL_UP, KEEP, NOW)
    assert UpstreamQuality.objects.get(hourly=True, period_start=old_hour).ok == 9
    assert _totals()[("outcomes", "u1|ok")] == totals[("outcomes", "u1|ok")] + 3 == 17


def test_roll_up_and_prune_go_in_bounded_batches(monkeypatch):
    monkeypatch.setattr(retention, "BATCH", 2)
    for days in (100, 99, 95, 89, 3):
        at = minute_of(NOW - timedelta(days=days))
        UpstreamQuality.objects.create(upstream="acme-us", period_start=at, ok=1)
    first = keep_bounded(ROLL_UP, KEEP, NOW)
    assert (first.rolled_up, first.more) == (2, True)
    runs = [first]
    while runs[-1].more:
        runs.append(keep_bounded(ROLL_UP, KEEP, NOW))
        assert len(runs) < 10
    kept = sorted((NOW - r.period_start).days for r in UpstreamQuality.objects.all())
    assert kept == [3, 89]  # rolled up into their hours; those past 90 days deleted
    assert all(r.hourly for r in UpstreamQuality.objects.all())
    assert sum(r.deleted for r in runs) == 3


def test_a_run_goes_on_while_more_remain_within_its_budget(monkeypatch):
    """The task's run repeats the bounded batches until none remain (a backlog shrinks);
    with no time left it stops after the round it is in and says more remain."""
    monkeypatch.setattr(retention, "BATCH", 3)
    for minutes in range(10):
        at = minute_of(datetime.now(UTC) - timedelta(days=3, minutes=minutes))
        UpstreamQuality.objects.create(upstream="acme-us", period_start=at, ok=1)
    stopped = retention.keep_bounded_within(ROLL_UP, KEEP, budget_s=0)
    assert (stopped.rolled_up, stopped.more) == (0, True)
    done = retention.keep_bounded_within(ROLL_UP, KEEP)
    assert (done.rolled_up, done.more) == (10, False)
    assert sum(r.ok for r in UpstreamQuality.objects.filter(hourly=True)) == 10
    assert not UpstreamQuality.objects.filter(hourly=False).exists()


def _gateway_events(at: datetime) -> list[Event]:
    ms = _ms(at)
    return [
        Event("gateway_tick", ms, {"duration_ms": 40, "expired": 1, "cut_short": False}),
        Event("gateway_ownership", ms, {"group": "edge", "assigned": 2, "renewed": 3,
                                        "drains_begun": 0, "released": 1, "refused": 0}),
        Event("gateway_traffic", ms, {"group": "edge", "client": "shop", "upstream": "u1",
                                      "requests": 5, "tunnels": 2, "bytes_up": 100,
                                      "bytes_down": 900, "failed_connect": 0,
                                      "failed_timeout": 1, "failed_upstream": 0,
                                      "failed_closed": 0}),
    ]  # fmt: skip


def test_the_gateways_minutes_roll_up_too_the_ticks_table_without_a_dimension():
    old_hour = NOW.replace(minute=0) - timedelta(days=3)
    for minute in (0, 7, 59):
        apply_events(_gateway_events(old_hour + timedelta(minutes=minute)))
    apply_events(_gateway_events(NOW - timedelta(minutes=5)))  # recent: stays per minute
    totals = _totals()

    result = keep_bounded(ROLL_UP, KEEP, NOW)
    assert (result.rolled_up, result.more) == (3 * 3, False)  # 3 old minutes, 3 tables
    assert _totals() == totals
    ticks = GatewayTicks.objects.filter(hourly=True).get()
    assert (ticks.period_start, ticks.ticks, ticks.duration_ms, ticks.expired) == (
        old_hour, 3, 120, 3,
    )  # fmt: skip
    activity = GatewayActivity.objects.get(hourly=True)
    assert (activity.worker_group, activity.assigned, activity.renewed) == ("edge", 6, 9)
    traffic = GatewayTraffic.objects.get(hourly=True)
    assert (traffic.client, traffic.requests, traffic.tunnels, traffic.bytes_up,
            traffic.bytes_down, traffic.failed_timeout, traffic.errors) == (
        "shop", 15, 6, 300, 2_700, 3, 3,
    )  # fmt: skip
    for model in (GatewayTicks, GatewayActivity, GatewayTraffic):
        assert model.objects.filter(hourly=False).count() == 1  # the recent minute

    # Past retention, they go like the others.
    assert keep_bounded(ROLL_UP, timedelta(days=1), NOW).deleted == 3
    for model in (GatewayTicks, GatewayActivity, GatewayTraffic):
        assert not model.objects.filter(hourly=True).exists()
