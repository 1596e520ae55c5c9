"""Routes of the client API, mounted at ``/api/v1/``."""

from django.urls import path

from pool_admin.api import outcomes, views

app_name = "api"
urlpatterns = [
    path("extract", views.ExtractView.as_view(), name="extract"),
    path("inventory", views.InventoryView.as_view(), name="inventory"),
    path("proxies/<str:proxy_id>/outcome", outcomes.OutcomeView.as_view(), name="outcome"),
]
