from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "pool_admin.metrics"
    label = "metrics"
    verbose_name = "Usage metrics"
    default_auto_field = "django.db.models.BigAutoField"
