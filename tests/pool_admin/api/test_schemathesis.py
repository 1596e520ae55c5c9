"""schemathesis against the project's own OpenAPI schema (``/api/schema/``), through the WSGI app.

Every operation of the client API is fuzzed with valid (positive) and invalid (negative) inputs,
authenticated as a client allowed everything, against a stocked pool on this test's prefix.
Each response must not be a 5xx and must match the schema: a documented status code, its
content type (problem+json for errors) and its body.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from pool_admin.wsgi import application

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
MAX_EXAMPLES = 50  # per operation and generation mode
OUTCOME = "POST /api/v1/proxies/{proxy_id}/outcome"
API_OPERATIONS = {"POST /api/v1/extract", "GET /api/v1/inventory", OUTCOME}


@pytest.fixture
def schema():
    # As Django's test client does: a request through the real WSGI app must not close the
    # connection that holds the test's transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/", application)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def stocked(seed, make_client):
    """A client allowed everything, with limits no run reaches, and proxies on two upstreams."""
    for region in ("us", "eu"):
        seed(f"acme-{region}", n=150, region=region)
    seed("acme-us", n=50, region="us", protocol="socks5", carrier=None)
    return make_client(
        "fuzzer",
        requests_per_second=100_000,
        proxies_per_minute=10_000_000,
        max_count_per_request=1_000,
        may_view_inventory=True,
    )


def _operations(schema):
    found = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        found[f"{operation.method.upper()} {operation.path}"] = operation
    return found


def test_the_schema_documents_every_client_operation(schema):
    assert set(_operations(schema)) >= API_OPERATIONS


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("label", sorted(API_OPERATIONS))
def test_schemathesis_finds_no_server_error_and_no_schema_violation(schema, stocked, label, mode):
    operation = _operations(schema)[label]
    auth = {"Authorization": f"Bearer {stocked.plaintext}"}
    statuses: set[int] = set()

    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        response = case.call(headers=auth)  # schemathesis drops it to test its absence
        statuses.add(response.status_code)
        case.validate_response(response, checks=CHECKS, headers=auth)

    run()
    if mode == GenerationMode.POSITIVE:
        # Valid inputs reached the pool, not only errors. A generated proxy ID is never one
        # the fuzzer extracted: the pool's answer to those is 404.
        assert (404 if label == OUTCOME else 200) in statuses, statuses
