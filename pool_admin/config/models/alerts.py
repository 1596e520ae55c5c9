"""Failure alerts: one open alert per upstream and kind (a partial unique index), opened after
``threshold`` consecutive failures, closed by the first success (pool_admin/alerts.py)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from pool_admin.config.models.upstreams import Upstream


class Alert(models.Model):
    class Kind(models.TextChoices):
        FETCH_FAILING = "fetch_failing", "Fetches fail"
        VENDOR_REFUSES = (
            "vendor_refuses",
            "The vendor refuses the account (balance, order, whitelist)",
        )
        CHECKS_FAILING = "checks_failing", "Most fetched proxies fail their check"
        LOW_INVENTORY = "low_inventory", "Inventory stays under the low-water mark"
        NOTHING_TAKEN = "nothing_taken", "Fetches are answered, but the pool takes nothing"

    upstream = models.ForeignKey(Upstream, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=20, choices=Kind)
    #: Consecutive failures so far (the alert opens at its kind's threshold).
    failures = models.PositiveIntegerField(default=0)
    first_failed_at = models.DateTimeField()
    last_failed_at = models.DateTimeField()
    #: Set when the failures reached the threshold: the alert is open (and was notified).
    opened_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    #: The last failure's typed error (never a URL, header or secret: activity.providers).
    detail = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-last_failed_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["upstream", "kind"],
                condition=Q(closed_at__isnull=True),
                name="one_unclosed_alert_per_upstream_and_kind",
            )
        ]

    def __str__(self) -> str:
        state = "closed" if self.closed_at else "open" if self.opened_at else "pending"
        return f"{self.upstream.name}: {self.get_kind_display()} ({state})"
