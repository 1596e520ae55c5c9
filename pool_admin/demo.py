"""The demo provider: a vendor emulator in Webshare's proxy-list shape, served by the web
server itself at ``/demo/vendor/api/v2/proxy/list/`` when ``settings.DEMO`` is on (``make
run`` turns it on unless ``DEMO=0``), handing out the local proxies ``make run`` started
(pool_admin/demo_proxies.py), and the configuration that fetches from it (``ensure_demo``).

It answers as the real API does: ``Authorization: Token <key>`` (the demo account's credential,
stored as that whole value) or a 401 ``{"detail": "Invalid token."}``; ``?page_size=N`` of the
proxies of ``?protocol=http|socks5``, each ``valid`` with its ``username`` and ``password``.
Webshare's list gives no expiry, so the upstream's default TTL (three minutes) makes the pool
churn.
"""

from __future__ import annotations

import hmac
import json
import secrets

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from pool_admin.config.models import Credential
from pool_admin.demo_proxies import read_listing

ACCOUNT = "demo"
CREDENTIAL = "demo-vendor-key"
#: The demo's upstreams: one per protocol (a Webshare list names one protocol).
UPSTREAMS = {"demo": "http", "demo-socks5": "socks5"}
CLIENT = "demo"
PATH = "demo/vendor/api/v2/proxy/list/"
MAX_PAGE = 100


def _json(status: int, document: object) -> HttpResponse:
    return HttpResponse(json.dumps(document), status=status, content_type="application/json")


@require_GET
def proxy_list(request: HttpRequest) -> HttpResponse:
    if not settings.DEMO:
        raise Http404
    row = Credential.objects.filter(name=CREDENTIAL).first()
    given = request.headers.get("Authorization", "")
    if row is None or not hmac.compare_digest(given.encode(), row.reveal().encode()):
        return _json(401, {"detail": "Invalid token."})
    protocol = request.GET.get("protocol", "http")
    try:
        page = max(1, min(MAX_PAGE, int(request.GET.get("page_size", "25"))))
    except ValueError:
        return _json(400, {"page_size": ["A valid integer is required."]})
    proxies = [p for p in read_listing(settings.RUN_DIR) if p.get("protocol") == protocol]
    secrets.SystemRandom().shuffle(proxies)
    results = [
        {
            "id": f"demo-{n}",
            "username": p["username"],
            "password": p["password"],
            "proxy_address": p["host"],
            "port": p["port"],
            "valid": True,
            "country_code": "US",
            "city_name": "Loopback",
        }
        for n, p in enumerate(proxies[:page])
    ]
    return _json(200, {"count": len(results), "next": None, "previous": None, "results": results})
