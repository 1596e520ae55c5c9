"""The console's URLs, under /admin/console/ (mounted before the admin's own).

Every page is the admin's (``admin.site.admin_view``: anyone not staff is sent to the login
page) and needs ``console.view_console``: the console shows live proxies, workers and usage
history, which an operator can keep from a staff user as every other admin page is kept, by
not granting its permission (superusers have it). Acting needs ``console.operate_pool`` too
(``views.action_view``).
"""

from collections.abc import Callable

from django.contrib import admin
from django.contrib.auth.decorators import permission_required
from django.http import HttpResponse
from django.urls import path

from pool_admin.console import views
from pool_admin.console.models import VIEW_PERMISSION

app_name = "console"


def _console_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    # raise_exception: a staff user without the permission is answered 403, not sent to the
    # login page they are already past.
    return admin.site.admin_view(permission_required(VIEW_PERMISSION, raise_exception=True)(view))


urlpatterns = [
    path("", _console_page(views.overview_view), name="overview"),
    path("proxies/", _console_page(views.proxies_view), name="proxies"),
    # A proxy ID may hold any printable character but a space: a query value, not a path.
    path("proxy/", _console_page(views.proxy_view), name="proxy"),
    path("ownership/", _console_page(views.ownership_view), name="ownership"),
    path("history/", _console_page(views.history_view), name="history"),
    path("act/<str:kind>/", _console_page(views.action_view), name="act"),
]
