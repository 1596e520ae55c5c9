"""The WSGI application the web server runs (through pool_admin/rsgi.py, which reads each body
first; ``pool_admin.launcher.web_command``).

Django's application, behind the reverse proxy's address and scheme when it is a trusted one
(pool_admin/proxy_headers.py), with the extract endpoint's own application mounted ahead of it
for the ordinary ``POST /api/v1/extract`` (pool_admin/api/fast_extract.py), and chunked request
bodies read to a length before either sees them (pool_admin/api/request_bodies.py). Served over
WSGI alone, by a server that does not read bodies under a deadline, a slow body holds a thread.
"""

import os
from collections.abc import Callable, Iterable
from typing import Any

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pool_admin.settings")

django_application = get_wsgi_application()

# These need Django set up.
from pool_admin.api.fast_extract import FastExtract  # noqa: E402
from pool_admin.api.request_bodies import ChunkedBodies  # noqa: E402
from pool_admin.proxy_headers import TrustedProxies  # noqa: E402

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def compose(django_app: WSGIApp) -> WSGIApp:
    """The web server's application around ``django_app``, built from the current settings: the
    client's address taken from a trusted reverse proxy (pool_admin/proxy_headers.py), a
    chunked body given its length, then the ordinary extract answered by its own application,
    every other request by ``django_app``."""
    from django.conf import settings

    return TrustedProxies(ChunkedBodies(FastExtract(django_app)), settings.WEB_TRUSTED_PROXIES)


application = compose(django_application)
