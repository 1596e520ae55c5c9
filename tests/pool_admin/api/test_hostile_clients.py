"""What hostile clients sent the API (issue 11, items 10-13 and 15): each answered as problem+json
with a 4xx, never an HTML page or a 500, on both request paths (``api``)."""

from __future__ import annotations

import io
import json

import pytest
from django.test import override_settings

from tests.pool_admin.api.test_extract import URL, assert_problem
from tests.pool_admin.api.test_fast_extract import _call, _environ, keep_test_connection

__all__ = ["keep_test_connection"]  # a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

OUTCOME_URL = "/api/v1/proxies/acme-us-p0/outcome"
ONE = '{"count": 1, "mode": "partial"}'


def post(client, url, text, **extra):
    return client.post(url, text, content_type="application/json", **extra)


@pytest.mark.parametrize(
    ("url", "text"),
    [
        pytest.param(URL, '{"count": 1, "mode": "\\ud800"}', id="mode"),
        pytest.param(URL, '{"count": 1, "mode": "partial", "\\ud800": 1}', id="field-name"),
        pytest.param(
            URL,
            '{"count": 1, "mode": "partial", "filters": {"protocol": "\\udfff"}}',
            id="protocol",
        ),
        pytest.param(
            URL, '{"count": 1, "mode": "partial", "filters": {"\\ud800x": "us"}}', id="filter-key"
        ),
        pytest.param(OUTCOME_URL, '{"outcome": "\\ud800"}', id="outcome"),
        pytest.param(OUTCOME_URL, '{"outcome": "ok", "\\udbff": 1}', id="outcome-field"),
        # A low surrogate first and a high one last are no pair either.
        pytest.param(URL, '{"count": 1, "mode": "\\udc00\\ud800"}', id="reversed-pair"),
    ],
)
def test_a_lone_surrogate_escape_is_a_400(api, make_client, seed, url, text):
    seed(n=2)
    client = api(make_client().plaintext)
    assert post(client, URL, ONE).status_code == 200  # caches the key: the fast path next
    problem = assert_problem(post(client, url, text), 400, "invalid_request")
    assert "surrogate" in problem["detail"]
    assert seed.pool.inventory("acme-us") == 1  # nothing taken


def test_a_surrogate_pair_is_a_character_like_any_other(api, make_client, seed):
    seed(n=1)
    client = api(make_client().plaintext)
    problem = assert_problem(
        post(client, URL, '{"count": 1, "mode": "\\ud83d\\ude00"}'), 400, "invalid_request"
    )
    assert problem["errors"]["mode"] == [
        '"\U0001f600" is not a valid choice; use one of "partial", "all_or_nothing".'
    ]
    assert post(client, URL, ONE).status_code == 200


@pytest.mark.parametrize("url", [URL, OUTCOME_URL])
def test_a_body_over_the_limit_is_a_413_and_takes_the_request_unit(
    api, make_client, seed, settings, url
):
    seed(n=2)
    client = api(make_client(requests_per_second=2).plaintext)
    assert post(client, URL, ONE).status_code == 200  # call 1
    text = '{"count": 1, "mode": "partial", "pad": "' + "x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    problem = assert_problem(post(client, url, text + '"}'), 413, "payload_too_large")  # call 2
    assert problem["request_id"]
    assert_problem(post(client, URL, ONE), 429, "rate_limited")  # call 3: over 2 per second
    assert seed.pool.inventory("acme-us") == 1


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/api/v1/extract/"),
        ("get", "/api/v1/nope"),
        ("post", "/api/v1/proxies/../x/outcome"),
        ("post", "/api/v1/proxies/p1/outcome/"),
        ("get", "/api/nope"),
        ("get", "/api/v2/extract"),
    ],
)
def test_a_path_the_api_does_not_have_is_a_404_problem(api, make_client, method, path):
    client = api(make_client().plaintext)
    response = post(client, path, ONE) if method == "post" else client.get(path)
    problem = assert_problem(response, 404, "not_found")
    assert problem["instance"] == path


def test_a_request_without_a_host_is_a_400_problem(api, make_client):
    """HTTP/1.0 without Host: the web server passes an empty Host (granian)."""
    client = api(make_client().plaintext)
    response = post(client, URL, ONE, SERVER_PROTOCOL="HTTP/1.0", HTTP_HOST="")
    assert_problem(response, 400, "invalid_request")
    response = client.get("/api/v1/nope", HTTP_HOST="evil.example")
    assert_problem(response, 400, "invalid_request")


def test_pages_outside_the_api_keep_djangos_error_pages(client):
    response = client.get("/nope")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_an_error_outside_drfs_views_under_the_api_is_a_500_problem(rf):
    from pool_admin.api import error_views

    response = error_views.server_error(rf.get("/api/v1/extract"))
    assert response.status_code == 500 and response["Content-Type"] == "application/problem+json"
    assert b'"code":"internal_error"' in response.content
    assert error_views.server_error(rf.get("/admin/"))["Content-Type"].startswith("text/html")


def chunked(key, text, coding="chunked", **headers):
    """An extract's environ as the web server passes a chunked body: decoded, with no length."""
    environ = _environ(key, **headers)
    del environ["CONTENT_LENGTH"]
    environ["HTTP_TRANSFER_ENCODING"] = coding
    environ["wsgi.input"] = io.BytesIO(text.encode())
    return environ


#: An Accept the fast path leaves to Django (the same answer, Django's path).
TO_DJANGO = {"HTTP_ACCEPT": "application/json, */*"}


@override_settings(ALLOWED_HOSTS=["api.example"])
@pytest.mark.parametrize("extra", [{}, TO_DJANGO], ids=["fast", "django"])
def test_a_chunked_body_is_read(make_client, seed, keep_test_connection, extra):
    """Chunked bodies are the web tier's (wsgi.compose), ahead of both paths."""
    from pool_admin.wsgi import application

    seed(n=3)
    key = make_client().plaintext
    assert _call(application, _environ(key))[0] == "200 OK"  # caches the key
    status, _, body = _call(application, chunked(key, '{"count": 2, "mode": "partial"}', **extra))
    assert status == "200 OK", body
    assert json.loads(body)["returned"] == 2


@override_settings(ALLOWED_HOSTS=["api.example"], DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
@pytest.mark.parametrize("extra", [{}, TO_DJANGO], ids=["fast", "django"])
def test_a_chunked_body_over_the_limit_is_a_413_and_takes_the_request_unit(
    make_client, seed, keep_test_connection, extra
):
    from pool_admin.wsgi import application

    seed(n=3)
    key = make_client(requests_per_second=2).plaintext
    assert _call(application, _environ(key))[0] == "200 OK"  # call 1
    text = '{"count": 1, "mode": "partial", "pad": "' + "x" * 2000 + '"}'
    environ = chunked(key, text, **extra)
    status, _, body = _call(application, environ)  # call 2
    assert status.startswith("413") and json.loads(body)["code"] == "payload_too_large"
    assert environ["wsgi.input"].tell() <= 1001  # nothing read past the limit
    status, _, body = _call(application, _environ(key))  # call 3
    assert status.startswith("429"), body


@override_settings(ALLOWED_HOSTS=["api.example"])
@pytest.mark.parametrize("coding", ["gzip, chunked", "gzip"])
def test_another_transfer_coding_is_a_411(make_client, seed, keep_test_connection, coding):
    from pool_admin.wsgi import application

    seed(n=1)
    key = make_client().plaintext
    status, headers, body = _call(application, chunked(key, ONE, coding))
    assert status == "411 Length Required"
    assert dict(headers)["Content-Type"] == "application/problem+json"
    assert json.loads(body)["code"] == "length_required"
    assert seed.pool.inventory("acme-us") == 1


def test_extract_answers_are_never_cached(api, make_client, seed):
    """They carry proxy passwords (issue 11, item 15)."""
    seed(n=2)
    client = api(make_client().plaintext)
    for _ in range(2):  # the second on the fast path
        response = post(client, URL, ONE, headers={"Idempotency-Key": "k1"})
        assert response.status_code == 200 and response.json()["proxies"][0]["password"]
        assert response["Cache-Control"] == "no-store"
    refused = post(client, URL, '{"count": 0, "mode": "partial"}')
    assert refused.status_code == 400 and refused["Cache-Control"] == "no-store"
