"""Upstreams: what the pool fetches proxies from, each under its provider account."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from activity.labels import BadLabel, LabelMap
from activity.providers.fetch import MAX_TOTAL_TIMEOUT
from activity.providers.generic import json_reader, text_reader
from activity.providers.presets import PRESETS, Format, UpstreamOptions
from pool_admin.config.models.accounts import ProviderAccount
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

#: The vendor presets an upstream can read its answers with (activity/providers/presets.py).
PRESET_CHOICES = [(name, preset.title) for name, preset in PRESETS.items()]

# Query parameters whose names look like credentials belong in a Credential, not in plain JSON
# (which history, the admin and logs show). Matched on word parts: "api_key", "accessToken".
_SECRET_WORDS = {"key", "token", "secret", "password", "passwd", "pwd", "auth", "sig", "signature"}
_SECRET_ENDINGS = ("key", "token", "secret", "password")


def _looks_secret(name: str) -> bool:
    parts = re.split(r"[^a-z0-9]+", name.lower())
    return any(part in _SECRET_WORDS or part.endswith(_SECRET_ENDINGS) for part in parts)


class Upstream(ConfigModel):
    """A vendor's order or product: where to fetch its proxies, how often, how to read the
    answer, and how to check them; its account holds the credential and the limits."""

    class Kind(models.TextChoices):
        PRESET = "preset", "A vendor's shape (preset)"
        JSON_LIST = "json_list", "JSON list of proxies"
        TEXT_LINES = "text_lines", "Text, one proxy per line"
        STATIC_LIST = "static_list", "A fixed list an operator pasted (no vendor API)"

    name = label_field(unique=True, help_text=f"The pool's upstream ID. {LABEL_HELP}")
    enabled = models.BooleanField(default=True)
    account = models.ForeignKey(
        ProviderAccount,
        on_delete=models.PROTECT,  # an account's upstreams go first: their proxies come from it
        related_name="upstreams",
        help_text="The vendor account its fetches are made with and counted against.",
    )
    kind = models.CharField(max_length=20, choices=Kind, default=Kind.JSON_LIST)
    preset = models.CharField(
        max_length=40,
        blank=True,
        choices=PRESET_CHOICES,
        help_text="For the preset kind: which vendor's answer this is (docs/OPERATIONS.md).",
    )
    static_list = models.ForeignKey(
        Credential,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="static_upstreams",
        help_text="For the static-list kind: the credential whose secret is the list, one proxy "
        "per line in the reader's line shape (stored encrypted: it holds the proxies' logins).",
    )
    reader = models.JSONField(
        default=dict,
        blank=True,
        help_text='For the generic kinds: how the answer reads. JSON list: {"list_path": "data", '
        '"fields": {"host": "ip", "port": "port", "expiry": "expire_time"}, "expiry": '
        '"unix_seconds", "success_path": "code", "success_value": "0"}; text lines: {"line": '
        '"host:port:user:pass", "expiry": "none"} (docs/OPERATIONS.md).',
    )
    expiry_zone = models.CharField(
        max_length=64,
        blank=True,
        help_text="IANA time zone of the vendor's times without an offset, e.g. Asia/Shanghai "
        "(blank: the preset's).",
    )
    endpoint_url = models.URLField(
        max_length=2000,
        blank=True,
        help_text="http(s) URL of the provider's API (not for a static list).",
    )
    count_param = models.CharField(
        max_length=64,
        blank=True,
        help_text="The request parameter that says how many proxies to hand out (Kuaidaili, "
        "Zhima: num; Webshare: page_size); blank: the vendor's own number.",
    )
    credential_param = models.CharField(
        max_length=64,
        blank=True,
        help_text="The request parameter the account's credential goes in (e.g. appkey); "
        "blank: not in the query.",
    )
    credential_header = models.CharField(
        max_length=64,
        blank=True,
        help_text="The request header the account's credential goes in, as stored (e.g. "
        "Authorization, with the secret 'Token abc'); blank: no header.",
    )
    allow_local_hosts = models.BooleanField(
        default=False,
        help_text="Take proxies on loopback and private addresses (127.0.0.0/8, ::1, "
        "localhost, 10/8, 172.16/12, 192.168/16, fc00::/7: a local test or the demo provider); "
        "never the unspecified, link-local (cloud metadata), multicast or reserved ones, "
        "listed or where a listed name leads (a check sends nothing there). "
        "Vendors' proxies are public, so off.",
    )
    request_params = models.JSONField(
        default=dict,
        blank=True,
        help_text="JSON object of extra query parameters. Secrets go in the credential.",
    )
    default_protocol = models.CharField(max_length=8, choices=PROTOCOL_CHOICES, default="http")
    default_region = label_field(
        blank=True, help_text="The region of a proxy the vendor gives none."
    )
    default_carrier = label_field(
        blank=True, help_text="The carrier of a proxy the vendor gives none."
    )
    label_map = models.JSONField(
        default=dict,
        blank=True,
        help_text='The vendor\'s labels as yours, matched in any case, e.g. {"region": '
        '{"广东省广州市": "cn-gd"}, "carrier": {"电信": "telecom"}}; a label not named is kept '
        "as the vendor wrote it. At most 1,000 per dimension.",
    )
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
    fetch_interval_s = models.PositiveIntegerField(
        "fetch interval (s)",
        default=30,
        validators=bounds(1, 86_400),
        help_text="How often it is fetched when nothing asks for a fetch sooner.",
    )
    fetch_timeout_s = models.PositiveIntegerField(
        "vendor call deadline (s)",
        default=20,
        validators=bounds(1, int(MAX_TOTAL_TIMEOUT)),
        help_text="A call to the vendor's API is cut off this long after it was sent, whatever "
        "the vendor does (hangs, trickles); it then counts as a failed fetch. Only this "
        "upstream's fetch waits meanwhile.",
    )
    low_water_mark = models.PositiveIntegerField(
        default=0,
        validators=bounds(0, 1_000_000),
        help_text="On-demand refill: with fewer unextracted proxies than this, the next "
        "dispatch (every 2 s) asks for a fetch ahead of the interval (0: off).",
    )
    refill_cooldown_s = models.PositiveIntegerField(
        "refill cooldown (s)",
        default=10,
        validators=bounds(0, 3_600),
        help_text="Refill requests this soon after the last one are merged into it.",
    )
    trust_provider = models.BooleanField(
        default=False,
        help_text="Its proxies are handed out without a health check first.",
    )
    check_url = models.URLField(
        max_length=2000,
        default="https://www.gstatic.com/generate_204",
        help_text="Each proxy is checked through itself against this URL (2xx passes).",
    )
    check_timeout_ms = models.PositiveIntegerField(
        "check timeout (ms)",
        default=5_000,
        validators=bounds(100, 60_000),
        help_text="One check's whole time: connect, handshake, answer.",
    )
    check_interval_s = models.PositiveIntegerField(
        "check interval (s)",
        default=30,
        validators=bounds(1, 86_400),
        help_text="An idle proxy is checked again this long after its last check at the "
        "soonest, and later while it has long to live (what it has left divided by the "
        "setting RECHECK_LIFETIME_FRACTION, 10 by default); not at all with less than "
        "RECHECK_MIN_REMAINING_S seconds left (120 by default).",
    )
    gateway_share_percent = models.PositiveSmallIntegerField(
        "gateway share (%)",
        default=50,
        validators=bounds(0, 100),
        help_text="How much of the upstream's usable proxies gateway workers may hold; the rest "
        "stays for API clients' extracts. 0: none, 100: all it can take.",
    )

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
        deadline = self.fetch_timeout_s
        if _ints(deadline, ttl) and deadline * 2 > ttl:
            errors["fetch_timeout_s"] = (
                "Must be at most half the default proxy TTL: a call that takes longer spends "
                "that much of its proxies' life."
            )
        timeout, interval = self.check_timeout_ms, self.check_interval_s
        if _ints(timeout, interval) and timeout > interval * 1000:
            errors["check_timeout_ms"] = "Must not exceed the check interval."
        if _ints(self.low_water_mark, self.max_size) and self.low_water_mark > self.max_size:
            errors["low_water_mark"] = "Must not exceed the most unextracted proxies (max size)."
        try:
            self.labels()
        except BadLabel as exc:
            errors["label_map"] = f"{str(exc)[:1].upper()}{str(exc)[1:]}."
        errors.update(self._format_problems())
        errors.update(self._request_problems())
        if errors:
            raise ValidationError(errors)

    def _format_problems(self) -> dict[str, str]:
        """What stops the upstream's answer from being read: a preset without the preset
        kind or the other way round, an unknown zone, options its preset cannot take."""
        if self.kind == self.Kind.PRESET and not self.preset:
            return {"preset": "Choose the vendor's preset."}
        if self.kind != self.Kind.PRESET and self.preset:
            return {"preset": "A preset is for the preset kind only: clear it or change the kind."}
        if self.expiry_zone:
            try:
                ZoneInfo(self.expiry_zone)
            except (ZoneInfoNotFoundError, ValueError):
                return {"expiry_zone": "Enter an IANA time zone, e.g. Asia/Shanghai or UTC."}
        if self.kind == self.Kind.PRESET and self.reader:
            return {"reader": "A preset reads its answers itself: leave this empty."}
        if self.kind != self.Kind.STATIC_LIST and not self.endpoint_url:
            return {"endpoint_url": "Enter the provider API's URL."}
        if self.kind == self.Kind.STATIC_LIST and not self.static_list_id:
            return {"static_list": "Choose the credential that holds the list."}
        if self.kind != self.Kind.STATIC_LIST and self.static_list_id:
            return {"static_list": "A list is for the static-list kind only."}
        # A generic upstream without a reader yet is kept, and not fetched until it has one.
        configured = self.kind in (self.Kind.PRESET, self.Kind.STATIC_LIST) or bool(self.reader)
        if configured and _ints(self.default_ttl_s, self.max_size):
            try:
                self.answer_format()
            except ValueError as exc:
                field = "preset" if self.kind == self.Kind.PRESET else "reader"
                return {field: f"This cannot read an answer: {exc}"}
        return {}

    def labels(self) -> LabelMap:
        """How this upstream's vendor labels become the pool's; BadLabel when its map is off."""
        return LabelMap.of(
            self.label_map, self.default_region or None, self.default_carrier or None
        )

    def answer_format(self) -> Format:
        """How this upstream's answers are read (its preset, or its generic reader);
        ValueError when its settings cannot make one."""
        options = UpstreamOptions(
            protocol=self.default_protocol,
            default_lifetime=self.default_ttl,
            max_entries=self.max_size,
            zone=self.expiry_zone or None,
            allow_local_hosts=self.allow_local_hosts,
        )
        if self.kind == self.Kind.PRESET:
            if self.preset not in PRESETS:
                raise ValueError("no such preset")
            return PRESETS[self.preset].format(options)
        settings = self.reader if isinstance(self.reader, dict) else {}
        if self.kind == self.Kind.JSON_LIST:
            return json_reader(settings, options)
        return text_reader(settings, options)

    def _request_problems(self) -> dict[str, str]:
        errors: dict[str, str] = {}
        for field in ("count_param", "credential_param"):
            value = getattr(self, field)
            if value and not re.fullmatch(r"[A-Za-z0-9_.\[\]-]{1,64}", value):
                errors[field] = "Letters, digits and _ . - [ ] only."
        if self.credential_header and not re.fullmatch(
            r"[A-Za-z0-9-]{1,64}", self.credential_header
        ):
            errors["credential_header"] = "A header name: letters, digits and - only."
        sends = self.credential_param or self.credential_header
        account = self.account if self.account_id else None
        if sends and account is not None and account.credential_id is None:
            errors["credential_param" if self.credential_param else "credential_header"] = (
                "Its account has no credential to send."
            )
        return errors


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
