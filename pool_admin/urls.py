"""URL routes: admin, liveness and readiness, metrics, the client API, OpenAPI schema and its UI."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from pool_admin import demo, readiness
from pool_admin.metrics import exposition

admin.site.site_header = "Proxy Pool"
admin.site.site_title = "Proxy Pool"
admin.site.index_title = "Administration"

urlpatterns = [
    # The live console (pool_admin/console/), before the admin's own catch-all app URLs.
    path("admin/console/", include("pool_admin.console.urls")),
    path("admin/", admin.site.urls),
    path("healthz", readiness.healthz, name="healthz"),
    path("readyz", readiness.readyz, name="readyz"),
    # Prometheus (loopback only unless METRICS_ALLOWED_NETWORKS says otherwise).
    path("metrics", exposition.metrics_view, name="metrics"),
    path("api/v1/", include("pool_admin.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file (?script), not inline: the
    # Content-Security-Policy (settings) allows scripts from this origin only.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    # The demo provider's vendor emulator (404 unless settings.DEMO: pool_admin/demo.py).
    path(demo.PATH, demo.proxy_list, name="demo-vendor"),
]

# Under /api/ every error is problem+json, also where no DRF view answers
# (pool_admin/api/error_views.py).
handler400 = "pool_admin.api.error_views.bad_request"
handler403 = "pool_admin.api.error_views.permission_denied"
handler404 = "pool_admin.api.error_views.page_not_found"
handler500 = "pool_admin.api.error_views.server_error"
