"""The console in the admin: its entry on the index, and the audit of operator actions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from pool_admin.console.models import VIEW_PERMISSION, Console, OperatorAction
from pool_admin.readonly_admin import StaffReadableAdmin


@admin.register(Console)
class ConsoleAdmin(StaffReadableAdmin):
    """ "Console" on the admin index, for staff who may view it; its list is the overview."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and request.user.has_perm(VIEW_PERMISSION)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        return HttpResponseRedirect(reverse("console:overview"))


@admin.register(OperatorAction)
class OperatorActionAdmin(StaffReadableAdmin):
    """The audit: who did what from the console; every operator may read it, nobody writes it
    but the console."""

    list_display = ("at", "username", "kind", "target", "outcome")
    list_filter = ("kind", ("at", admin.DateFieldListFilter))
    search_fields = ("username", "target")
    date_hierarchy = "at"
