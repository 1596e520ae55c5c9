"""The admin site's middleware, skipped on the client API's paths.

``SiteOnlyMiddleware`` stands in ``MIDDLEWARE`` for ``settings.SITE_MIDDLEWARE`` (sessions,
CSRF, users, change history, messages, frame options): it builds that chain as Django would and
runs it, with its ``process_view`` hooks in order, for every path except those under
``API_PREFIX``. The client API authenticates every request with an API key (``auth.py``), keeps
no session, sets no cookie and is exempt from CSRF (DRF's views are), so that chain did nothing
for it but cost about a sixth of an extract's CPU time. Only middleware with no
``process_exception`` or ``process_template_response`` hook can be wrapped (checked at start).
Whatever is mounted under ``API_PREFIX`` must authenticate by API key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, MiddlewareNotUsed
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponseBase
from django.utils.module_loading import import_string

#: Where the client API is mounted (pool_admin/urls.py).
API_PREFIX = "/api/v1/"

Handler = Callable[[HttpRequest], HttpResponseBase]


class SiteOnlyMiddleware:
    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response
        handler: Any = get_response
        view_hooks: list[Callable[..., HttpResponseBase | None]] = []
        for path in reversed(settings.SITE_MIDDLEWARE):
            try:
                instance = import_string(path)(handler)
            except MiddlewareNotUsed:
                continue
            for hook in ("process_exception", "process_template_response"):
                if hasattr(instance, hook):
                    raise ImproperlyConfigured(f"SITE_MIDDLEWARE cannot wrap {path}: it has {hook}")
            if hasattr(instance, "process_view"):
                view_hooks.insert(0, instance.process_view)
            handler = convert_exception_to_response(instance)
        self.site: Handler = handler
        self.view_hooks = view_hooks

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path_info.startswith(API_PREFIX):
            return self.get_response(request)
        return self.site(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponseBase | None:
        if request.path_info.startswith(API_PREFIX):
            return None
        for hook in self.view_hooks:
            response = hook(request, view, args, kwargs)
            if response is not None:
                return response
        return None
