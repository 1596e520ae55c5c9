from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "pool_admin.console"
    label = "console"
    verbose_name = "Live console"
    default_auto_field = "django.db.models.BigAutoField"
