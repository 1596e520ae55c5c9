"""The Celery app: configured from Django settings (``CELERY_*``), broker on Redis."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pool_admin.settings")

app = Celery("pool_admin")
# Lazy: settings are read on first use, not at import (the test harness sets env first).
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
