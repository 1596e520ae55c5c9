"""What the admin and the API docs send besides the page: CSP, HSTS, no secret in a cookie."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.staticfiles import finders

from pool_admin.config.models import ApiClient
from tests.harness.commands import run_python

from .config.test_admin import KEY_RE, client_form, url

SCRIPT_TAG = re.compile(r"<script\b[^>]*>", re.IGNORECASE)


def policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    directives = (part.split() for part in header.split(";") if part.strip())
    return {name: values for name, *values in directives}


def inline_scripts(html: str) -> list[str]:
    """Script tags the policy would block: no src, and not a JSON data block."""
    return [
        tag
        for tag in SCRIPT_TAG.findall(html)
        if "src=" not in tag and "application/json" not in tag
    ]


@pytest.fixture
def boss(client):
    user = get_user_model().objects.create_superuser("boss", password="a-Long-pass-123")
    client.force_login(user)
    return user


@pytest.mark.django_db
def test_a_new_keys_message_stays_on_the_server(client, boss):
    saved = client.post(url(ApiClient, "add"), client_form(issue_key="on"))
    assert saved.status_code == 302
    assert "messages" not in saved.cookies  # a signed cookie is readable by anyone who has it
    shown = client.get(saved["Location"])
    assert len(KEY_RE.findall(shown.content.decode())) == 1
    assert all(not KEY_RE.search(morsel.value) for morsel in client.cookies.values())


@pytest.mark.django_db
@pytest.mark.parametrize(
    "page", ["/admin/login/", "/admin/", "/admin/config/apiclient/", "/admin/axes/accessattempt/"]
)
def test_admin_pages_carry_a_policy_that_allows_no_inline_script(client, page):
    if page != "/admin/login/":  # the login page redirects a logged-in user
        boss = get_user_model().objects.create_superuser("boss", password="a-Long-pass-123")
        client.force_login(boss)
    response = client.get(page)
    assert response.status_code == 200
    directives = policy(response)
    assert directives["script-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"] and directives["frame-ancestors"] == ["'none'"]
    assert inline_scripts(response.content.decode()) == []


def test_the_api_docs_work_under_the_policy(client, settings):
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert policy(docs)["script-src"] == ["'self'"]
    html = docs.content.decode()
    assert inline_scripts(html) == []
    sources = re.findall(r'<script src="([^"]+)"', html)
    assert sources and all(src.startswith("/") and not src.startswith("//") for src in sources)
    assert any(not src.startswith(settings.STATIC_URL) for src in sources)  # the start-up script
    for src in sources:  # every script, Swagger UI's own start-up script included, exists
        if src.startswith(settings.STATIC_URL):
            assert finders.find(src.removeprefix(settings.STATIC_URL)), src
        else:
            assert client.get(src).status_code == 200, src
    assert client.get("/api/schema/").status_code == 200  # connect-src 'self': what it fetches


def hsts_seconds(**env) -> int:
    done = run_python("-c", "import pool_admin.settings as s; print(s.SECURE_HSTS_SECONDS)", **env)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def test_hsts_is_sent_once_https_is_configured(client, settings):
    assert hsts_seconds(SECURE_COOKIES="1") >= 180 * 24 * 3600
    assert hsts_seconds(SECURE_COOKIES="0") == 0  # plain-HTTP make run: never pin HTTPS
    settings.SECURE_HSTS_SECONDS = hsts_seconds(SECURE_COOKIES="1")
    assert "max-age=" in client.get("/healthz", secure=True)["Strict-Transport-Security"]
    assert "Strict-Transport-Security" not in client.get("/healthz")
