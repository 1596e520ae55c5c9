"""Worker groups: gateway capacity to keep assigned, and from which upstreams."""

from __future__ import annotations

from django.db import models
from simple_history.models import HistoricalRecords

from pool_admin.config.models.base import ConfigModel, bounds, label_field
from pool_admin.config.models.upstreams import Upstream


class WorkerGroup(ConfigModel):
    """A group of gateway workers: how much capacity to give it, and from which upstreams."""

    name = label_field(unique=True)
    target_capacity = models.PositiveIntegerField(
        default=100,
        validators=bounds(0, 1_000_000),
        help_text="Concurrent connections to keep assigned to the group; 0 drains it.",
    )
    allowed_upstreams = models.ManyToManyField(
        Upstream, blank=True, related_name="worker_groups", help_text="None selected: all."
    )

    history = HistoricalRecords(m2m_fields=["allowed_upstreams"])

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
