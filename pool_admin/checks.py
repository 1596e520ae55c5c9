"""The project's system checks: what its two detours around Django must keep true, checked where
Django checks (``manage.py check``, every management command that checks, the launcher's start).

* The admin's middleware runs from ``SITE_MIDDLEWARE`` (pool_admin/api/middleware.py), where the
  admin's own checks (admin.E408-E410) and django-axes' (axes.W002) do not look, so those four
  are silenced in settings and stated here for the place the middleware really is.
* The extract endpoint's own application (pool_admin/api/fast_extract.py) does what
  ``ExtractView`` does around its ``post``. A view configured otherwise (a throttle, a renderer,
  a permission) would make the two answer differently, so it is an error here and the web
  server's application refuses to be built, rather than one path quietly serving every request.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.urls import Resolver404, resolve
from django.utils.module_loading import import_string

#: What the silenced checks demand of MIDDLEWARE, demanded of SITE_MIDDLEWARE: (class, the
#: silenced check it stands for).
SITE_NEEDS = (
    ("django.contrib.sessions.middleware.SessionMiddleware", "admin.E410"),
    ("django.contrib.auth.middleware.AuthenticationMiddleware", "admin.E408"),
    ("django.contrib.messages.middleware.MessageMiddleware", "admin.E409"),
    ("axes.middleware.AxesMiddleware", "axes.W002"),
)
SITE_ONLY = "pool_admin.api.middleware.SiteOnlyMiddleware"


def _has_subclass(class_path: str, paths: list[str]) -> bool:
    """Whether one of ``paths`` names ``class_path`` or a subclass (as the admin's check)."""
    wanted = import_string(class_path)
    candidates = (import_string(path) for path in paths)
    return any(isinstance(c, type) and issubclass(c, wanted) for c in candidates)


@register("admin")
def check_site_middleware(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    if SITE_ONLY not in settings.MIDDLEWARE:
        errors.append(
            Error(
                f"{SITE_ONLY} must be in MIDDLEWARE: it runs SITE_MIDDLEWARE, the admin's.",
                id="pool_admin.E001",
            )
        )
    site = list(getattr(settings, "SITE_MIDDLEWARE", []))
    for class_path, stands_for in SITE_NEEDS:
        if not _has_subclass(class_path, site):
            errors.append(
                Error(
                    f"'{class_path}' must be in SITE_MIDDLEWARE (the admin's middleware; "
                    f"{stands_for} is silenced because it looks in MIDDLEWARE only).",
                    id="pool_admin.E002",
                )
            )
    return errors


@register("urls")
def check_fast_extract(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from pool_admin.api.fast_extract import EXTRACT_PATH, view_differences
    from pool_admin.api.views import ExtractView

    errors: list[CheckMessage] = []
    differences = view_differences()
    if differences:
        errors.append(
            Error(
                "ExtractView is configured unlike the extract's own application "
                f"(pool_admin/api/fast_extract.py): {'; '.join(differences)}.",
                hint="Do the same in fast_extract.py and in VIEW_AS_DONE_HERE, or leave the "
                "view as it was; the two must answer every extract alike.",
                id="pool_admin.E003",
            )
        )
    try:
        view_class = getattr(resolve(EXTRACT_PATH).func, "view_class", None)
    except Resolver404:
        view_class = None
    if view_class is not ExtractView:
        errors.append(
            Error(
                f"{EXTRACT_PATH} must route to ExtractView: the extract's own application "
                "answers that path as ExtractView would.",
                id="pool_admin.E004",
            )
        )
    return errors
