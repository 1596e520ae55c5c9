"""The console in the admin: its entry on the index, and the audit of operator actions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from pool_admin.console.models import Console, OperatorAction


@admin.register(Console)
class ConsoleAdmin(admin.ModelAdmin):
    """ "Console" on the admin index, for staff; its list is the console's overview."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        return HttpResponseRedirect(reverse("console:overview"))


@admin.register(OperatorAction)
class OperatorActionAdmin(admin.ModelAdmin):
    """The audit: who did what from the console, read-only."""

    list_display = ("at", "username", "kind", "target", "outcome")
    list_filter = ("kind", ("at", admin.DateFieldListFilter))
    search_fields = ("username", "target")
    date_hierarchy = "at"

    # Every operator may read the audit; nobody writes it but the console.
    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
