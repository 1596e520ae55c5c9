from typing import Any, TypeVar

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest, HttpResponse

_ModelT = TypeVar("_ModelT", bound=Model)

class SimpleHistoryAdmin(admin.ModelAdmin[_ModelT]):
    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = ...
    ) -> HttpResponse: ...
    def history_form_view(
        self,
        request: HttpRequest,
        object_id: str,
        version_id: str,
        extra_context: dict[str, Any] | None = ...,
    ) -> HttpResponse: ...
    def revert_disabled(self, request: HttpRequest, obj: Any = ...) -> bool: ...
