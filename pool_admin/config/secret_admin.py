"""What the admin pages of API keys and worker tokens share (bearer secrets,
pool_admin/config/models/bearer.py): a history that cannot be reverted, the owner's read-only
inline, the status filter, revoking, and the one place a new secret's plaintext is shown.

A secret is issued from its owner's page (a checkbox on save: ``IssuingForm``,
``IssuingAdmin``), the one place the plaintext is shown; it is never added on its own page, and
is revoked from its list (an action) or its page (a button,
templates/admin/config/<model>/submit_line.html).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from simple_history.admin import SimpleHistoryAdmin

from pool_admin.config.models.bearer import BearerSecret


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


def show_once(
    model_admin: admin.ModelAdmin, request: HttpRequest, secret: BearerSecret, owner: object,
    plaintext: str,
) -> None:  # fmt: skip
    """The plaintext of a secret just issued, in the page's messages: the only time it exists
    outside its holder's hands (only a hash is kept)."""
    model_admin.message_user(
        request,
        f"New {secret.KIND} {secret} for {owner}: {plaintext} - shown only this once, store it "
        "now.",
        messages.WARNING,
    )


class IssuingForm(forms.ModelForm):
    """An owner's form with the checkbox that issues a secret on save (checked when adding)."""

    #: What the owner holds ("API key").
    kind: ClassVar[str]

    issue_key = forms.BooleanField(required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["issue_key"]
        field.label = f"Issue a new {self.kind} on save"
        field.help_text = (
            f"Its plaintext is shown once, after saving. Old {self.kind}s keep working until "
            "revoked, so the holder can switch without downtime."
        )
        if self.instance._state.adding:
            field.initial = True


class IssuingAdmin(SimpleHistoryAdmin):
    """An owner's page: a secret is issued after a save whose ``issue_key`` box is checked. Its
    rows count their unrevoked secrets, for a column made by :func:`active_secrets`."""

    #: The owner's relation to its secrets (``keys``).
    secrets_name: ClassVar[str]

    def issue(self, owner: Any) -> tuple[BearerSecret, str]:
        raise NotImplementedError

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        unrevoked = Q(**{f"{self.secrets_name}__revoked_at__isnull": True})
        owners: QuerySet[Any] = super().get_queryset(request)
        counted: QuerySet[Any] = owners.annotate(
            active_secrets_count=Count(self.secrets_name, filter=unrevoked)
        )
        return counted

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        if form.cleaned_data.get("issue_key"):
            secret, plaintext = self.issue(form.instance)
            show_once(self, request, secret, form.instance, plaintext)


def active_secrets(label: str) -> Callable[[Any, Any], int]:
    """An owner list's column: how many of its secrets are not revoked (``IssuingAdmin``)."""

    @admin.display(description=f"Active {label}", ordering="active_secrets_count")
    def column(model_admin: Any, obj: Any) -> int:
        return obj.active_secrets_count  # type: ignore[no-any-return]

    return column


class SecretInline(admin.TabularInline):
    """An owner's secrets on its page, read-only."""

    fields = ("key", "name", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True  # revoke on the secret's own page or with its list's action

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # issued by the owner form's checkbox, which shows the plaintext

    @admin.display(description="Prefix")
    def key(self, obj: BearerSecret) -> str:
        return str(obj)


class SecretStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("active", "Active"), ("revoked", "Revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


class SecretAdmin(ReadOnlyHistoryAdmin):
    """A kind of secret's list and pages: never added here, revoked by action or button."""

    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # issued from the owner's page, the one place the plaintext is shown

    @admin.action(description="Revoke selected %(verbose_name_plural)s", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        found = list(queryset.filter(revoked_at__isnull=True))
        for secret in found:
            secret.revoke()  # one by one, so history records each revocation
        kind = self.model._meta.verbose_name
        self.message_user(request, f"Revoked {len(found)} {kind}(s).", messages.SUCCESS)

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        """The secret page's "Revoke this key" button."""
        if "_revoke" in request.POST and obj.revoked_at is None:
            obj.revoke()
            self.message_user(request, f"Revoked {obj.KIND} {obj}.", messages.SUCCESS)
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)
