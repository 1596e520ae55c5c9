"""The Django project: settings, Celery app, admin console, APIs, management commands."""

# Load the Celery app whenever Django starts, so @shared_task binds to it.
from pool_admin.celery import app as celery_app

__all__ = ["celery_app"]
