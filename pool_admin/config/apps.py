from django.apps import AppConfig


class ConfigAppConfig(AppConfig):
    name = "pool_admin.config"
    label = "config"
    verbose_name = "Configuration"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from pool_admin import checks  # noqa: F401  (registers the project's system checks)
        from pool_admin.config import signals  # noqa: F401  (connects the receivers)
