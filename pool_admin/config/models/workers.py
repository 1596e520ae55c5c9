"""Gateway workers: their groups (capacity to keep assigned, from which upstreams), the
workers themselves and the tokens they authenticate with."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from simple_history.models import HistoricalRecords

from pool_admin.config.models.base import LABEL_HELP, ConfigModel, bounds, label_field
from pool_admin.config.models.bearer import HISTORY_EXCLUDED, BearerSecret, BearerSecretManager
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


class GatewayWorker(ConfigModel):
    """One gateway worker process (or host): the identity its token authenticates as."""

    name = label_field(
        unique=True,
        help_text=f"The worker's ID in the pool: its sessions, assignments and reports are "
        f"kept under it, so it is fixed once created. {LABEL_HELP}",
    )
    group = models.ForeignKey(WorkerGroup, on_delete=models.PROTECT, related_name="workers")
    enabled = models.BooleanField(
        default=True, help_text="Off: its tokens stop working (within 30 s)."
    )

    history = HistoricalRecords()

    class Meta:
        ordering = ["name"]
        verbose_name = "gateway worker"

    def __str__(self) -> str:
        return self.name


class WorkerTokenManager(BearerSecretManager["WorkerToken"]):
    def issue(self, worker: GatewayWorker, name: str = "") -> tuple[WorkerToken, str]:
        """Create a token for ``worker``; return it and its plaintext, which is never stored."""
        return self._issue(worker=worker, name=name)

    def verify(self, plaintext: str) -> WorkerToken | None:
        """The usable token ``plaintext`` is (not revoked, worker enabled), with its worker and
        group loaded; else None."""
        return self._verify(plaintext, Q(worker__enabled=True), "worker__group")


class WorkerToken(BearerSecret):
    """A gateway worker's bearer token, ``pw_<12 hex>_<43 random>``: the ``pw`` scheme keeps it
    apart from API keys (``pp``), so neither ever authenticates as the other."""

    SCHEME = "pw"
    KIND = "worker token"

    worker = models.ForeignKey(GatewayWorker, on_delete=models.CASCADE, related_name="tokens")

    objects = WorkerTokenManager()
    history = HistoricalRecords(excluded_fields=HISTORY_EXCLUDED)

    class Meta:
        ordering = ["worker__name", "-created_at"]
        verbose_name = "worker token"
