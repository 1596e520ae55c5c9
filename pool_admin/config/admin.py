"""Admin for the configuration models: lists, filters, search, history; secrets write-only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin
from django.db import models
from django.db.models import (
    Count,
    F,
    IntegerField,
    OuterRef,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters
from simple_history.admin import SimpleHistoryAdmin

from activity.types import Outcome
from pool_admin.config.models import (
    PROTOCOL_CHOICES,
    Alert,
    ApiClient,
    ApiKey,
    Credential,
    ProviderAccount,
    Upstream,
    UpstreamQuality,
)
from pool_admin.config.secret_admin import (
    IssuingAdmin,
    IssuingForm,
    ReadOnlyHistoryAdmin,
    SecretAdmin,
    SecretInline,
    SecretStatusFilter,
    active_secrets,
)

TIMESTAMPS = ("created_at", "updated_at")


class CredentialForm(forms.ModelForm):
    secret = forms.CharField(
        required=False,
        strip=False,
        max_length=Credential.MAX_SECRET,
        # render_value=False: not even a form error sends the secret back to the browser.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: it is never shown again. Leave empty to keep the current one.",
    )

    class Meta:
        model = Credential
        fields = ["name", "purpose", "username"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        secret = cleaned.get("secret")
        if secret:
            # Encrypted before the model's own validation, which requires a ciphertext.
            self.instance.set_secret(secret)
        return cleaned


@admin.register(Credential)
class CredentialAdmin(ReadOnlyHistoryAdmin):
    form = CredentialForm
    list_display = ("name", "purpose", "username", "secret_set", "version", "key_id", "updated_at")
    list_filter = ("purpose", "key_id")
    search_fields = ("name", "username")
    fields = (
        "name",
        "purpose",
        "username",
        "secret",
        "secret_set",
        "version",
        "key_id",
        *TIMESTAMPS,
    )
    readonly_fields = ("secret_set", "version", "key_id", *TIMESTAMPS)

    @method_decorator(sensitive_post_parameters("secret"))
    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # Like Django's UserAdmin for passwords: error reports never include the posted secret.
        return super().changeform_view(request, *args, **kwargs)

    @admin.display(description="Secret", ordering="secret_set_at")
    def secret_set(self, obj: Credential) -> str:
        return obj.secret_status


class AccountUpstreams(admin.TabularInline):
    """An account's upstreams on its page, read-only: each is edited on its own page."""

    model = Upstream
    fields = ("name", "enabled", "kind", "preset", "max_size", "fetch_interval_s")
    readonly_fields = fields
    show_change_link = True
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ProviderAccount)
class ProviderAccountAdmin(SimpleHistoryAdmin):
    list_display = (
        "name",
        "enabled",
        "credential",
        "api_calls_per_second",
        "api_calls_per_minute",
        "proxies_per_minute",
        "fetch_concurrency",
        "upstream_count",
        "updated_at",
    )
    list_filter = ("enabled", "credential")
    search_fields = ("name",)
    readonly_fields = TIMESTAMPS
    inlines = (AccountUpstreams,)
    fieldsets = (
        (None, {"fields": ("name", "enabled", "credential")}),
        (
            "Limits (over all of its upstreams)",
            {
                "fields": (
                    "api_calls_per_second",
                    "api_calls_per_minute",
                    "proxies_per_minute",
                    "fetch_concurrency",
                )
            },
        ),
        ("Timestamps", {"fields": TIMESTAMPS}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[ProviderAccount]:
        accounts: QuerySet[ProviderAccount] = super().get_queryset(request)
        return accounts.annotate(upstreams_n=Count("upstreams"))

    @admin.display(description="Upstreams", ordering="upstreams_n")
    def upstream_count(self, obj: ProviderAccount) -> int:
        return obj.upstreams_n  # type: ignore[attr-defined,no-any-return]


@admin.register(Upstream)
class UpstreamAdmin(SimpleHistoryAdmin):
    list_display = (
        "name",
        "enabled",
        "kind",
        "default_protocol",
        "default_region",
        "max_size",
        "account",
        "reports_1h",
        "ok_1h",
        "banned_1h",
        "fetched_1h",
        "waste_1h",
        "updated_at",
    )
    list_filter = ("enabled", "account", "kind", "preset", "default_protocol", "default_region")
    list_select_related = ("account",)
    autocomplete_fields = ("account",)
    search_fields = ("name", "endpoint_url", "default_region", "default_carrier")
    readonly_fields = TIMESTAMPS
    # A URL typed without a scheme means https (Django 6's default; silences its warning).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    fieldsets = (
        (None, {"fields": ("name", "enabled", "account")}),
        (
            "Provider endpoint",
            {
                "fields": (
                    "kind",
                    "preset",
                    "reader",
                    "static_list",
                    "expiry_zone",
                    "endpoint_url",
                    "request_params",
                    "count_param",
                    "credential_param",
                    "credential_header",
                    "allow_local_hosts",
                )
            },
        ),
        (
            "Proxy defaults",
            {
                "fields": (
                    "default_protocol",
                    "default_region",
                    "default_carrier",
                    "label_map",
                    "default_ttl_s",
                    "safety_margin_s",
                    "max_size",
                )
            },
        ),
        (
            "Fetching",
            {
                "fields": (
                    "fetch_interval_s",
                    "fetch_timeout_s",
                    "low_water_mark",
                    "refill_cooldown_s",
                )
            },
        ),
        (
            "Health check",
            {"fields": ("trust_provider", "check_url", "check_timeout_ms", "check_interval_s")},
        ),
        ("Gateway", {"fields": ("gateway_share_percent",)}),
        ("Timestamps", {"fields": TIMESTAMPS}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Upstream]:
        """Each upstream with its last hour's outcome reports, in the page's one query."""
        return with_last_hour_quality(super().get_queryset(request))

    @admin.display(description="Reports (1 h)", ordering="reports_last_hour")
    def reports_1h(self, obj: Upstream) -> int:
        return obj.reports_last_hour  # type: ignore[attr-defined,no-any-return]

    @admin.display(description="OK (1 h)", ordering="ok_last_hour")
    def ok_1h(self, obj: Upstream) -> str:
        reports: int = obj.reports_last_hour  # type: ignore[attr-defined]
        if not reports:
            return "-"
        return f"{100 * obj.ok_last_hour / reports:.0f}%"  # type: ignore[attr-defined]

    @admin.display(description="Banned (1 h)", ordering="banned_last_hour")
    def banned_1h(self, obj: Upstream) -> int:
        return obj.banned_last_hour  # type: ignore[attr-defined,no-any-return]

    @admin.display(description="Fetched (1 h)", ordering="fetched_last_hour")
    def fetched_1h(self, obj: Upstream) -> int:
        return obj.fetched_last_hour  # type: ignore[attr-defined,no-any-return]

    @admin.display(description="Wasted (1 h)", ordering="expired_unused_last_hour")
    def waste_1h(self, obj: Upstream) -> str:
        """Of the proxies that reached their expiry in the last hour, the share never used."""
        unused: int = obj.expired_unused_last_hour  # type: ignore[attr-defined]
        ended = unused + obj.expired_used_last_hour  # type: ignore[attr-defined]
        if not ended:
            return "-"
        return f"{100 * unused / ended:.0f}% of {ended}"


def with_last_hour_quality(upstreams: QuerySet[Upstream]) -> QuerySet[Upstream]:
    """Annotate ``reports_last_hour``, ``ok_last_hour``, ``banned_last_hour``,
    ``fetched_last_hour``, ``expired_used_last_hour`` and ``expired_unused_last_hour`` (0 if
    none).

    Correlated subqueries on the quality rows of the last 60 minutes, joined by upstream name:
    one SQL query for a whole page, whatever its length.
    """
    since = timezone.now() - timedelta(hours=1)
    rows = (
        UpstreamQuality.objects.filter(upstream=OuterRef("name"), period_start__gte=since)
        .order_by()
        .values("upstream")
    )

    def total(expression: Any) -> Coalesce:
        summed = Subquery(rows.annotate(n=Sum(expression)).values("n")[:1])
        return Coalesce(summed, 0, output_field=IntegerField())

    return upstreams.annotate(
        reports_last_hour=total(sum((F(o.value) for o in Outcome), Value(0))),
        ok_last_hour=total("ok"),
        banned_last_hour=total("banned"),
        fetched_last_hour=total("fetched"),
        expired_used_last_hour=total("expired_used"),
        expired_unused_last_hour=total("expired_unused"),
    )


class ApiKeyInline(SecretInline):
    model = ApiKey


class ApiClientForm(IssuingForm):
    kind = ApiKey.KIND
    allowed_protocols = forms.TypedMultipleChoiceField(
        choices=PROTOCOL_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None checked: all.",
    )

    class Meta:
        model = ApiClient
        fields = "__all__"


@admin.register(ApiClient)
class ApiClientAdmin(IssuingAdmin):
    form = ApiClientForm
    inlines = [ApiKeyInline]
    secrets_name = "keys"
    active_keys = active_secrets("keys")
    list_display = (
        "name",
        "enabled",
        "requests_per_second",
        "proxies_per_minute",
        "max_count_per_request",
        "gateway_reserve",
        "active_keys",
        "updated_at",
    )
    list_filter = ("enabled", "gateway_enabled", "may_view_inventory", "allowed_upstreams")
    search_fields = ("name",)
    filter_horizontal = ("allowed_upstreams",)
    readonly_fields = TIMESTAMPS
    fieldsets = (
        (None, {"fields": ("name", "enabled", "issue_key")}),
        (
            "Limits",
            {
                "fields": (
                    "requests_per_second",
                    "proxies_per_minute",
                    "max_count_per_request",
                    "gateway_reserve",
                    "idempotency_ttl_s",
                )
            },
        ),
        (
            "May draw from",
            {"fields": ("allowed_upstreams", "allowed_regions", "allowed_protocols")},
        ),
        ("May see", {"fields": ("may_view_inventory",)}),
        (
            "Gateway",
            {
                "fields": (
                    "gateway_enabled",
                    "gateway_max_connections",
                    "gateway_requests_per_second",
                ),
                "description": "The same upstreams, regions and protocols apply through the "
                "gateway. A key issued before the gateway existed has no gateway verifier: "
                "rotate it (its page says).",
            },
        ),
        ("Timestamps", {"fields": TIMESTAMPS}),
    )

    def issue(self, owner: ApiClient) -> tuple[ApiKey, str]:
        return ApiKey.objects.issue(owner)


@admin.register(ApiKey)
class ApiKeyAdmin(SecretAdmin):
    list_display = (
        "__str__",
        "client",
        "name",
        "at_the_gateway",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = (SecretStatusFilter, "client")
    search_fields = ("prefix", "name", "client__name")
    list_select_related = ("client",)
    fields = (
        "client",
        "prefix",
        "name",
        "at_the_gateway",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = (
        "client",
        "prefix",
        "at_the_gateway",
        "created_at",
        "last_used_at",
        "revoked_at",
    )

    @admin.display(description="At the gateway")
    def at_the_gateway(self, key: ApiKey) -> str:
        if not key.gateway_verifier:
            return "No: issued before the gateway; issue a new key and revoke this one"
        return "Yes" if key.client.gateway_enabled else "Not while the client may not use it"


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    """Failure alerts, read-only: they open and close themselves (pool_admin/alerts.py)."""

    list_display = (
        "upstream",
        "kind",
        "state",
        "failures",
        "first_failed_at",
        "last_failed_at",
        "opened_at",
        "closed_at",
        "detail",
    )
    list_filter = ("kind", ("closed_at", admin.EmptyFieldListFilter), "upstream")
    list_select_related = ("upstream",)
    search_fields = ("upstream__name", "detail")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="State")
    def state(self, obj: Alert) -> str:
        return "closed" if obj.closed_at else "open" if obj.opened_at else "pending"


# The usage aggregates' and the gateway workers' pages: registered on import
# (pool_admin/config/usage_admin.py, worker_admin.py).
from pool_admin.config import usage_admin, worker_admin  # noqa: E402, F401
