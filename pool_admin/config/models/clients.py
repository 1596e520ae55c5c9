"""API clients (callers of the extract API, with their limits) and their API keys."""

from __future__ import annotations

import hmac

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from simple_history.models import HistoricalRecords

from activity.labels import MAX_LABEL, is_kept_label, label_key
from activity.types import LABEL_MAX_LENGTH, PROTOCOLS, QUOTA_MAX_UNITS
from gateway_runtime.wire import limits as wire_limits
from gateway_runtime.wire import make_verifier, new_salt
from pool_admin.config.models.base import (
    LABEL_HELP,
    POOL_LIMITS,
    ConfigModel,
    bounds,
    label_field,
    seconds,
)
from pool_admin.config.models.bearer import (
    HISTORY_EXCLUDED,
    BearerSecret,
    BearerSecretManager,
    secret_hash,
)
from pool_admin.config.models.upstreams import Upstream

#: Bounds of a client's limits (``create_client`` checks the same): the calls a quota may count,
#: and the pool's largest extract.
REQUESTS_PER_SECOND = (1, 100_000)
PROXIES_PER_MINUTE = (1, QUOTA_MAX_UNITS)
COUNT_PER_REQUEST = (1, POOL_LIMITS.max_extract_count)


class ApiClient(ConfigModel):
    """A caller of the extract API, with its limits and what it may draw from."""

    name = label_field(unique=True, help_text=f"The pool's client ID. {LABEL_HELP}")
    enabled = models.BooleanField(default=True)
    requests_per_second = models.PositiveIntegerField(
        default=50, validators=bounds(*REQUESTS_PER_SECOND)
    )
    proxies_per_minute = models.PositiveIntegerField(
        default=1_000, validators=bounds(*PROXIES_PER_MINUTE)
    )
    max_count_per_request = models.PositiveIntegerField(
        "largest count per request",
        default=100,
        validators=bounds(*COUNT_PER_REQUEST),
    )
    allowed_upstreams = models.ManyToManyField(
        Upstream, blank=True, related_name="api_clients", help_text="None selected: all."
    )
    allowed_regions = ArrayField(
        models.CharField(max_length=LABEL_MAX_LENGTH),
        default=list,
        blank=True,
        help_text="Comma-separated region labels; empty: all.",
    )
    allowed_protocols = ArrayField(
        models.CharField(max_length=8), default=list, blank=True, help_text="None: all."
    )
    gateway_reserve = models.PositiveIntegerField(
        default=0,
        validators=bounds(0, POOL_LIMITS.max_gateway_reserve),
        help_text="Matching proxies each extract leaves for the gateway.",
    )
    idempotency_ttl_s = models.PositiveIntegerField(
        "idempotency TTL (s)",
        default=seconds(POOL_LIMITS.idempotency_ttl),
        # A replay never outlives the proxies it returns (capped by their hard expiry).
        validators=bounds(1, seconds(POOL_LIMITS.max_proxy_ttl)),
    )
    may_view_inventory = models.BooleanField(
        "may see inventory",
        default=False,
        help_text="May call GET /api/v1/inventory (live counts of the upstreams it may draw "
        "from). Off: that call is a 403.",
    )

    gateway_enabled = models.BooleanField(
        "may use the gateway",
        default=False,
        help_text="Gateway workers accept this client's API keys (with the same upstreams, "
        "regions and protocols as for extracts) and route its traffic through their proxies.",
    )
    gateway_max_connections = models.PositiveIntegerField(
        "gateway connections",
        default=100,
        validators=bounds(1, wire_limits.MAX_CLIENT_CONNECTIONS),
        help_text="Connections the client may hold open through one gateway worker at once.",
    )
    gateway_requests_per_second = models.PositiveIntegerField(
        "gateway requests per second",
        default=100,
        validators=bounds(1, wire_limits.MAX_CLIENT_RPS),
        help_text="Requests per second the client may start through one gateway worker.",
    )

    history = HistoricalRecords(m2m_fields=["allowed_upstreams"])

    class Meta:
        ordering = ["name"]
        verbose_name = "API client"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        regions = _string_list(self.allowed_regions)
        if regions is None:
            errors["allowed_regions"] = "Enter a list of region labels."
        else:
            bad = [r for r in regions if not is_kept_label(r)]
            if bad:
                errors["allowed_regions"] = (
                    f"Not a region label: {bad[0]!r}. 1-{MAX_LABEL} printable characters, as "
                    "vendors label their proxies; matched in any case."
                )
            else:
                self.allowed_regions = _distinct(regions)
        protocols = _string_list(self.allowed_protocols)
        if protocols is None:
            errors["allowed_protocols"] = "Enter a list of protocols."
        else:
            unknown = [p for p in protocols if p not in PROTOCOLS]
            if unknown:
                errors["allowed_protocols"] = (
                    f"Unknown protocol {unknown[0]!r}: use {', '.join(sorted(PROTOCOLS))}."
                )
            self.allowed_protocols = list(dict.fromkeys(protocols))
        if errors:
            raise ValidationError(errors)


def _string_list(value: object) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def _distinct(regions: list[str]) -> list[str]:
    """Without repeats (in any case: ``US`` and ``us`` are one region), in their order."""
    seen: set[str] = set()
    kept = []
    for region in regions:
        if label_key(region) not in seen:
            seen.add(label_key(region))
            kept.append(region)
    return kept


class ApiKeyManager(BearerSecretManager["ApiKey"]):
    def issue(self, client: ApiClient, name: str = "") -> tuple[ApiKey, str]:
        """Create a key for ``client``; return it and its plaintext, which is never stored."""
        return self._issue(client=client, name=name)

    def adopt(self, client: ApiClient, plaintext: str, name: str = "") -> ApiKey:
        """A key with a plaintext chosen outside (``DEMO_API_KEY``, for scripted checks): in
        the project's format with at least 32 random characters; the same key given again for
        the same client is the key it already is. ValueError when it cannot be this client's."""
        prefix = ApiKey.adoptable_prefix(plaintext)
        existing = self.get_queryset().filter(prefix=prefix).first()
        if existing is not None:
            if existing.client_id != client.pk or not hmac.compare_digest(
                existing.key_hash, secret_hash(plaintext)
            ):
                raise ValueError("another key has this key's prefix")
            return existing
        key = self.model(
            client=client,
            name=name,
            prefix=prefix,
            key_hash=secret_hash(plaintext),
            **ApiKey.derived_from(plaintext),
        )
        key.save()
        return key

    def verify(self, plaintext: str) -> ApiKey | None:
        """The usable key ``plaintext`` belongs to (not revoked, client enabled), else None."""
        return self._verify(plaintext, Q(client__enabled=True), "client")


class ApiKey(BearerSecret):
    """One API key of a client (pool_admin/config/models/bearer.py: hashed, revocable)."""

    SCHEME = "pp"
    KIND = "API key"

    client = models.ForeignKey(ApiClient, on_delete=models.CASCADE, related_name="keys")
    #: The key's salted verifier for gateway workers (gateway_runtime/wire/verifier.py), made
    #: while the plaintext exists; empty for a key issued before the gateway: rotate it.
    gateway_verifier = models.CharField(max_length=200, blank=True, editable=False)

    objects = ApiKeyManager()
    # The verifier stays out of history too: it is made from the key.
    history = HistoricalRecords(excluded_fields=[*HISTORY_EXCLUDED, "gateway_verifier"])

    @classmethod
    def derived_from(cls, plaintext: str) -> dict[str, str]:
        return {"gateway_verifier": make_verifier(plaintext, new_salt())}

    class Meta:
        ordering = ["client__name", "-created_at"]
        verbose_name = "API key"
