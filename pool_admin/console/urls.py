"""The console's URLs, under /admin/console/ (mounted before the admin's own)."""

from django.contrib import admin
from django.urls import path

from pool_admin.console import views

app_name = "console"

urlpatterns = [
    path("", admin.site.admin_view(views.overview_view), name="overview"),
]
