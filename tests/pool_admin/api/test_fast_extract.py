"""The contract between the extract endpoint's own application and Django's (fast_extract.py).

fast_extract.py answers the ordinary extract as Django's handler does: every API test also runs
through it (the ``api`` fixture); these compare the two answers byte for byte where they can
differ, errors included, and check what it must leave to Django.
"""

from __future__ import annotations

import json
import re

import pytest
from django.core import signals
from django.db import close_old_connections
from django.test import RequestFactory, override_settings
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from pool_admin.api import fast_extract
from tests.pool_admin.api.conftest import FastFirstHandler
from tests.pool_admin.api.test_extract import URL

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

ORDINARY = {"count": 1, "mode": "partial"}


def clients(plaintext: str) -> tuple[APIClient, APIClient]:
    """(through fast_extract.py first, through Django's handler alone), with the same key."""
    first, django = APIClient(), APIClient()
    first.handler = FastFirstHandler(enforce_csrf_checks=False)
    for client in (first, django):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return first, django


def comparable(response):
    if not response["Content-Type"].endswith("json"):
        return response.status_code, dict(response.items()), response.content
    body = json.loads(response.content)
    body.pop("request_id", None)
    if "proxies" in body:
        body["proxies"] = [sorted(p) for p in body["proxies"]]
    # The proxies' texts differ in length; the bytes are checked against JSONRenderer below.
    headers = {k: v for k, v in response.items() if k not in ("X-Request-ID", "Content-Length")}
    return response.status_code, headers, body


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"count": 2, "mode": "partial"}, 200),
        ({"count": 0, "mode": "partial"}, 400),
        ({"count": 1, "mode": "partial", "colour": "red"}, 400),
        ({"count": "2", "mode": "partial"}, 200),  # coerced by the serializer on both paths
        ({"count": 61, "mode": "partial"}, 403),
        ({"count": 30, "mode": "all_or_nothing"}, 409),
        ({"count": 41, "mode": "partial"}, 429),
        ([1, 2], 400),
    ],
)
def test_fast_and_django_answer_alike(make_client, seed, extracts_run_by_fast, body, status):
    seed(n=20)
    first, django = clients(make_client(max_count_per_request=60, proxies_per_minute=40).plaintext)
    assert first.post(URL, ORDINARY, format="json").status_code == 200
    assert extracts_run_by_fast == []  # the first request verified the key: Django's path

    answered = FastFirstHandler.answered
    response = first.post(URL, body, format="json")
    assert len(extracts_run_by_fast) == 1, "fast_extract.py did not run the extract"
    assert FastFirstHandler.answered == answered + 1  # its errors too
    reference = django.post(URL, body, format="json")
    assert len(extracts_run_by_fast) == 1

    assert response.status_code == status, response.content
    assert comparable(response) == comparable(reference)
    assert list(response.headers) == list(reference.headers)  # the same headers, in DRF's order
    assert response.content == JSONRenderer().render(json.loads(response.content))  # DRF's bytes
    assert int(response["Content-Length"]) == len(response.content)
    if status == 200:
        assert response["X-Request-ID"] and response["X-Request-ID"] != reference["X-Request-ID"]
    else:  # the error answer names the extract fast_extract.py ran
        assert response.json()["request_id"] == extracts_run_by_fast[0]


@pytest.mark.parametrize(
    ("content_type", "data", "headers", "status"),
    [
        ("application/json", "{nope", {}, 400),
        ("application/json", '{"count": NaN, "mode": "partial"}', {}, 400),
        # No body is DRF's empty data, as `{}`: one proxy, partial (the defaults).
        ("application/json", "", {}, 200),
        ("text/plain", '{"count": 1, "mode": "partial"}', {}, 415),
        ("application/json", '{"count": 1, "mode": "partial"}', {"Accept": "text/html"}, 406),
        # An empty Accept matches no renderer in DRF: 406, and no proxy taken.
        ("application/json", '{"count": 1, "mode": "partial"}', {"Accept": ""}, 406),
        # Valid, but over fast_extract.py's 64 KiB: Django reads it.
        ("application/json", " " * 70_000 + '{"count": 1, "mode": "partial"}', {}, 200),
        # Too deep for Python's JSON parser: a 400 like any other bad JSON.
        ("application/json", "[" * 100_000, {}, 400),
        ("application/json", "[" * 100_000 + "]" * 100_000, {}, 400),
        # A host outside ALLOWED_HOSTS: Django's 400.
        ("application/json", '{"count": 1, "mode": "partial"}', {"Host": "evil.example"}, 400),
    ],
)
def test_requests_without_an_extract_are_answered_alike(
    make_client, seed, extracts_run_by_fast, content_type, data, headers, status
):
    seed(n=3)
    first, django = clients(make_client().plaintext)
    assert first.post(URL, ORDINARY, format="json").status_code == 200
    response = first.post(URL, data, content_type=content_type, headers=headers)
    assert extracts_run_by_fast == []
    reference = django.post(URL, data, content_type=content_type, headers=headers)
    assert response.status_code == status
    # The same detail too: a body fast_extract.py parsed fails as Django's parser fails it.
    assert comparable(response) == comparable(reference)


def test_the_views_permissions_hold_on_the_fast_path(
    make_client, seed, extracts_run_by_fast, monkeypatch
):
    """A permission added to the view later is never skipped by fast_extract.py: it refuses
    to be built, and the view refuses the request."""
    from django.core.exceptions import ImproperlyConfigured
    from rest_framework.exceptions import PermissionDenied
    from rest_framework.permissions import BasePermission

    from pool_admin.api.views import ExtractView

    class Nobody(BasePermission):
        def has_permission(self, request, view):
            return False

    class Raises(BasePermission):
        def has_permission(self, request, view):
            raise PermissionDenied("not today")

    seed(n=1)
    first, django = clients(make_client().plaintext)
    assert first.post(URL, ORDINARY, format="json").status_code == 200  # the key is cached
    for permission in (Nobody, Raises):
        monkeypatch.setattr(ExtractView, "permission_classes", [permission])
        with pytest.raises(ImproperlyConfigured, match="permission_classes"):
            first.post(URL, ORDINARY, format="json")
        response = django.post(URL, ORDINARY, format="json")
        assert response.status_code == 403 and response.json()["code"] == "forbidden"
    assert extracts_run_by_fast == []
    assert seed.pool.inventory("acme-us") == 0  # the first call's, before the permission


@pytest.mark.parametrize(
    "middleware",
    [
        pytest.param(("MIDDLEWARE", "django.middleware.gzip.GZipMiddleware"), id="MIDDLEWARE"),
        pytest.param(
            ("SITE_MIDDLEWARE", "django.middleware.locale.LocaleMiddleware"), id="SITE_MIDDLEWARE"
        ),
    ],
)
def test_the_fast_path_stays_on_whatever_the_admins_middleware(
    make_client, seed, extracts_run_by_fast, settings, middleware
):
    """It reproduces no middleware: the admin's can change without switching it off (what
    every API answer must carry is held by the tests above, on the project's settings)."""
    name, path = middleware
    seed(n=2)
    setattr(settings, name, [*getattr(settings, name), path])
    first, _ = clients(make_client().plaintext)
    assert first.post(URL, ORDINARY, format="json").status_code == 200  # caches the key
    assert first.post(URL, ORDINARY, format="json").status_code == 200
    assert len(extracts_run_by_fast) == 1


@pytest.mark.parametrize(
    ("overrides", "headers", "status"),
    [
        ({"SECURE_SSL_REDIRECT": True}, {}, 301),
        ({"PREPEND_WWW": True}, {}, 301),
        ({"DISALLOWED_USER_AGENTS": [re.compile("crawler")]}, {"User-Agent": "crawler/1"}, 403),
        ({"ALLOWED_HOSTS": ["api.example"]}, {}, 400),
    ],
)
def test_what_djangos_middleware_redirects_or_refuses_is_left_to_it(
    make_client, seed, extracts_run_by_fast, settings, overrides, headers, status
):
    from pool_admin.api import auth

    seed(n=2)
    key = make_client().plaintext
    assert auth.authenticate_key(key) is not None  # cached: the fast path would take it
    for name, value in overrides.items():
        setattr(settings, name, value)
    first, django = clients(key)
    response = first.post(URL, ORDINARY, format="json", headers=headers)
    reference = django.post(URL, ORDINARY, format="json", headers=headers)
    assert extracts_run_by_fast == []
    assert response.status_code == reference.status_code == status
    assert comparable(response) == comparable(reference)


@pytest.mark.parametrize(
    "attribute", ["renderer_classes", "throttle_classes", "permission_classes"]
)
def test_a_view_configured_unlike_the_fast_path_stops_the_start(monkeypatch, attribute):
    """Not a quiet fallback to Django's path for every extract: the web server's application
    refuses to be built, and ``manage.py check`` (the launcher's start) fails."""
    from django.core.checks import run_checks
    from django.core.exceptions import ImproperlyConfigured
    from rest_framework.permissions import IsAuthenticated
    from rest_framework.renderers import BrowsableAPIRenderer
    from rest_framework.throttling import AnonRateThrottle

    from pool_admin.api.views import ExtractView

    changed = {
        "renderer_classes": [JSONRenderer, BrowsableAPIRenderer],
        "throttle_classes": [AnonRateThrottle],
        "permission_classes": [IsAuthenticated],
    }[attribute]
    monkeypatch.setattr(ExtractView, attribute, changed)
    assert not fast_extract.view_is_as_done_here()
    with pytest.raises(ImproperlyConfigured, match=f"ExtractView.{attribute} is"):
        fast_extract.FastExtract(None)
    [error] = [e for e in run_checks() if e.id == "pool_admin.E003"]
    assert f"ExtractView.{attribute} is" in error.msg and error.is_serious()


def test_the_projects_view_and_route_are_what_the_fast_path_does():
    from django.urls import resolve

    from pool_admin.api.views import ExtractView

    assert fast_extract.view_is_as_done_here()
    assert resolve(fast_extract.EXTRACT_PATH).func.view_class is ExtractView


def _environ(key, body=ORDINARY, path=URL, **extra):
    """The WSGI environ of an extract as the web server hands it over (Host ``api.example``)."""
    return (
        RequestFactory()
        .post(
            path,
            data=json.dumps(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {key}", "Host": "api.example"},
            **extra,
        )
        .environ
    )


def _names(header_list):
    """Headers in order, with the values that differ between requests blanked."""
    return [(k, "" if k in ("X-Request-ID", "Content-Length") else v) for k, v in header_list]


def _call(app, environ):
    out = {}

    def start_response(status, headers, exc_info=None):
        out.update(status=status, headers=headers)

    chunks = app(environ, start_response)
    try:
        body = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    return out["status"], out["headers"], body


@pytest.fixture
def keep_test_connection():
    """What Django's test client does: the real handler's request signals would close the
    test's database connection (it is inside the test's transaction)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@override_settings(ALLOWED_HOSTS=["api.example"])
def test_the_web_servers_application_sends_the_fast_answer_as_django_would(
    make_client, seed, extracts_run_by_fast, keep_test_connection
):
    """pool_admin.wsgi.application: status line, header list and bytes as Django's handler."""
    from pool_admin.wsgi import application, django_application

    seed(n=4)
    key = make_client().plaintext

    def environ(**extra):
        return _environ(key, **extra)

    status, _, _ = _call(application, environ())  # verifies and caches the key: Django's path
    assert status == "200 OK" and extracts_run_by_fast == []
    status, headers, body = _call(application, environ())
    assert len(extracts_run_by_fast) == 1
    ref_status, ref_headers, ref_body = _call(django_application, environ())
    assert len(extracts_run_by_fast) == 1
    assert status == ref_status == "200 OK"

    assert _names(headers) == _names(ref_headers)  # the same headers in the same order
    assert dict(headers)["Content-Length"] == str(len(body))
    assert json.loads(body)["returned"] == json.loads(ref_body)["returned"] == 1
    # Other paths go to Django unchanged.
    status, _, body = _call(
        application, RequestFactory().get("/healthz", HTTP_HOST="api.example").environ
    )
    assert status == "200 OK" and json.loads(body) == {"status": "ok"}


@override_settings(ALLOWED_HOSTS=["api.example"])
def test_an_error_made_here_reads_as_djangos(
    make_client, seed, extracts_run_by_fast, keep_test_connection
):
    """An error answer of fast_extract.py names the request's path as Django does (a script
    prefix that is not ASCII), and a body that cannot be read is answered alike."""
    from pool_admin.wsgi import application, django_application

    seed(n=4)
    key = make_client().plaintext

    def environ(body=ORDINARY):
        return _environ(key, body)

    assert _call(application, environ())[0] == "200 OK"  # caches the key
    bad = {"count": "x", "mode": "partial"}  # a 400 of the extract
    problems = []
    for app in (application, django_application):
        prefixed = environ(bad)
        prefixed["SCRIPT_NAME"] = "/pr\xc3\xa9"  # as WSGI servers pass non-ASCII: latin-1
        status, _, body = _call(app, prefixed)
        assert status.startswith("400"), (app, status)
        problems.append(json.loads(body))
        assert problems[-1].pop("request_id")
    assert problems[0] == problems[1]
    assert problems[0]["code"] == "invalid_request"
    assert problems[0]["instance"] == "/pr\xe9/api/v1/extract"
    assert len(extracts_run_by_fast) == 1

    class Unreadable:
        def read(self, *args):
            raise OSError("client gone")

        readline = read

    answers = []
    for app in (application, django_application):
        cut = environ()
        cut["wsgi.input"] = Unreadable()
        answers.append(_call(app, cut)[0])
    assert answers[0] == answers[1]
    assert len(extracts_run_by_fast) == 1  # no extract without a body


@override_settings(ALLOWED_HOSTS=["api.example"])
@pytest.mark.parametrize("app_name", ["application", "django_application"])
def test_a_body_that_cannot_be_read_counts_as_a_call_on_both_paths(
    make_client, seed, keep_test_connection, app_name
):
    from pool_admin import wsgi

    seed(n=4)
    key = make_client(requests_per_second=2).plaintext
    assert _call(wsgi.application, _environ(key))[0] == "200 OK"  # caches the key; call 1

    class Unreadable:
        def read(self, *args):
            raise OSError("client gone")

        readline = read

    def unreadable():
        cut = _environ(key)
        cut["wsgi.input"] = Unreadable()
        status, _, body = _call(getattr(wsgi, app_name), cut)
        return status, json.loads(body)

    status, problem = unreadable()  # call 2
    assert not status.startswith("429") and problem["request_id"]
    status, problem = unreadable()  # call 3: over 2 per second, the 429 comes first
    assert status.startswith("429") and problem["code"] == "rate_limited"


@pytest.fixture
def hsts_everywhere():
    """SECURE_HSTS_SECONDS set, and what read it at start built again: Django's handler's
    middleware, and the web server's application (yielded)."""
    from pool_admin.wsgi import compose, django_application

    with override_settings(SECURE_HSTS_SECONDS=3600):
        django_application.load_middleware()
        yield compose(django_application)
    django_application.load_middleware()


@override_settings(ALLOWED_HOSTS=["api.example"])
def test_headers_reused_per_kind_of_request_match_djangos(
    make_client, seed, extracts_run_by_fast, keep_test_connection, hsts_everywhere
):
    """The headers fast_extract.py computed at start are kept apart for secure requests (HSTS)
    and the rest."""
    from pool_admin.wsgi import django_application

    application = hsts_everywhere
    seed(n=8)
    key = make_client().plaintext

    def environ(secure):
        return _environ(key, secure=secure)

    assert _call(application, environ(False))[0] == "200 OK"  # caches the key
    for secure in (True, False, True, False):
        status, headers, _ = _call(application, environ(secure))
        _, ref_headers, _ = _call(django_application, environ(secure))
        assert status == "200 OK"
        assert _names(headers) == _names(ref_headers)
        assert ("Strict-Transport-Security" in dict(headers)) is secure
        assert dict(headers)["X-Request-ID"] == extracts_run_by_fast[-1]
    assert len(extracts_run_by_fast) == 4
