"""Configuration models, and the outcome quality aggregates (``UpstreamQuality``). PostgreSQL
never holds a proxy or its record.

Every model validates in ``save()`` (``full_clean``), so the admin, management commands and the
API to come cannot store a value the pool would reject later. History (who changed what) is kept
by django-simple-history; secret material is excluded from it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

from activity.types import PROTOCOLS, Outcome
from pool_admin.config import secrets as secret_box

# Same rule as activity's label tokens (activity/_validation.py): names and labels become
# upstream IDs, client IDs and index key names in Redis, so anything else would be refused there.
LABEL_RE = r"\A[A-Za-z0-9][A-Za-z0-9._:@+-]{0,63}\Z"
LABEL_HELP = "1-64 characters of A-Z a-z 0-9 . _ : @ + -, starting with a letter or digit."
validate_label = RegexValidator(
    LABEL_RE, message=f"Enter a valid label: {LABEL_HELP}", code="invalid_label"
)

PROTOCOL_CHOICES = [(p, p) for p in sorted(PROTOCOLS)]  # one source of truth: activity.types

# Query parameters whose names look like credentials belong in a Credential, not in plain JSON
# (which history, the admin and logs show). Matched on word parts: "api_key", "accessToken".
_SECRET_WORDS = {"key", "token", "secret", "password", "passwd", "pwd", "auth", "sig", "signature"}
_SECRET_ENDINGS = ("key", "token", "secret", "password")


def _bounds(low: int, high: int) -> list[Any]:
    return [MinValueValidator(low), MaxValueValidator(high)]


def _looks_secret(name: str) -> bool:
    parts = re.split(r"[^a-z0-9]+", name.lower())
    return any(part in _SECRET_WORDS or part.endswith(_SECRET_ENDINGS) for part in parts)


class ConfigModel(models.Model):
    """Timestamps, and validation on every save."""

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.full_clean()
        super().save(*args, **kwargs)


class Credential(ConfigModel):
    """A provider API credential, encrypted at rest; see ``pool_admin.config.secrets``."""

    class Purpose(models.TextChoices):
        PROVIDER_API = "provider_api", "Provider API credential"
        PROXY_AUTH = "proxy_auth", "Account-wide proxy authentication"
        OTHER = "other", "Other"

    name = models.CharField(max_length=64, unique=True, validators=[validate_label])
    purpose = models.CharField(max_length=20, choices=Purpose, default=Purpose.PROVIDER_API)
    username = models.CharField(
        max_length=256,
        blank=True,
        help_text="Account or user name, if the provider uses one. Not secret: shown as is.",
    )
    # Fernet token; BinaryField is not editable, so no form ever renders it.
    ciphertext = models.BinaryField(default=b"")
    version = models.PositiveIntegerField(
        default=0, editable=False, help_text="Raised each time the secret is replaced."
    )
    key_id = models.CharField(
        max_length=12, blank=True, editable=False, help_text="Fingerprint of the encrypting key."
    )
    secret_set_at = models.DateTimeField(null=True, blank=True, editable=False)

    # The ciphertext stays out of history: old ciphertexts there would outlive key rotation.
    history = HistoricalRecords(excluded_fields=["ciphertext"])

    MAX_SECRET = 8192

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def set_secret(self, plaintext: str) -> None:
        """Encrypt ``plaintext`` as this credential's new version (saved by the caller)."""
        if not plaintext:
            raise ValidationError({"secret": "The secret must not be empty."})
        if len(plaintext) > self.MAX_SECRET:
            raise ValidationError({"secret": f"At most {self.MAX_SECRET} characters."})
        self.ciphertext = secret_box.encrypt(plaintext)
        self.key_id = secret_box.key_id()
        self.version = (self.version or 0) + 1
        self.secret_set_at = timezone.now()

    def reveal(self) -> str:
        """The plaintext secret. For the pool's resolver only: never render or log it."""
        return secret_box.decrypt(self.ciphertext)

    @property
    def secret_status(self) -> str:
        if not self.secret_set_at:
            return "not set"
        return f"set on {self.secret_set_at:%Y-%m-%d %H:%M} UTC"

    def clean(self) -> None:
        if not self.ciphertext:
            raise ValidationError({"secret": "Enter the secret."})


class Upstream(ConfigModel):
    """A provider account: where to fetch proxies, with what budget, and how to check them."""

    class Kind(models.TextChoices):
        JSON_LIST = "json_list", "JSON list of proxies"
        TEXT_LINES = "text_lines", "Text, one proxy per line"

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[validate_label],
        help_text=f"The pool's upstream ID. {LABEL_HELP}",
    )
    enabled = models.BooleanField(default=True)
    kind = models.CharField(max_length=20, choices=Kind, default=Kind.JSON_LIST)
    endpoint_url = models.URLField(max_length=2000, help_text="http(s) URL of the provider's API.")
    request_params = models.JSONField(
        default=dict,
        blank=True,
        help_text="JSON object of extra query parameters. Secrets go in the credential.",
    )
    credential = models.ForeignKey(
        Credential,
        null=True,
        blank=True,
        on_delete=models.PROTECT,  # deleting a credential an upstream uses would stop its fetch
        related_name="upstreams",
    )
    default_protocol = models.CharField(max_length=8, choices=PROTOCOL_CHOICES, default="http")
    default_region = models.CharField(max_length=64, blank=True, validators=[validate_label])
    default_carrier = models.CharField(max_length=64, blank=True, validators=[validate_label])
    default_ttl_s = models.PositiveIntegerField(
        "default proxy TTL (s)",
        default=300,
        validators=_bounds(1, 86_400),  # the pool refuses TTLs over a day (max_proxy_ttl)
        help_text="Used when the provider gives no expiry.",
    )
    safety_margin_s = models.PositiveIntegerField(
        "safety margin (s)",
        default=5,
        validators=_bounds(0, 3_600),
        help_text="A proxy is not handed out this close to its expiry.",
    )
    max_size = models.PositiveIntegerField(
        default=1_000, validators=_bounds(1, 1_000_000), help_text="Most unextracted proxies."
    )
    fetch_calls_per_minute = models.PositiveIntegerField(default=60, validators=_bounds(1, 6_000))
    fetch_proxies_per_minute = models.PositiveIntegerField(
        default=1_000, validators=_bounds(1, 1_000_000)
    )
    check_url = models.URLField(max_length=2000, default="https://www.gstatic.com/generate_204")
    check_timeout_ms = models.PositiveIntegerField(default=5_000, validators=_bounds(100, 60_000))
    check_interval_s = models.PositiveIntegerField(default=30, validators=_bounds(1, 86_400))

    history = HistoricalRecords()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def default_ttl(self) -> timedelta:
        return timedelta(seconds=self.default_ttl_s)

    @property
    def safety_margin(self) -> timedelta:
        return timedelta(seconds=self.safety_margin_s)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for field in ("endpoint_url", "check_url"):
            message = _url_problem(getattr(self, field) or "")
            if message:
                errors[field] = message
        params = self.request_params
        if not isinstance(params, dict):
            errors["request_params"] = 'Enter a JSON object, e.g. {"country": "us"}.'
        else:
            for key, value in params.items():
                if _looks_secret(key):
                    errors["request_params"] = (
                        f"Parameter {key!r} looks like a secret: store it in the credential."
                    )
                    break
                scalars = (str, int, float, bool)
                if not isinstance(value, scalars) and not (
                    isinstance(value, list) and all(isinstance(v, scalars) for v in value)
                ):
                    errors["request_params"] = (
                        f"Parameter {key!r} must be a string, number, boolean or list of those."
                    )
                    break
        # clean() runs even when a field failed, so compare only values that are numbers.
        ttl, margin = self.default_ttl_s, self.safety_margin_s
        if _ints(ttl, margin) and margin >= ttl:
            errors["safety_margin_s"] = "Must be shorter than the default proxy TTL."
        timeout, interval = self.check_timeout_ms, self.check_interval_s
        if _ints(timeout, interval) and timeout > interval * 1000:
            errors["check_timeout_ms"] = "Must not exceed the check interval."
        if errors:
            raise ValidationError(errors)


def _ints(*values: object) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _url_problem(url: str) -> str | None:
    if not url:
        return None  # the field's own "required" error says it
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"}:
        return "Use an http:// or https:// URL."
    if parts.username or parts.password:
        return "Do not put a user name or password in the URL: store it in the credential."
    for name, _value in parse_qsl(parts.query, keep_blank_values=True):
        if _looks_secret(name):
            return f"Query parameter {name!r} looks like a secret: store it in the credential."
    return None


class ApiClient(ConfigModel):
    """A caller of the extract API, with its limits and what it may draw from."""

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[validate_label],
        help_text=f"The pool's client ID. {LABEL_HELP}",
    )
    enabled = models.BooleanField(default=True)
    requests_per_second = models.PositiveIntegerField(default=50, validators=_bounds(1, 100_000))
    proxies_per_minute = models.PositiveIntegerField(
        default=1_000, validators=_bounds(1, 10_000_000)
    )
    max_count_per_request = models.PositiveIntegerField(
        "largest count per request",
        default=100,
        validators=_bounds(1, 1_000),  # the pool's max_extract_count
    )
    allowed_upstreams = models.ManyToManyField(
        Upstream, blank=True, related_name="api_clients", help_text="None selected: all."
    )
    allowed_regions = ArrayField(
        models.CharField(max_length=64),
        default=list,
        blank=True,
        help_text="Comma-separated region labels; empty: all.",
    )
    allowed_protocols = ArrayField(
        models.CharField(max_length=8), default=list, blank=True, help_text="None: all."
    )
    gateway_reserve = models.PositiveIntegerField(
        default=0,
        validators=_bounds(0, 10_000),  # the pool's max_gateway_reserve
        help_text="Matching proxies each extract leaves for the gateway.",
    )
    idempotency_ttl_s = models.PositiveIntegerField(
        "idempotency TTL (s)", default=600, validators=_bounds(1, 86_400)
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
            bad = [r for r in regions if not _is_label(r)]
            if bad:
                errors["allowed_regions"] = f"Not a valid region label: {bad[0]!r}. {LABEL_HELP}"
            self.allowed_regions = list(dict.fromkeys(regions))  # drop repeats, keep order
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


def _is_label(value: str) -> bool:
    try:
        validate_label(value)
    except ValidationError:
        return False
    return True


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


class WorkerGroup(ConfigModel):
    """A group of gateway workers: how much capacity to give it, and from which upstreams."""

    name = models.CharField(max_length=64, unique=True, validators=[validate_label])
    target_capacity = models.PositiveIntegerField(
        default=100,
        validators=_bounds(0, 1_000_000),
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


class UpstreamQuality(models.Model):
    """Outcome reports of extracted proxies per upstream and minute (aggregate metrics).

    Written only through :func:`pool_admin.config.quality.record_outcomes`. The upstream is
    kept by name, the pool's upstream ID, so the figures outlive a renamed or deleted upstream
    and a stream consumer can write them without a lookup. No proxy, client or host is kept.
    """

    upstream = models.CharField(max_length=64)
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
