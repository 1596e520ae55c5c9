"""Provider accounts: one vendor account, its API credential and limits, its upstreams under it.

Several upstreams (a vendor's orders or products) often share one account and so one API rate
limit (Kuaidaili and Juliang: 10 calls/s per account). The fetch scheduler
(``activity.scheduler``) holds the account's limits over all of its upstreams at once: never
more than ``fetch_concurrency`` fetches at once, never more vendor API calls than allowed in
any second or minute, never one upstream twice at once.
"""

from __future__ import annotations

from django.db import models
from simple_history.models import HistoricalRecords

from activity.scheduler import AccountLimits
from activity.scheduler.types import MAX_CALLS_PER_MINUTE, MAX_CALLS_PER_SECOND, MAX_CONCURRENCY
from pool_admin.config.models.base import LABEL_HELP, ConfigModel, bounds, label_field
from pool_admin.config.models.credentials import Credential


class ProviderAccount(ConfigModel):
    """A vendor account: the credential its API calls use and the limits they share."""

    name = label_field(unique=True, help_text=f"The scheduler's account ID. {LABEL_HELP}")
    enabled = models.BooleanField(
        default=True, help_text="Off: none of its upstreams is fetched (they stay configured)."
    )
    credential = models.ForeignKey(
        Credential,
        null=True,
        blank=True,
        on_delete=models.PROTECT,  # deleting a credential an account uses would stop its fetches
        related_name="accounts",
        help_text="The API key or secret its fetches send, if the vendor wants one.",
    )
    api_calls_per_second = models.PositiveIntegerField(
        "API calls per second",
        null=True,
        blank=True,
        validators=bounds(1, MAX_CALLS_PER_SECOND),
        help_text="The vendor's limit per account, if it has one (Kuaidaili, Juliang: 10).",
    )
    api_calls_per_minute = models.PositiveIntegerField(
        "API calls per minute", default=60, validators=bounds(1, MAX_CALLS_PER_MINUTE)
    )
    proxies_per_minute = models.PositiveIntegerField(
        default=1_000,
        validators=bounds(1, 1_000_000),
        help_text="Most proxies its upstreams together take in a minute (the order's budget).",
    )
    fetch_concurrency = models.PositiveIntegerField(
        default=1,
        validators=bounds(1, MAX_CONCURRENCY),
        help_text="Fetches of its upstreams at once.",
    )

    history = HistoricalRecords()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def limits(self) -> AccountLimits:
        """The scheduler's view of this account's limits."""
        return AccountLimits(
            concurrency=self.fetch_concurrency,
            calls_per_second=self.api_calls_per_second,
            calls_per_minute=self.api_calls_per_minute,
            proxies_per_minute=self.proxies_per_minute,
        )
