"""Usage aggregates: per minute (hourly once rolled up) and dimension, written only by the usage
stream's consumer (pool_admin/metrics/aggregates.py), which adds to them exactly once.

Labels are kept by name (the pool's upstream ID, the client's ID), so the figures outlive a
renamed or deleted upstream and the consumer writes them without a lookup. No proxy, exit or
target host is kept, and no secret. Every value is a count or a sum (of milliseconds): rows of
one period written by two consumers at once add up, and rolling minutes up into hours is a sum.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from activity.types import LABEL_MAX_LENGTH, Outcome


class UsageRow(models.Model):
    """One period of one dimension's figures."""

    period_start = models.DateTimeField(
        help_text="Start (UTC) of the minute, or of the hour for a rolled-up row, the figures "
        "fell in."
    )
    hourly = models.BooleanField(default=False, help_text="A rolled-up hour of minute rows.")

    class Meta:
        abstract = True

    @property
    def period(self) -> str:
        return f"{self.period_start:%Y-%m-%d %H:%M}{' (hour)' if self.hourly else ''}"


def _one_row_per_period(stem: str, *dimensions: str) -> tuple[list[Any], list[Any]]:
    """A table's Meta constraints and indexes: one row per dimensions and period (the
    consumer's upserts conflict on it), and the index the time-ordered reads and the roll-up
    go by."""
    fields = [*dimensions, "period_start", "hourly"]
    return (
        [models.UniqueConstraint(fields=fields, name=f"{stem}_once_per_period")],
        [models.Index(fields=["period_start"], name=f"{stem}_period")],
    )


def _count(help_text: str = "") -> Any:
    return models.PositiveBigIntegerField(default=0, help_text=help_text)


class UpstreamQuality(UsageRow):
    """An upstream's figures in one period: what its clients reported, what it delivered, what
    became of it (used, or expired unused: paid for and wasted), and its checks' latency."""

    upstream = models.CharField(max_length=LABEL_MAX_LENGTH)
    # Outcome reports of extracted proxies (one column per activity.types.Outcome).
    ok = _count()
    banned = _count()
    timeout = _count()
    auth_failed = _count()
    fetches = _count("Provider responses written to the pool (fetches that asked the vendor).")
    received = _count("Entries the provider's responses listed.")
    fetched = _count("New proxies the pool took in (new lifecycles).")
    refreshed = _count("Known proxies a response listed again (their expiry refreshed).")
    became_available = _count(
        "Proxies whose intake check (or trusted provider) made them available."
    )
    checked = _count("Checks run (intake and rechecks).")
    check_latency_ms = _count("Sum of the measured check latencies, ms.")
    checks_timed = _count("Checks with a measured latency.")
    extracted = _count("Proxies handed to API clients.")
    first_use_ms = _count("Sum over the extracted proxies of the time from fetch to extract, ms.")
    expired_used = _count("Records removed at expiry after they were extracted or assigned.")
    expired_unused = _count("Records removed at expiry never used: paid for and wasted.")

    class Meta:
        ordering = ["-period_start", "upstream"]
        verbose_name = "upstream quality"
        verbose_name_plural = "upstream quality"
        constraints, indexes = _one_row_per_period("quality", "upstream")

    def __str__(self) -> str:
        return f"{self.upstream} {self.period}"

    @property
    def reports(self) -> int:
        return sum(getattr(self, outcome.value) for outcome in Outcome)  # a column each


class UpstreamDrops(UsageRow):
    """Entries of an upstream's responses not taken into the pool, by reason (the parser's,
    and the pool's: over capacity, conflict, quarantined, rejected, duplicate)."""

    upstream = models.CharField(max_length=LABEL_MAX_LENGTH)
    reason = models.CharField(max_length=40)
    entries = _count()

    class Meta:
        ordering = ["-period_start", "upstream", "reason"]
        verbose_name_plural = "upstream drops"
        constraints, indexes = _one_row_per_period("drops", "upstream", "reason")

    def __str__(self) -> str:
        return f"{self.upstream} {self.reason} {self.period}"


class UpstreamChecks(UsageRow):
    """Checks of an upstream's proxies by source (intake, recheck) and the state they gave."""

    upstream = models.CharField(max_length=LABEL_MAX_LENGTH)
    source = models.CharField(max_length=16)
    result = models.CharField(max_length=16)
    proxies = _count()

    class Meta:
        ordering = ["-period_start", "upstream", "source", "result"]
        verbose_name_plural = "upstream checks"
        constraints, indexes = _one_row_per_period("checks", "upstream", "source", "result")

    def __str__(self) -> str:
        return f"{self.upstream} {self.source} {self.result} {self.period}"


class ClientUsage(UsageRow):
    """A client's extract calls by outcome (ok, or the refusal's problem code)."""

    client = models.CharField(max_length=LABEL_MAX_LENGTH)
    outcome = models.CharField(max_length=40)
    calls = _count()
    returned = _count("Proxies the calls returned.")
    duration_ms = _count("Sum of the calls' durations in the pool, ms.")

    class Meta:
        ordering = ["-period_start", "client", "outcome"]
        verbose_name_plural = "client usage"
        constraints, indexes = _one_row_per_period("client_usage", "client", "outcome")

    def __str__(self) -> str:
        return f"{self.client} {self.outcome} {self.period}"


class ClientDraws(UsageRow):
    """The proxies a client drew, by upstream and region ("" for none)."""

    client = models.CharField(max_length=LABEL_MAX_LENGTH)
    upstream = models.CharField(max_length=LABEL_MAX_LENGTH)
    region = models.CharField(max_length=LABEL_MAX_LENGTH, blank=True)
    proxies = _count()

    class Meta:
        ordering = ["-period_start", "client", "upstream", "region"]
        verbose_name_plural = "client draws"
        constraints, indexes = _one_row_per_period("client_draws", "client", "upstream", "region")

    def __str__(self) -> str:
        return f"{self.client} {self.upstream} {self.region or '-'} {self.period}"


class GatewayTicks(UsageRow):
    """The ownership manager's ticks in one period (one row per period: a tick is the whole
    deployment's)."""

    ticks = _count("Ticks that ran (one holder at a time, every 2 s).")
    duration_ms = _count("Sum of the ticks' durations, ms.")
    cut_short = _count("Ticks a bound or a lost lease stopped short (the next finishes).")
    expired = _count("Lapsed leases the ticks expired (every group's).")

    class Meta:
        ordering = ["-period_start"]
        verbose_name_plural = "gateway ticks"
        constraints, indexes = _one_row_per_period("gateway_ticks")

    def __str__(self) -> str:
        return f"ticks {self.period}"


class GatewayActivity(UsageRow):
    """What the ownership manager's ticks did for a worker group."""

    # Not "group": the raw statements (aggregates, retention) name the columns unquoted.
    worker_group = models.CharField(max_length=LABEL_MAX_LENGTH)
    assigned = _count("Proxies assigned to the group's workers.")
    renewed = _count("Leases renewed.")
    drains_begun = _count("Drains begun (near the end, out of health, over the share...).")
    released = _count("Drained proxies released (the worker reported them idle).")
    refused = _count("Candidates another client or worker took between the read and the assign.")
    snapshots_refused = _count(
        "Snapshots the group's workers refused (a worker's draining registry was full: it kept "
        "serving its older snapshot), as their reports said."
    )

    class Meta:
        ordering = ["-period_start", "worker_group"]
        verbose_name_plural = "gateway activity"
        constraints, indexes = _one_row_per_period("gateway_activity", "worker_group")

    def __str__(self) -> str:
        return f"{self.worker_group} {self.period}"


class GatewayTraffic(UsageRow):
    """What a worker group's workers carried for a client through an upstream's proxies, as
    they reported it. ``(other)`` for a client or upstream: pairs past a worker's table bound
    (gateway_runtime/traffic.py); an empty client: rows from before clients were counted."""

    worker_group = models.CharField(max_length=LABEL_MAX_LENGTH)
    client = models.CharField(max_length=LABEL_MAX_LENGTH, blank=True)
    upstream = models.CharField(max_length=LABEL_MAX_LENGTH)
    requests = _count("Plain HTTP requests forwarded.")
    tunnels = _count("Tunnels (CONNECT, SOCKS5) opened.")
    bytes_up = _count("Bytes sent to the proxies.")
    bytes_down = _count("Bytes received from the proxies.")
    failed_connect = _count("Failures to reach the upstream's proxy, or its refusal of our login.")
    failed_timeout = _count("Connect or first-byte timeouts.")
    failed_upstream = _count("Errors the proxy answered for the target (e.g. its 502 to CONNECT).")
    failed_closed = _count("Connections broken mid-transfer.")
    errors = _count(
        "Failures of every kind (the four above summed; rows from before the kinds were kept "
        "have only this)."
    )

    class Meta:
        ordering = ["-period_start", "worker_group", "client", "upstream"]
        verbose_name_plural = "gateway traffic"
        constraints, indexes = _one_row_per_period(
            "gateway_traffic", "worker_group", "client", "upstream"
        )

    def __str__(self) -> str:
        return f"{self.worker_group} {self.client or '-'} {self.upstream} {self.period}"


class UsageTotal(models.Model):
    """A counter since the deployment began (GET /metrics' ``_total`` families): never rolled
    up or pruned, so it only grows. ``labels`` is the family's label values joined by ``|``."""

    family = models.CharField(max_length=64)
    labels = models.CharField(max_length=200, blank=True)
    value = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["family", "labels"], name="usage_total_once")
        ]

    def __str__(self) -> str:
        return f"{self.family}{{{self.labels}}} {self.value}"
