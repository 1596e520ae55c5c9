"""API clients (callers of the extract API, with their limits) and their API keys."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

from activity.labels import MAX_LABEL, is_kept_label, label_key
from activity.types import LABEL_MAX_LENGTH, PROTOCOLS, QUOTA_MAX_UNITS
from pool_admin.config.models.base import (
    LABEL_HELP,
    POOL_LIMITS,
    ConfigModel,
    bounds,
    label_field,
    seconds,
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


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiKeyManager(models.Manager["ApiKey"]):
    def get_queryset(self) -> ApiKeyQuerySet:
        return ApiKeyQuerySet(self.model, using=self._db)

    def active(self) -> ApiKeyQuerySet:
        return self.get_queryset().active()

    def issue(self, client: ApiClient, name: str = "") -> tuple[ApiKey, str]:
        """Create a key for ``client``; return it and its plaintext, which is never stored."""
        for _attempt in range(5):
            prefix = secrets.token_hex(ApiKey.PREFIX_BYTES)
            plaintext = f"{ApiKey.SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
            key = self.model(client=client, name=name, prefix=prefix, key_hash=_hash(plaintext))
            try:
                with transaction.atomic():
                    key.save()
            except ValidationError as exc:
                if "prefix" not in exc.error_dict:  # anything but a (rare) prefix collision
                    raise
                continue
            except IntegrityError:  # a concurrent issue took the same prefix
                continue
            return key, plaintext
        raise RuntimeError("could not find a free API key prefix")

    def adopt(self, client: ApiClient, plaintext: str, name: str = "") -> ApiKey:
        """A key with a plaintext chosen outside (``DEMO_API_KEY``, for scripted checks): in
        the project's format with at least 32 random characters; the same key given again for
        the same client is the key it already is. ValueError when it cannot be this client's."""
        prefix = ApiKey.adoptable_prefix(plaintext)
        existing = self.get_queryset().filter(prefix=prefix).first()
        if existing is not None:
            if existing.client_id != client.pk or not hmac.compare_digest(
                existing.key_hash, _hash(plaintext)
            ):
                raise ValueError("another key has this key's prefix")
            return existing
        key = self.model(client=client, name=name, prefix=prefix, key_hash=_hash(plaintext))
        key.save()
        return key

    def verify(self, plaintext: str) -> ApiKey | None:
        """The usable key ``plaintext`` belongs to (not revoked, client enabled), else None."""
        prefix = ApiKey.prefix_of(plaintext)
        if prefix is None:
            return None
        key = (
            self.get_queryset()
            .active()
            .filter(prefix=prefix, client__enabled=True)
            .select_related("client")
            .first()
        )
        if key is None or not hmac.compare_digest(key.key_hash, _hash(plaintext)):
            return None
        return key


def _hash(plaintext: str) -> str:
    # SHA-256, not a password hasher (PBKDF2/argon2): the key is 256 random bits, so stretching
    # adds nothing against brute force, while it would cost ~100 ms of CPU on every API request
    # and cap the extract API far below its throughput target.
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


class ApiKey(models.Model):
    """One API key of a client. Only a hash is stored; the prefix identifies it in lists."""

    SCHEME = "pp"
    PREFIX_BYTES = 6  # 12 hex characters: collisions are rare, and retried in issue()
    TOUCH_EVERY = timedelta(minutes=1)

    client = models.ForeignKey(ApiClient, on_delete=models.CASCADE, related_name="keys")
    name = models.CharField(max_length=100, blank=True, help_text="Optional note, e.g. 'prod'.")
    prefix = models.CharField(max_length=2 * PREFIX_BYTES, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    history = HistoricalRecords(excluded_fields=["key_hash", "last_used_at"])
    objects = ApiKeyManager()

    class Meta:
        ordering = ["client__name", "-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.SCHEME}_{self.prefix}…"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.full_clean()
        super().save(*args, **kwargs)

    @classmethod
    def prefix_of(cls, plaintext: str) -> str | None:
        scheme, sep, rest = plaintext.partition("_")
        prefix, sep2, secret = rest.partition("_")
        size = 2 * cls.PREFIX_BYTES
        if scheme != cls.SCHEME or not sep or not sep2 or len(prefix) != size or not secret:
            return None
        return prefix

    @classmethod
    def adoptable_prefix(cls, plaintext: str) -> str:
        """The prefix of a key chosen outside, in the project's format with at least 32 random
        characters; ValueError otherwise."""
        prefix = cls.prefix_of(plaintext)
        secret = plaintext.split("_", 2)[-1]  # what follows the prefix (it may hold "_")
        if prefix is None or not re.fullmatch(r"[0-9a-f]+", prefix) or len(secret) < 32:
            raise ValueError(
                f"not an API key of this project (pp_<{2 * cls.PREFIX_BYTES} hex>_<32 or more "
                "random characters>)"
            )
        return prefix

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    def touch(self) -> None:
        """Record use, at most once a minute per key (one UPDATE, skipped when recent)."""
        now = timezone.now()
        stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - self.TOUCH_EVERY)
        if ApiKey.objects.filter(Q(pk=self.pk) & stale).update(last_used_at=now):
            self.last_used_at = now
