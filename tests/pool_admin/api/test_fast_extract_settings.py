"""The extract's own application restates what Django's request handling decides from settings
(fast_extract.py: the host as ``get_host`` finds and validates it, ``is_secure`` behind a proxy,
the Security and Common middleware's redirects and refusals, SecurityMiddleware's headers).
Each hostile request here goes to both paths under each of those settings, and the two answers
must be the same: a rule copied by hand cannot drift from Django's without failing this."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings

from pool_admin.api import auth
from tests.pool_admin.api.test_extract import URL
from tests.pool_admin.api.test_fast_extract import ORDINARY, clients, comparable

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

HOSTS = ["api.example", "www.api.example", "testserver"]
PROXY_SSL = ("HTTP_X_FORWARDED_PROTO", "https")
SETTINGS = {
    "project": {},
    "hosts": {"ALLOWED_HOSTS": HOSTS},
    "subdomains": {"ALLOWED_HOSTS": [".example", "testserver"]},
    "debug, no hosts": {"DEBUG": True, "ALLOWED_HOSTS": []},
    "forwarded host": {"ALLOWED_HOSTS": HOSTS, "USE_X_FORWARDED_HOST": True},
    "forwarded port": {"ALLOWED_HOSTS": HOSTS, "USE_X_FORWARDED_PORT": True, "PREPEND_WWW": True},
    "proxy ssl": {"SECURE_PROXY_SSL_HEADER": PROXY_SSL},
    "ssl redirect": {"SECURE_SSL_REDIRECT": True},
    "ssl redirect behind a proxy": {
        "ALLOWED_HOSTS": HOSTS,
        "SECURE_SSL_REDIRECT": True,
        "SECURE_PROXY_SSL_HEADER": PROXY_SSL,
    },
    "ssl redirect, api exempt": {
        "SECURE_SSL_REDIRECT": True,
        "SECURE_REDIRECT_EXEMPT": [r"^api/"],
    },
    "ssl redirect host": {"SECURE_SSL_REDIRECT": True, "SECURE_SSL_HOST": "secure.example"},
    "hsts behind a proxy": {
        "SECURE_PROXY_SSL_HEADER": PROXY_SSL,
        "SECURE_HSTS_SECONDS": 3600,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": True,
    },
    "other security headers": {
        "SECURE_CONTENT_TYPE_NOSNIFF": False,
        "SECURE_REFERRER_POLICY": "no-referrer",
        "SECURE_CROSS_ORIGIN_OPENER_POLICY": None,
    },
    "prepend www": {"ALLOWED_HOSTS": HOSTS, "PREPEND_WWW": True},
    "disallowed agents": {"DISALLOWED_USER_AGENTS": [re.compile(r"bot", re.I)]},
}
REQUESTS = {
    "plain": {},
    "localhost": {"Host": "localhost"},
    "allowed host": {"Host": "api.example"},
    "host with a port": {"Host": "api.example:8443"},
    "host in capitals": {"Host": "API.EXAMPLE"},
    "host with a trailing dot": {"Host": "api.example."},
    "www host": {"Host": "www.api.example"},
    "foreign host": {"Host": "evil.example"},
    "host with a path": {"Host": "api.example/evil"},
    "empty host": {"Host": ""},
    "forwarded foreign host": {"Host": "api.example", "X-Forwarded-Host": "evil.example"},
    "forwarded host list": {"Host": "api.example", "X-Forwarded-Host": "api.example, x.example"},
    "forwarded port": {"Host": "api.example", "X-Forwarded-Port": "8443"},
    "forwarded https": {"Host": "api.example", "X-Forwarded-Proto": "https"},
    "forwarded https, then http": {"Host": "api.example", "X-Forwarded-Proto": "https, http"},
    "forwarded http": {"Host": "api.example", "X-Forwarded-Proto": "http"},
    "a bot": {"Host": "api.example", "User-Agent": "Mozilla/5.0 (compatible; SomeBot/2.1)"},
}


def answer(response):
    """What must be the same. An HTML page is Django's own (DEBUG's technical page differs
    per request): the fast path makes JSON answers only, and left this one to Django."""
    if response["Content-Type"].startswith("text/html"):
        return response.status_code, response["Content-Type"]
    return comparable(response)


def test_both_paths_answer_every_hostile_request_alike_under_every_setting(
    make_client, seed, extracts_run_by_fast
):
    seed(n=2 * len(SETTINGS) * len(REQUESTS))
    key = make_client().plaintext
    assert auth.authenticate_key(key) is not None  # cached: the fast path may take it
    taken_fast = set()
    for setting, overrides in SETTINGS.items():
        with override_settings(**overrides):
            first, django = clients(key)
            for name, headers in REQUESTS.items():
                before = len(extracts_run_by_fast)
                response = first.post(URL, ORDINARY, format="json", headers=headers)
                if len(extracts_run_by_fast) > before:
                    taken_fast.add((setting, name))
                reference = django.post(URL, ORDINARY, format="json", headers=headers)
                assert answer(response) == answer(reference), (setting, name)
    # The comparison means something where the fast path answered: it did under every
    # setting but those that redirect every plain-HTTP request, and it left each refusal and
    # redirect to Django.
    redirecting = {"ssl redirect", "ssl redirect, api exempt", "ssl redirect host"}
    assert {setting for setting, _ in taken_fast} == set(SETTINGS) - redirecting
    assert ("debug, no hosts", "localhost") in taken_fast
    assert ("ssl redirect behind a proxy", "forwarded https") in taken_fast
    assert ("ssl redirect behind a proxy", "forwarded http") not in taken_fast
    assert ("project", "foreign host") not in taken_fast
    assert ("forwarded host", "forwarded foreign host") not in taken_fast
    assert ("prepend www", "allowed host") not in taken_fast
    assert ("disallowed agents", "a bot") not in taken_fast
