"""GET /api/v1/inventory and the OpenAPI schema."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml

from activity import HealthUpdate, ProxyState
from activity.errors import ScanBudgetExhausted
from pool_admin import bootstrap

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


def test_inventory_lists_the_upstreams_the_client_may_see(api, make_client, seed):
    seed("acme-us", n=3)
    seed("acme-eu", n=1, region="eu")
    everyone = api(make_client(may_view_inventory=True).plaintext).get("/api/v1/inventory")
    assert everyone.status_code == 200
    rows = {row["upstream"]: row for row in everyone.json()["upstreams"]}
    assert set(rows) == {"acme-us", "acme-eu"}
    assert rows["acme-us"]["unextracted"] == 3 and rows["acme-eu"]["unextracted"] == 1
    assert rows["acme-us"]["available"] is True
    assert rows["acme-us"]["managed"] == 3 and rows["acme-us"]["available_slots"] == 3
    assert rows["acme-us"]["extractable"] == 3

    only_eu = make_client("c2", allowed=["acme-eu"], may_view_inventory=True)
    only_eu = api(only_eu.plaintext).get("/api/v1/inventory")
    assert [row["upstream"] for row in only_eu.json()["upstreams"]] == ["acme-eu"]


def test_inventory_marks_an_upstream_unavailable_on_scan_budget(
    api, make_client, seed, monkeypatch
):
    seed(n=1)
    client = api(make_client(may_view_inventory=True).plaintext)
    pool = bootstrap.get_pool()

    def exhausted(upstream_id):
        raise ScanBudgetExhausted("scan budget exhausted")

    monkeypatch.setattr(pool, "upstream_inventory", exhausted)
    response = client.get("/api/v1/inventory")
    assert response.status_code == 200
    row = response.json()["upstreams"][0]
    assert row["available"] is False and row["managed"] is None
    assert row["extractable"] is None and row["unextracted"] is None


def test_extractable_is_what_can_be_drawn_and_unextracted_is_every_record(api, make_client, seed):
    """An unhealthy record is unextracted (the fetch side's measure) but cannot be drawn."""
    ids = seed("acme-us", n=3)
    now = datetime.now(UTC)
    seed.pool.apply_health([HealthUpdate(ids[0], ProxyState.UNHEALTHY, now)])
    client = api(make_client(may_view_inventory=True).plaintext)
    [row] = [
        r for r in client.get("/api/v1/inventory").json()["upstreams"] if r["upstream"] == "acme-us"
    ]
    assert (row["extractable"], row["unextracted"]) == (2, 3)
    assert client.post("/api/v1/extract", {"count": 5}, format="json").json()["returned"] == 2


def test_inventory_only_for_clients_allowed_to_see_it(api, make_client, seed):
    seed(n=1)
    response = api(make_client().plaintext).get("/api/v1/inventory")
    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "forbidden"
    assert "may see inventory" in response.json()["detail"]


def test_inventory_calls_take_the_requests_per_second_limit(api, make_client, seed):
    seed(n=1)
    client = api(make_client(may_view_inventory=True, requests_per_second=2).plaintext)
    assert client.get("/api/v1/inventory").status_code == 200
    assert (
        client.post("/api/v1/extract", {"count": 1, "mode": "partial"}, format="json").status_code
        == 200
    )
    refused = client.get("/api/v1/inventory")
    assert refused.status_code == 429
    assert refused.json()["code"] == "rate_limited"
    assert int(refused["Retry-After"]) >= 1


def test_inventory_needs_a_key(api):
    response = api().get("/api/v1/inventory")
    assert response.status_code == 401
    assert response.json()["code"] == "unauthenticated"


def test_schema_lists_both_paths_with_bearer_security(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    paths = schema["paths"]
    assert "/api/v1/extract" in paths and "/api/v1/inventory" in paths
    post = paths["/api/v1/extract"]["post"]
    assert {"200", "400", "401", "403", "409", "503"} <= set(post["responses"])
    assert "application/problem+json" in post["responses"]["409"]["content"]
    assert {"ApiKeyAuth": []} in post["security"]
    scheme = schema["components"]["securitySchemes"]["ApiKeyAuth"]
    assert scheme == {**scheme, "type": "http", "scheme": "bearer"}
    assert "Idempotency-Key" in {p["name"] for p in post.get("parameters", [])}
