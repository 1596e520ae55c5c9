"""The usage aggregates in the admin: read-only lists, written by the usage stream's consumer
only (pool_admin/metrics/). Imported by pool_admin/config/admin.py, which registers it."""

from __future__ import annotations

from django.contrib import admin

from gateway_runtime.wire import TRAFFIC_COUNTS
from pool_admin.config.models import (
    ClientDraws,
    ClientUsage,
    GatewayActivity,
    GatewayTicks,
    GatewayTraffic,
    UpstreamChecks,
    UpstreamDrops,
    UpstreamQuality,
)
from pool_admin.readonly_admin import ReadOnlyAdmin


class UsageAdmin(ReadOnlyAdmin):
    """Usage aggregates: read-only, written by the usage stream's consumer only."""

    date_hierarchy = "period_start"


@admin.register(UpstreamQuality)
class UpstreamQualityAdmin(UsageAdmin):
    """An upstream's figures per minute (per hour once rolled up)."""

    list_display = (
        "period_start",
        "hourly",
        "upstream",
        "reports",
        "ok",
        "banned",
        "timeout",
        "auth_failed",
        "fetched",
        "became_available",
        "extracted",
        "expired_unused",
        "expired_used",
    )
    list_filter = ("upstream", "hourly", ("period_start", admin.DateFieldListFilter))
    search_fields = ("upstream",)


@admin.register(UpstreamDrops)
class UpstreamDropsAdmin(UsageAdmin):
    list_display = ("period_start", "hourly", "upstream", "reason", "entries")
    list_filter = ("upstream", "reason", "hourly")
    search_fields = ("upstream",)


@admin.register(UpstreamChecks)
class UpstreamChecksAdmin(UsageAdmin):
    list_display = ("period_start", "hourly", "upstream", "source", "result", "proxies")
    list_filter = ("upstream", "source", "result", "hourly")
    search_fields = ("upstream",)


@admin.register(ClientUsage)
class ClientUsageAdmin(UsageAdmin):
    list_display = (
        "period_start",
        "hourly",
        "client",
        "outcome",
        "calls",
        "returned",
        "duration_ms",
    )
    list_filter = ("outcome", "hourly")
    search_fields = ("client",)


@admin.register(ClientDraws)
class ClientDrawsAdmin(UsageAdmin):
    list_display = ("period_start", "hourly", "client", "upstream", "region", "proxies")
    list_filter = ("upstream", "region", "hourly")
    search_fields = ("client", "upstream")


@admin.register(GatewayTicks)
class GatewayTicksAdmin(UsageAdmin):
    list_display = ("period_start", "hourly", "ticks", "duration_ms", "cut_short", "expired")
    list_filter = ("hourly",)


@admin.register(GatewayActivity)
class GatewayActivityAdmin(UsageAdmin):
    list_display = (
        "period_start",
        "hourly",
        "worker_group",
        "assigned",
        "renewed",
        "drains_begun",
        "released",
        "refused",
        "snapshots_refused",
    )
    list_filter = ("worker_group", "hourly")
    search_fields = ("worker_group",)


@admin.register(GatewayTraffic)
class GatewayTrafficAdmin(UsageAdmin):
    list_display = (
        "period_start",
        "hourly",
        "worker_group",
        "client",
        "upstream",
        *TRAFFIC_COUNTS,
    )
    list_filter = ("worker_group", "upstream", "hourly")
    search_fields = ("worker_group", "client", "upstream")
