"""ExtractView's direct path answers exactly as DRF's full path does (pool_admin/api/views.py)."""

from __future__ import annotations

import json

import pytest
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from tests.pool_admin.api.test_extract import URL

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

DIRECT = {}  # no Accept header: the direct path
FULL = {"Accept": "application/json, */*"}  # the same negotiation result, through DRF


@pytest.fixture
def full_path_calls(monkeypatch):
    """How many requests went through DRF's dispatch."""
    calls = []
    original = APIView.dispatch

    def spy(self, request, *args, **kwargs):
        calls.append(request.path)
        return original(self, request, *args, **kwargs)

    monkeypatch.setattr(APIView, "dispatch", spy)
    return calls


def comparable(response):
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
def test_direct_and_full_path_answer_alike(api, make_client, seed, full_path_calls, body, status):
    seed(n=20)
    client = api(make_client(max_count_per_request=60, proxies_per_minute=40).plaintext)
    assert client.post(URL, {"count": 1, "mode": "partial"}, format="json").status_code == 200
    assert len(full_path_calls) == 1  # the first request verified the key: DRF's path

    direct = client.post(URL, body, format="json", headers=DIRECT)
    assert len(full_path_calls) == 1, "the direct path was not taken"
    full = client.post(URL, body, format="json", headers=FULL)
    assert len(full_path_calls) == 2

    assert direct.status_code == status, direct.content
    assert comparable(direct) == comparable(full)
    assert direct.content == JSONRenderer().render(json.loads(direct.content))  # DRF's bytes
    assert int(direct["Content-Length"]) == len(direct.content)
    if status == 200:
        assert direct["X-Request-ID"] and direct["X-Request-ID"] != full["X-Request-ID"]


@pytest.mark.parametrize(
    ("content_type", "data", "headers", "status"),
    [
        ("application/json", "{nope", {}, 400),
        ("application/json", '{"count": NaN, "mode": "partial"}', {}, 400),
        ("application/json", "", {}, 400),
        ("text/plain", '{"count": 1, "mode": "partial"}', {}, 415),
        ("application/json", '{"count": 1, "mode": "partial"}', {"Accept": "text/html"}, 406),
        # Valid, but over the direct path's 64 KiB: DRF reads it.
        ("application/json", " " * 70_000 + '{"count": 1, "mode": "partial"}', {}, 200),
        # Too deep for Python's JSON parser: DRF's path, and a 400 like any other bad JSON.
        ("application/json", "[" * 100_000, {}, 400),
        ("application/json", "[" * 100_000 + "]" * 100_000, {}, 400),
    ],
)
def test_other_requests_take_drfs_full_path(
    api, make_client, seed, full_path_calls, content_type, data, headers, status
):
    seed(n=3)
    client = api(make_client().plaintext)
    assert client.post(URL, {"count": 1, "mode": "partial"}, format="json").status_code == 200
    response = client.post(URL, data, content_type=content_type, headers=headers)
    assert len(full_path_calls) == 2
    assert status is None or response.status_code == status
    if status != 200:
        assert response["Content-Type"] == "application/problem+json"


def test_the_views_permissions_hold_on_the_direct_path(
    api, make_client, seed, full_path_calls, monkeypatch
):
    """A permission added to the view later is never skipped by the direct path."""
    from rest_framework.permissions import BasePermission

    from pool_admin.api.views import ExtractView

    class Nobody(BasePermission):
        def has_permission(self, request, view):
            return False

    seed(n=1)
    client = api(make_client().plaintext)
    assert client.post(URL, {"count": 1, "mode": "partial"}, format="json").status_code == 200
    monkeypatch.setattr(ExtractView, "permission_classes", [Nobody])
    response = client.post(URL, {"count": 1, "mode": "partial"}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    assert len(full_path_calls) == 2  # the first request's key caching, then DRF refusing
