"""WSGI entry point of the web server (``pool_admin.launcher.web_command``)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pool_admin.settings")

application = get_wsgi_application()
