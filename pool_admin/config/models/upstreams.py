"""Upstreams: the provider accounts the pool fetches proxies from."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from pool_admin.config.models.base import (
    LABEL_HELP,
    POOL_LIMITS,
    PROTOCOL_CHOICES,
    ConfigModel,
    bounds,
    label_field,
    seconds,
)
from pool_admin.config.models.credentials import Credential

# Query parameters whose names look like credentials belong in a Credential, not in plain JSON
# (which history, the admin and logs show). Matched on word parts: "api_key", "accessToken".
_SECRET_WORDS = {"key", "token", "secret", "password", "passwd", "pwd", "auth", "sig", "signature"}
_SECRET_ENDINGS = ("key", "token", "secret", "password")


def _looks_secret(name: str) -> bool:
    parts = re.split(r"[^a-z0-9]+", name.lower())
    return any(part in _SECRET_WORDS or part.endswith(_SECRET_ENDINGS) for part in parts)


class Upstream(ConfigModel):
    """A provider account: where to fetch proxies, with what budget, and how to check them."""

    class Kind(models.TextChoices):
        JSON_LIST = "json_list", "JSON list of proxies"
        TEXT_LINES = "text_lines", "Text, one proxy per line"

    name = label_field(unique=True, help_text=f"The pool's upstream ID. {LABEL_HELP}")
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
    default_region = label_field(blank=True)
    default_carrier = label_field(blank=True)
    default_ttl_s = models.PositiveIntegerField(
        "default proxy TTL (s)",
        default=300,
        validators=bounds(1, seconds(POOL_LIMITS.max_proxy_ttl)),  # longer: the pool drops it
        help_text="Used when the provider gives no expiry.",
    )
    safety_margin_s = models.PositiveIntegerField(
        "safety margin (s)",
        default=5,
        validators=bounds(0, 3_600),
        help_text="A proxy is not handed out this close to its expiry.",
    )
    max_size = models.PositiveIntegerField(
        default=1_000, validators=bounds(1, 1_000_000), help_text="Most unextracted proxies."
    )
    fetch_calls_per_minute = models.PositiveIntegerField(default=60, validators=bounds(1, 6_000))
    fetch_proxies_per_minute = models.PositiveIntegerField(
        default=1_000, validators=bounds(1, 1_000_000)
    )
    check_url = models.URLField(max_length=2000, default="https://www.gstatic.com/generate_204")
    check_timeout_ms = models.PositiveIntegerField(default=5_000, validators=bounds(100, 60_000))
    check_interval_s = models.PositiveIntegerField(default=30, validators=bounds(1, 86_400))

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
