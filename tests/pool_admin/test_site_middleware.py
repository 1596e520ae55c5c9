"""SITE_MIDDLEWARE runs for the admin and every other page, and not for the client API."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.test import Client, override_settings
from django.urls import reverse

from pool_admin.api.middleware import API_PREFIX, SiteOnlyMiddleware


def test_the_api_is_mounted_under_the_skipped_prefix():
    assert reverse("api:extract").startswith(API_PREFIX)
    assert reverse("api:inventory").startswith(API_PREFIX)
    assert not reverse("schema").startswith(API_PREFIX)  # the schema and docs keep everything


def test_the_admins_middleware_is_all_in_site_middleware():
    site = settings.SITE_MIDDLEWARE
    for name in ("SessionMiddleware", "AuthenticationMiddleware", "MessageMiddleware"):
        assert any(path.endswith(f".{name}") for path in site), name
    assert site.index("django.contrib.sessions.middleware.SessionMiddleware") < site.index(
        "django.contrib.auth.middleware.AuthenticationMiddleware"
    )


@pytest.mark.django_db
def test_admin_pages_keep_csrf_sessions_and_frame_options():
    client = Client(enforce_csrf_checks=True)
    page = client.get("/admin/login/")
    assert page.status_code == 200
    assert page["X-Frame-Options"] == "DENY"
    assert "csrftoken" in page.cookies
    # No CSRF token: refused by CsrfViewMiddleware's process_view, run through the wrapper.
    refused = client.post("/admin/login/", {"username": "a", "password": "b"})
    assert refused.status_code == 403
    token = page.cookies["csrftoken"].value
    accepted = client.post(
        "/admin/login/", {"username": "a", "password": "b", "csrfmiddlewaretoken": token}
    )
    assert accepted.status_code == 200  # the form again, with its error: past the CSRF check


@pytest.mark.django_db
def test_api_responses_skip_the_site_middleware(client):
    response = client.post(f"{API_PREFIX}extract", {}, content_type="application/json")
    assert response.status_code == 401
    assert "X-Frame-Options" not in response  # XFrameOptionsMiddleware did not run
    assert not response.cookies
    assert response["X-Content-Type-Options"] == "nosniff"  # SecurityMiddleware still runs
    assert int(response["Content-Length"]) == len(response.content)  # so does CommonMiddleware


class WithExceptionHook:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        return None


def test_middleware_with_hooks_the_wrapper_cannot_run_is_refused():
    path = f"{__name__}.WithExceptionHook"
    with (
        override_settings(SITE_MIDDLEWARE=[path]),
        pytest.raises(ImproperlyConfigured, match="process_exception"),
    ):
        SiteOnlyMiddleware(lambda request: HttpResponse())
