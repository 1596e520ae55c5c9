"""WSGI entry point of the web server (``pool_admin.launcher.web_command``).

Django's application, with the extract endpoint's own application mounted ahead of it for the
ordinary ``POST /api/v1/extract`` (pool_admin/api/fast_extract.py).
"""

import os
from collections.abc import Callable, Iterable
from typing import Any

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pool_admin.settings")

django_application = get_wsgi_application()

from pool_admin.api.fast_extract import FastExtract  # noqa: E402  (needs Django set up)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def compose(django_app: WSGIApp) -> WSGIApp:
    """The web server's application around ``django_app``, built from the current settings."""
    return FastExtract(django_app)


application = compose(django_application)
