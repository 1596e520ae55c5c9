"""What hostile clients sent the API (issue 11, items 10-13 and 15): each answered as problem+json
with a 4xx, never an HTML page or a 500, on both request paths (``api``)."""

from __future__ import annotations

import pytest

from tests.pool_admin.api.test_extract import URL, assert_problem

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
    assert problem["errors"]["mode"] == ['"\U0001f600" is not a valid choice.']
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
