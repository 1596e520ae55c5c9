"""The OpenAPI schema's error answers and response headers, and the API's answers against them.

Every 429 and 503 declares ``Retry-After`` (required, whole seconds); the 200 of an extract or
an outcome declares ``X-Request-ID``. The answers the API gives carry what is declared, on
both request paths (``api``). Earlier tests check ``Retry-After`` on one answer each:
test_extract.py (503 without PostgreSQL or Redis), test_outcome.py (429, 503 without Redis),
test_ratelimit.py (its value).
"""

from __future__ import annotations

import jsonschema
import pytest
import yaml
from django.core.management import call_command

from activity.errors import StoreUnavailable
from activity.redis import RedisPool

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

PROBLEM_JSON = "application/problem+json"
EXTRACT = ("post", "/api/v1/extract")
INVENTORY = ("get", "/api/v1/inventory")
OUTCOME = ("post", "/api/v1/proxies/{proxy_id}/outcome")
ONE = {"count": 1, "mode": "partial"}


@pytest.fixture
def schema(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


def _operations(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in {"get", "put", "post", "patch", "delete"}:
                yield (method, path), operation


def _header_value(value: str, header_schema: dict) -> object:
    """A header's text as its schema reads it (OpenAPI's ``simple`` style)."""
    if header_schema.get("type") == "integer":
        assert value.isascii() and value.isdigit(), value
        return int(value)
    return value


def assert_declared_headers(schema, operation, response):
    """``response`` carries every header its operation declares for its status, as declared."""
    method, path = operation
    declared = schema["paths"][path][method]["responses"][str(response.status_code)]
    headers = declared.get("headers", {})
    for name, header in headers.items():
        if header.get("required"):
            assert response.has_header(name), (name, dict(response.items()))
        if response.has_header(name):
            jsonschema.validate(_header_value(response[name], header["schema"]), header["schema"])
    return headers


def test_every_429_and_503_declares_a_required_integer_retry_after(schema):
    found = set()
    for operation, spec in _operations(schema):
        for status in ("429", "503"):
            if status not in spec["responses"]:
                continue
            found.add((operation, status))
            header = spec["responses"][status].get("headers", {}).get("Retry-After")
            assert header is not None, (operation, status)
            assert header["required"] is True
            assert header["schema"] == {"type": "integer", "minimum": 1}
    assert found == {
        (EXTRACT, "429"),
        (EXTRACT, "503"),
        (OUTCOME, "429"),
        (OUTCOME, "503"),
        (INVENTORY, "429"),
        (INVENTORY, "503"),
        *(
            (("post", f"/api/v1/gateway/{p}"), "503")
            for p in ("sessions", "snapshot/ack", "reports")
        ),
        (("get", "/api/v1/gateway/snapshot"), "503"),
    }


def test_retry_after_is_declared_on_429_and_503_only(schema):
    for operation, spec in _operations(schema):
        for status, response in spec["responses"].items():
            if status not in ("429", "503"):
                assert "Retry-After" not in response.get("headers", {}), (operation, status)


def test_x_request_id_is_declared_on_the_200_of_extract_and_outcome(schema):
    for operation, spec in _operations(schema):
        headers = spec["responses"]["200"].get("headers", {})
        if operation in (EXTRACT, OUTCOME):
            assert headers["X-Request-ID"]["required"] is True
        else:
            assert "X-Request-ID" not in headers
        for status, response in spec["responses"].items():
            if status != "200":
                assert "X-Request-ID" not in response.get("headers", {}), (operation, status)


def test_406_everywhere_and_415_on_posts_are_listed_as_problem_json(schema):
    for operation, spec in _operations(schema):
        responses = spec["responses"]
        expected = {"406", "415"} if operation[0] == "post" else {"406"}
        listed = {status for status in ("405", "406", "415") if status in responses}
        assert listed == expected, operation  # 405: for methods no operation has
        for status in expected:
            content = responses[status]["content"]
            assert set(content) == {PROBLEM_JSON}
            assert content[PROBLEM_JSON]["schema"] == {"$ref": "#/components/schemas/Problem"}


@pytest.mark.parametrize("status", ["408", "411", "413"])
def test_408_411_and_413_are_listed_on_posts_as_problem_json(schema, status):
    for operation, spec in _operations(schema):
        responses = spec["responses"]
        assert (status in responses) is (operation[0] == "post"), operation
        if operation[0] == "post":
            content = responses[status]["content"]
            assert content[PROBLEM_JSON]["schema"] == {"$ref": "#/components/schemas/Problem"}


def test_the_extracts_200_declares_cache_control_no_store(schema):
    header = schema["paths"]["/api/v1/extract"]["post"]["responses"]["200"]["headers"]
    assert header["Cache-Control"]["required"] is True
    assert header["Cache-Control"]["schema"] == {"type": "string", "enum": ["no-store"]}


def test_the_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yaml"))
    assert "Retry-After" in (tmp_path / "s.yaml").read_text()


def _client(api, make_client, **fields):
    return api(make_client(may_view_inventory=True, **fields).plaintext)


def test_a_429_carries_the_declared_retry_after(api, make_client, seed, schema):
    seed(n=3)
    client = _client(api, make_client, requests_per_second=1)
    assert client.post("/api/v1/extract", ONE, format="json").status_code == 200
    limited = client.post("/api/v1/extract", ONE, format="json")
    assert limited.status_code == 429
    assert "Retry-After" in assert_declared_headers(schema, EXTRACT, limited)

    limited = client.post("/api/v1/proxies/p1/outcome", {"outcome": "ok"}, format="json")
    assert limited.status_code == 429
    assert "Retry-After" in assert_declared_headers(schema, OUTCOME, limited)

    limited = client.get("/api/v1/inventory")
    assert limited.status_code == 429
    assert "Retry-After" in assert_declared_headers(schema, INVENTORY, limited)


def test_a_503_carries_the_declared_retry_after(api, make_client, seed, schema, monkeypatch):
    seed(n=3)
    client = _client(api, make_client)

    def unavailable(self, *args):
        raise StoreUnavailable("store unavailable")

    for method in ("extract", "report_outcome", "upstream_inventory"):
        monkeypatch.setattr(RedisPool, method, unavailable)
    answers = {
        EXTRACT: client.post("/api/v1/extract", ONE, format="json"),
        OUTCOME: client.post("/api/v1/proxies/p1/outcome", {"outcome": "ok"}, format="json"),
        INVENTORY: client.get("/api/v1/inventory"),
    }
    for operation, response in answers.items():
        assert response.status_code == 503, (operation, response.content)
        assert response.json()["code"] == "store_unavailable"
        assert "Retry-After" in assert_declared_headers(schema, operation, response)


def test_a_200_carries_the_declared_x_request_id(api, make_client, seed, schema):
    seed(n=3)
    client = _client(api, make_client)
    taken = client.post("/api/v1/extract", ONE, format="json")
    assert taken.status_code == 200
    assert "X-Request-ID" in assert_declared_headers(schema, EXTRACT, taken)
    [proxy] = taken.json()["proxies"]
    reported = client.post(f"/api/v1/proxies/{proxy['id']}/outcome", {"outcome": "ok"}, "json")
    assert reported.status_code == 200
    assert "X-Request-ID" in assert_declared_headers(schema, OUTCOME, reported)
    inventory = client.get("/api/v1/inventory")
    assert inventory.status_code == 200 and not inventory.has_header("X-Request-ID")


HTML = {"Accept": "text/html"}
CODES = {405: "method_not_allowed", 406: "not_acceptable", 415: "unsupported_media_type"}


@pytest.mark.parametrize(
    ("method", "url", "kwargs", "status", "allow"),
    [
        ("post", "/api/v1/extract", {"data": "{}", "content_type": "text/plain"}, 415, None),
        (
            "post",
            "/api/v1/proxies/p1/outcome",
            {"data": "<x/>", "content_type": "text/xml"},
            415,
            None,
        ),
        ("post", "/api/v1/extract", {"data": ONE, "format": "json", "headers": HTML}, 406, None),
        ("get", "/api/v1/inventory", {"headers": {"Accept": "application/xml"}}, 406, None),
        ("get", "/api/v1/extract", {}, 405, "POST, OPTIONS"),
        ("post", "/api/v1/inventory", {"data": {}, "format": "json"}, 405, "GET, HEAD, OPTIONS"),
        ("delete", "/api/v1/proxies/p1/outcome", {}, 405, "POST, OPTIONS"),
    ],
)
def test_405_406_and_415_are_problem_json(
    api, make_client, seed, method, url, kwargs, status, allow
):
    """406 and 415 as the schema lists them; 405 (no operation to list it under) with Allow."""
    seed(n=3)
    response = getattr(_client(api, make_client), method)(url, **kwargs)
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM_JSON
    assert response.json()["status"] == status
    assert response.json()["code"] == CODES[status]
    if allow is not None:
        assert response["Allow"] == allow
