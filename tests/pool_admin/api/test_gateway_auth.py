"""WorkerTokenAuthentication (pool_admin/api/gateway_auth.py): a gateway worker's token over a
test-only view (the control API's views are not built here), its cache, PostgreSQL down, and
API keys and worker tokens never standing for each other."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from activity.types import LABEL_PATTERN
from pool_admin import bootstrap
from pool_admin.api import auth
from pool_admin.api.gateway_auth import (
    IsWorker,
    WorkerTokenAuthentication,
    authenticate_token,
    worker_of,
)
from pool_admin.config.models import GatewayWorker, WorkerGroup, WorkerToken
from pool_admin.localservices import free_port, postgres_answers
from tests.pool_admin.api.test_extract import assert_problem, extract
from tests.pool_admin.api.test_extract_faults import default_database_on, stop_immediately

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

PATH = "/api/v1/gateway/test-whoami"


class WhoAmI(APIView):
    """What a control API view sees of its worker."""

    authentication_classes = [WorkerTokenAuthentication]
    permission_classes = [IsWorker]

    def get(self, request: Request) -> Response:
        w = worker_of(request)
        return Response(
            {
                "worker": w.worker,
                "worker_id": w.worker_id,
                "token_prefix": w.token_prefix,
                "group": w.group,
                "target_capacity": w.target_capacity,
                "allowed_upstreams": sorted(w.allowed_upstreams),
            }
        )


def call(authorization: str | None = None) -> Response:
    headers = {} if authorization is None else {"HTTP_AUTHORIZATION": authorization}
    response = WhoAmI.as_view()(APIRequestFactory().get(PATH, **headers))
    response.render()
    return response


def as_worker(plaintext: str) -> Response:
    return call(f"Bearer {plaintext}")


def problem(response: Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = json.loads(response.content)
    assert (body["status"], body["code"]) == (status, code)
    return body


def test_a_worker_token_authenticates_its_worker(make_worker):
    w = make_worker()
    response = as_worker(w.plaintext)
    assert response.status_code == 200, response.content
    assert json.loads(response.content) == {
        "worker": "edge-1",
        "worker_id": "edge-1",
        "token_prefix": w.token.prefix,
        "group": "edge-us",
        "target_capacity": 40,
        "allowed_upstreams": ["acme-us"],
    }
    assert re.fullmatch(LABEL_PATTERN, authenticate_token(w.plaintext).worker_id)
    w.token.refresh_from_db()
    assert w.token.last_used_at is not None


def test_a_group_without_upstreams_may_use_all(make_worker):
    w = make_worker(group="edge-any")
    w.group.allowed_upstreams.clear()
    assert authenticate_token(w.plaintext).allowed_upstreams == frozenset()


def test_missing_bad_revoked_and_disabled_tokens_are_401(make_worker):
    w = make_worker()
    missing = problem(call(), 401, "unauthenticated")
    assert "worker token" in missing["detail"]
    assert call()["WWW-Authenticate"].startswith("Bearer")
    tampered = w.plaintext[:-2] + ("zz" if not w.plaintext.endswith("zz") else "yy")
    for wrong in (tampered, "garbage", "pw_", w.token.prefix):
        body = problem(as_worker(wrong), 401, "unauthenticated")
        assert "worker token" in body["detail"]
    problem(call(f"Basic {w.plaintext}"), 401, "unauthenticated")
    problem(call(f"Bearer {w.plaintext} extra"), 401, "unauthenticated")

    assert as_worker(w.plaintext).status_code == 200
    w.token.revoke()
    bootstrap.worker_token_cache().clear()  # what the cache TTL does within 30 s
    problem(as_worker(w.plaintext), 401, "unauthenticated")

    off = make_worker("edge-2", enabled=False)
    problem(as_worker(off.plaintext), 401, "unauthenticated")


@pytest.mark.parametrize("withdraw", ["revoke the token", "disable the worker"])
def test_a_withdrawn_token_works_until_its_cache_entry_expires(
    make_worker, key_cache_clock, withdraw
):
    w = make_worker()
    assert as_worker(w.plaintext).status_code == 200  # now cached
    if withdraw == "revoke the token":
        w.token.revoke()
    else:
        w.row.enabled = False
        w.row.save()
    key_cache_clock(auth.CACHE_TTL.total_seconds() - 0.5)
    assert as_worker(w.plaintext).status_code == 200
    key_cache_clock(1.0)  # past the entry's TTL
    problem(as_worker(w.plaintext), 401, "unauthenticated")
    assert bootstrap.worker_token_cache().get(auth._fingerprint(w.plaintext)) is None


def test_a_group_change_reaches_the_worker_within_the_cache_ttl(make_worker, key_cache_clock):
    w = make_worker()
    assert authenticate_token(w.plaintext).target_capacity == 40
    w.group.target_capacity = 0
    w.group.save()
    key_cache_clock(auth.CACHE_TTL.total_seconds() + 0.5)
    assert authenticate_token(w.plaintext).target_capacity == 0


def test_a_cached_token_needs_no_database(make_worker, django_assert_num_queries):
    w = make_worker()
    assert as_worker(w.plaintext).status_code == 200
    with django_assert_num_queries(0):
        assert as_worker(w.plaintext).status_code == 200


def test_the_token_cache_is_its_own_and_keyed_by_a_hash(make_worker, make_client):
    w, c = make_worker(), make_client()
    assert as_worker(w.plaintext).status_code == 200
    assert auth.authenticate_key(c.plaintext) is not None
    tokens, keys = bootstrap.worker_token_cache()._cache, bootstrap.api_key_cache()._cache
    assert list(tokens) == [auth._fingerprint(w.plaintext)]
    assert list(keys) == [auth._fingerprint(c.plaintext)]
    assert all(len(k) == 64 and w.plaintext not in k for k in tokens)
    bootstrap.reset()
    assert not bootstrap.worker_token_cache()._cache


def test_an_api_key_never_authenticates_a_worker(
    make_worker, make_client, django_assert_num_queries
):
    make_worker()
    c = make_client()
    assert auth.authenticate_key(c.plaintext) is not None  # a good key, cached as a key
    with django_assert_num_queries(0):  # refused by its scheme, before any lookup
        body = problem(as_worker(c.plaintext), 401, "unauthenticated")
    assert c.plaintext not in json.dumps(body)
    assert authenticate_token(c.plaintext) is None


def test_a_worker_token_never_authenticates_an_api_client(api, make_worker, seed):
    seed(n=2)
    w = make_worker()
    assert as_worker(w.plaintext).status_code == 200  # a good token, cached as a token
    response = extract(api(w.plaintext), {"count": 1, "mode": "partial"})
    assert_problem(response, 401, "unauthenticated")
    assert w.plaintext not in response.content.decode()
    assert auth.authenticate_key(w.plaintext) is None
    assert seed.pool.inventory("acme-us") == 2


@pytest.mark.django_db(transaction=True)
def test_postgres_unreachable_still_serves_a_recently_seen_token(make_worker):
    seen, unseen = make_worker(), make_worker("edge-2")
    assert as_worker(seen.plaintext).status_code == 200

    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()), PASSWORD="pg-pw-x")
    try:
        served = as_worker(seen.plaintext)
        refused = as_worker(unseen.plaintext)
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)

    assert served.status_code == 200 and json.loads(served.content)["worker"] == "edge-1"
    body = problem(refused, 503, "store_unavailable")
    assert refused["Retry-After"]
    text = refused.content.decode()
    assert "pg-pw-x" not in text and unseen.plaintext not in text and body["detail"]


@pytest.mark.fault
@pytest.mark.django_db(transaction=True)
def test_postgres_stopped_under_the_api_still_serves_a_recently_seen_token(private_postgres):
    """A real PostgreSQL stops (immediate shutdown, the connection open): a token verified a
    moment ago still authenticates its worker; one that needs PostgreSQL is a 503, never a 500."""
    cluster = private_postgres()
    with default_database_on(cluster):
        group = WorkerGroup.objects.create(name="edge-us", target_capacity=7)
        worker = GatewayWorker.objects.create(name="edge-1", group=group)
        _, seen = WorkerToken.objects.issue(worker)
        _, unseen = WorkerToken.objects.issue(worker)  # valid, but never verified
        assert as_worker(seen).status_code == 200

        stop_immediately(cluster)
        assert not postgres_answers(cluster.url())
        served = as_worker(seen)
        refused = as_worker(unseen)
        refused_again = as_worker(unseen)  # on the connection now known to be broken

    assert served.status_code == 200, served.content
    assert json.loads(served.content)["target_capacity"] == 7
    problem(refused, 503, "store_unavailable")
    assert int(refused["Retry-After"]) >= 1 and unseen not in refused.content.decode()
    problem(refused_again, 503, "store_unavailable")
