"""Routes of the client API, mounted at ``/api/v1/``."""

from django.urls import path

from pool_admin.api import gateway_views, outcomes, views

app_name = "api"
urlpatterns = [
    path("extract", views.ExtractView.as_view(), name="extract"),
    path("inventory", views.InventoryView.as_view(), name="inventory"),
    path("proxies/<str:proxy_id>/outcome", outcomes.OutcomeView.as_view(), name="outcome"),
    path("gateway/sessions", gateway_views.SessionsView.as_view(), name="gateway-sessions"),
    path("gateway/snapshot", gateway_views.SnapshotView.as_view(), name="gateway-snapshot"),
    path(
        "gateway/snapshot/ack",
        gateway_views.SnapshotAckView.as_view(),
        name="gateway-snapshot-ack",
    ),
    path("gateway/reports", gateway_views.ReportsView.as_view(), name="gateway-reports"),
]
