"""Admin for the configuration models: lists, filters, search, history; secrets write-only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import (
    Count,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
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
    WorkerGroup,
)

TIMESTAMPS = ("created_at", "updated_at")


class ReadOnlyHistoryAdmin(SimpleHistoryAdmin):
    """History to read, never to revert: a reverted credential would lose its ciphertext
    (kept out of history on purpose) and a reverted API key could come back from revocation."""

    def revert_disabled(self, request: HttpRequest, obj: Any = None) -> bool:
        return True

    def history_form_view(
        self,
        request: HttpRequest,
        object_id: str,
        version_id: str,
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if request.method != "GET":
            raise PermissionDenied
        return super().history_form_view(request, object_id, version_id, extra_context)


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


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    fields = ("key", "name", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True  # revoke on the key's own page or with the key list's action

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # keys are issued by the client form's checkbox, which shows the plaintext

    @admin.display(description="Key")
    def key(self, obj: ApiKey) -> str:
        return str(obj)


class ApiClientForm(forms.ModelForm):
    allowed_protocols = forms.TypedMultipleChoiceField(
        choices=PROTOCOL_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None checked: all.",
    )
    issue_key = forms.BooleanField(
        required=False,
        label="Issue a new API key on save",
        help_text="Its plaintext is shown once, after saving. Old keys keep working until "
        "revoked, so clients can switch without downtime.",
    )

    class Meta:
        model = ApiClient
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance._state.adding:
            self.fields["issue_key"].initial = True


@admin.register(ApiClient)
class ApiClientAdmin(SimpleHistoryAdmin):
    form = ApiClientForm
    inlines = [ApiKeyInline]
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
    list_filter = ("enabled", "may_view_inventory", "allowed_upstreams")
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
        ("Timestamps", {"fields": TIMESTAMPS}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiClient]:
        active = Count("keys", filter=Q(keys__revoked_at__isnull=True))
        clients: QuerySet[ApiClient] = super().get_queryset(request)
        return clients.annotate(active_keys_count=active)

    @admin.display(description="Active keys", ordering="active_keys_count")
    def active_keys(self, obj: ApiClient) -> int:
        return obj.active_keys_count  # type: ignore[attr-defined,no-any-return]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        if form.cleaned_data.get("issue_key"):
            key, plaintext = ApiKey.objects.issue(form.instance)
            # The only time the plaintext exists outside the client's hands: only a hash is kept.
            self.message_user(
                request,
                f"New API key {key} for {form.instance}: {plaintext} - shown only this once, "
                "store it now.",
                messages.WARNING,
            )


class KeyStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("active", "Active"), ("revoked", "Revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> QuerySet[ApiKey]:
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(ReadOnlyHistoryAdmin):
    list_display = ("__str__", "client", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = (KeyStatusFilter, "client")
    search_fields = ("prefix", "name", "client__name")
    list_select_related = ("client",)
    fields = ("client", "prefix", "name", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("client", "prefix", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # issued from the API client page, the one place the plaintext is shown

    @admin.action(description="Revoke selected API keys", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:
            key.revoke()  # one by one, so history records each revocation
        self.message_user(request, f"Revoked {len(keys)} API key(s).", messages.SUCCESS)

    def response_change(self, request: HttpRequest, obj: ApiKey) -> HttpResponse:
        """The key page's "Revoke this key" button (templates/admin/config/apikey/)."""
        if "_revoke" in request.POST and obj.revoked_at is None:
            obj.revoke()
            self.message_user(request, f"Revoked API key {obj}.", messages.SUCCESS)
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)


@admin.register(WorkerGroup)
class WorkerGroupAdmin(SimpleHistoryAdmin):
    list_display = ("name", "target_capacity", "upstreams", "updated_at")
    list_filter = ("allowed_upstreams",)
    search_fields = ("name",)
    filter_horizontal = ("allowed_upstreams",)
    readonly_fields = TIMESTAMPS

    def get_queryset(self, request: HttpRequest) -> QuerySet[WorkerGroup]:
        return super().get_queryset(request).prefetch_related("allowed_upstreams")

    @admin.display(description="Allowed upstreams")
    def upstreams(self, obj: WorkerGroup) -> str:
        names = [upstream.name for upstream in obj.allowed_upstreams.all()]
        return ", ".join(names) if names else "all"


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


# The usage aggregates' pages: registered on import (pool_admin/config/usage_admin.py).
from pool_admin.config import usage_admin  # noqa: E402, F401
