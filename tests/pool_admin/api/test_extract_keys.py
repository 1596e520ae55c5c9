"""POST /api/v1/extract: API keys (401) and the in-process key cache, over HTTP."""

from __future__ import annotations

import pytest

from pool_admin import bootstrap
from pool_admin.api import auth
from tests.pool_admin.api.test_extract import URL, assert_problem, extract

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


def test_missing_bad_and_revoked_keys_are_401(api, make_client, seed):
    seed(n=3)
    c = make_client()
    problem = assert_problem(extract(api()), 401, "unauthenticated")
    assert "Bearer" in problem["detail"]
    assert_problem(extract(api(c.plaintext[:-2] + "zz")), 401, "unauthenticated")
    assert_problem(extract(api("garbage")), 401, "unauthenticated")
    response = api().post(URL, {}, format="json", headers={"Authorization": "Basic abc"})
    assert_problem(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")

    assert extract(api(c.plaintext)).status_code == 200
    c.key.revoke()
    bootstrap.api_key_cache().clear()  # what the cache TTL does within 30 s
    assert_problem(extract(api(c.plaintext)), 401, "unauthenticated")

    other = make_client("crawler-2")
    other.row.enabled = False
    other.row.save()
    assert_problem(extract(api(other.plaintext)), 401, "unauthenticated")


@pytest.mark.parametrize("withdraw", ["revoke the key", "disable the client"])
def test_a_withdrawn_key_works_until_its_cache_entry_expires(
    api, make_client, seed, key_cache_clock, withdraw
):
    """No clearing of the cache: the verified key's cache entry lives CACHE_TTL, then PostgreSQL's
    answer (revoked, or client disabled) takes effect."""
    seed(n=4)
    c = make_client()
    client = api(c.plaintext)
    assert extract(client, {"count": 1, "mode": "partial"}).status_code == 200  # now cached
    if withdraw == "revoke the key":
        c.key.revoke()
    else:
        c.row.enabled = False
        c.row.save()

    ttl = auth.CACHE_TTL.total_seconds()
    key_cache_clock(ttl - 0.5)
    cached = extract(client, {"count": 1, "mode": "partial"})
    assert cached.status_code == 200, cached.content
    assert cached.json()["returned"] == 1
    key_cache_clock(1.0)  # past the entry's TTL
    assert_problem(extract(client, {"count": 1, "mode": "partial"}), 401, "unauthenticated")
    assert auth.cached_principal(c.plaintext) is None  # a refused key is not cached either
    assert seed.pool.inventory("acme-us") == 2


def test_the_key_cache_never_holds_more_than_its_bound(api, make_client, seed):
    seed(n=4)
    bound = auth.CACHE_SIZE
    cache = bootstrap.api_key_cache()
    held = cache._cache
    assert held.maxsize == bound
    # Keys verified a moment ago fill the cache to two short of its bound. They are put in
    # as the cache holds them (fingerprint -> principal): verifying that many keys through
    # PostgreSQL would take most of a minute.
    earlier = auth.principal_for_client(make_client("earlier").row, "earlier")
    for n in range(bound - 2):
        cache.put(f"{n:064x}", earlier)
    assert len(held) == bound - 2

    # Four more distinct keys, verified through the API, take it past its bound.
    keys = [make_client(f"crawler-{n}").plaintext for n in range(4)]
    for plaintext in keys:
        response = extract(api(plaintext), {"count": 1, "mode": "partial"})
        assert response.status_code == 200, response.content
        assert len(held) <= bound
    assert len(held) == bound
    assert all(auth.cached_principal(k) is not None for k in keys)  # the newest are kept
    assert f"{0:064x}" not in held and f"{1:064x}" not in held  # the oldest went
    assert f"{2:064x}" in held


def test_a_cached_key_needs_no_database(api, make_client, seed, django_assert_num_queries):
    seed(n=3)
    client = api(make_client().plaintext)
    assert extract(client, {"count": 1, "mode": "partial"}).status_code == 200
    with django_assert_num_queries(0):
        assert extract(client, {"count": 1, "mode": "partial"}).status_code == 200


def test_key_cache_is_keyed_by_a_hash_not_the_key(api, make_client, seed):
    seed(n=1)
    c = make_client()
    assert extract(api(c.plaintext)).status_code == 200
    keys = list(bootstrap.api_key_cache()._cache.keys())
    assert keys and all(c.plaintext not in k for k in keys)
    assert all(len(k) == 64 for k in keys)
