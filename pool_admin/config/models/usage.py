"""Outcome quality aggregates per upstream and minute (written by the usage stream's consumer)."""

from __future__ import annotations

from django.db import models

from activity.types import LABEL_MAX_LENGTH, Outcome


class UpstreamQuality(models.Model):
    """Outcome reports of extracted proxies per upstream and minute (aggregate metrics).

    Written only by the usage stream's consumer (pool_admin/metrics/aggregates.py). The upstream is
    kept by name, the pool's upstream ID, so the figures outlive a renamed or deleted upstream
    and a stream consumer can write them without a lookup. No proxy, client or host is kept.
    """

    upstream = models.CharField(max_length=LABEL_MAX_LENGTH)
    minute = models.DateTimeField(help_text="Start of the minute (UTC) the reports fell in.")
    ok = models.PositiveIntegerField(default=0)
    banned = models.PositiveIntegerField(default=0)
    timeout = models.PositiveIntegerField(default=0)
    auth_failed = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-minute", "upstream"]
        verbose_name = "upstream quality"
        verbose_name_plural = "upstream quality"
        constraints = [
            models.UniqueConstraint(fields=["upstream", "minute"], name="quality_once_per_minute")
        ]
        # The admin's "last hour" reads and the list's default order go by minute.
        indexes = [models.Index(fields=["minute"], name="quality_minute")]

    def __str__(self) -> str:
        return f"{self.upstream} {self.minute:%Y-%m-%d %H:%M}"

    @property
    def reports(self) -> int:
        return sum(getattr(self, outcome.value) for outcome in Outcome)  # a column each
