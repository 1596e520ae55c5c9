"""The gateway's side of the admin: worker groups, gateway workers and their tokens. Imported by
pool_admin/config/admin.py, which registers it.

A worker's token is issued from the worker's page (the checkbox on save shows its plaintext
once, as API keys are), and revoked from the token list, the token's page, or for every token
of the selected workers at once from the worker list.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from simple_history.admin import SimpleHistoryAdmin

from pool_admin.config.models import GatewayWorker, WorkerGroup, WorkerToken
from pool_admin.config.secret_admin import (
    IssuingAdmin,
    IssuingForm,
    SecretAdmin,
    SecretInline,
    SecretStatusFilter,
    active_secrets,
)

TIMESTAMPS = ("created_at", "updated_at")


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


class WorkerTokenInline(SecretInline):
    model = WorkerToken


class GatewayWorkerForm(IssuingForm):
    kind = WorkerToken.KIND

    class Meta:
        model = GatewayWorker
        fields = "__all__"


@admin.register(GatewayWorker)
class GatewayWorkerAdmin(IssuingAdmin):
    form = GatewayWorkerForm
    inlines = [WorkerTokenInline]
    secrets_name = "tokens"
    active_tokens = active_secrets("tokens")
    list_display = ("name", "group", "enabled", "active_tokens", "updated_at")
    list_filter = ("enabled", "group")
    list_select_related = ("group",)
    search_fields = ("name", "group__name")
    autocomplete_fields = ("group",)
    fields = ("name", "group", "enabled", "issue_key", *TIMESTAMPS)
    actions = ["revoke_tokens"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # The name is the worker's ID in the pool: renamed, its live session, assignments and
        # drain tickets would belong to a worker that no longer authenticates.
        return ("name", *TIMESTAMPS) if obj is not None else TIMESTAMPS

    def issue(self, owner: GatewayWorker) -> tuple[WorkerToken, str]:
        return WorkerToken.objects.issue(owner)

    @admin.action(description="Revoke every token of the selected workers", permissions=["change"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[GatewayWorker]) -> None:
        tokens = list(WorkerToken.objects.active().filter(worker__in=queryset))
        for token in tokens:
            token.revoke()  # one by one, so history records each revocation
        self.message_user(
            request,
            f"Revoked {len(tokens)} worker token(s) of {queryset.count()} worker(s) (the control "
            "API honours it within 30 s).",
            messages.SUCCESS,
        )


@admin.register(WorkerToken)
class WorkerTokenAdmin(SecretAdmin):
    list_display = ("__str__", "worker", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = (SecretStatusFilter, "worker__group", "worker")
    search_fields = ("prefix", "name", "worker__name")
    list_select_related = ("worker",)
    fields = ("worker", "prefix", "name", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("worker", "prefix", "created_at", "last_used_at", "revoked_at")
