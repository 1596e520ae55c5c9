"""The console's URLs, under /admin/console/ (mounted before the admin's own)."""

from django.contrib import admin
from django.urls import path

from pool_admin.console import views

app_name = "console"

urlpatterns = [
    path("", admin.site.admin_view(views.overview_view), name="overview"),
    path("proxies/", admin.site.admin_view(views.proxies_view), name="proxies"),
    # A proxy ID may hold any printable character but a space: a query value, not a path.
    path("proxy/", admin.site.admin_view(views.proxy_view), name="proxy"),
    path("ownership/", admin.site.admin_view(views.ownership_view), name="ownership"),
    path("history/", admin.site.admin_view(views.history_view), name="history"),
    path("act/<str:kind>/", admin.site.admin_view(views.action_view), name="act"),
]
