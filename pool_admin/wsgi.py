"""WSGI entry point of the web server (``pool_admin.launcher.web_command``).

Django's application, with the ordinary ``POST /api/v1/extract`` answered ahead of it
(pool_admin/api/direct.py).
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pool_admin.settings")

django_application = get_wsgi_application()

from pool_admin.api.direct import DirectExtract  # noqa: E402  (needs Django set up)

application = DirectExtract(django_application)
